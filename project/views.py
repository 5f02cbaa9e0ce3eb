"""The demo chat page: plain HTML and JavaScript on the REST API; and the React example."""

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie

# The React example's bundle, built by `make install` (npm) from examples/react-chat/.
REACT_BUNDLE = settings.BASE_DIR / "examples" / "react-chat" / "dist" / "app.js"


@login_required
@ensure_csrf_cookie
def chat(request: HttpRequest) -> HttpResponse:
    """The chat page; everything else happens in chat.js through /api/."""
    return render(request, "project/chat.html")


@login_required
@ensure_csrf_cookie
def react_chat(request: HttpRequest) -> HttpResponse:
    """The React example (examples/react-chat/): useChat on the chat endpoints."""
    return render(request, "project/react_chat.html")


def react_chat_bundle(request: HttpRequest) -> FileResponse:
    """The example's JavaScript bundle; 404 until it is built."""
    if not REACT_BUNDLE.is_file():
        raise Http404("examples/react-chat is not built: run `make install` (needs npm).")
    return FileResponse(REACT_BUNDLE.open("rb"), content_type="text/javascript")
