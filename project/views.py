"""The demo chat page: plain HTML and JavaScript on the REST API."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie


@login_required
@ensure_csrf_cookie
def chat(request: HttpRequest) -> HttpResponse:
    """The chat page; everything else happens in chat.js through /api/."""
    return render(request, "project/chat.html")
