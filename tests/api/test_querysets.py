"""Every model viewset reads a real queryset scoped to the caller: DRF's own lookups,
pagination and the schema work on it, and another user's objects do not exist."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.http import Http404
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory
from rest_framework.viewsets import GenericViewSet

from llm_conversations.api.urls import router
from llm_conversations.conversations import create_conversation
from llm_conversations.conversations.attachments import create_attachment
from llm_conversations.conversations.shares import create_share
from llm_conversations.models import Conversation, WebhookEndpoint
from llm_conversations.runs import ToolLoopService
from tests.support.attachment_files import pdf_bytes

pytestmark = pytest.mark.django_db


def view_of(basename: str, user: User, **kwargs: Any) -> Any:
    """The router's viewset ``basename``, as it is set up for a GET by ``user``."""
    viewset = next(entry[1] for entry in router.registry if entry[2] == basename)
    request = Request(APIRequestFactory().get("/"))
    request.user = user
    view = viewset()
    view.setup(request, **kwargs)
    view.format_kwarg, view.action = None, "list"
    return view


def owned_data(user: User) -> Conversation:
    conversation = create_conversation(owner=user, messages=[{"role": "user", "content": "Hi"}])
    ToolLoopService().send(conversation, "hello")
    create_attachment(user, pdf_bytes(), filename=f"{user.username}.pdf")
    WebhookEndpoint.objects.create(
        owner=user, url=f"https://{user.username}.example.com/hooks", secret="s" * 32
    )
    create_share(conversation)
    return conversation


def test_every_model_viewset_is_generic() -> None:
    generic = {entry[2] for entry in router.registry if issubclass(entry[1], GenericViewSet)}
    assert generic == {
        "conversation",
        "fork",
        "message",
        "run",
        "chat",
        "attachment",
        "webhook",
        "share",
        # A run's decision trail: scoped through the run (tests/api/test_decision_trail.py).
        "decision",
    }


@pytest.mark.parametrize(
    ("basename", "nested", "rows"),
    [
        ("conversation", False, 1),
        ("fork", True, 1),
        ("chat", True, 1),
        ("message", True, 3),
        ("run", True, 1),
        ("attachment", False, 1),
        ("webhook", False, 1),
        ("share", True, 1),
    ],
)
def test_a_viewsets_queryset_holds_the_callers_objects_only(
    user: User, other_user: User, basename: str, nested: bool, rows: int
) -> None:
    mine = owned_data(user)
    owned_data(other_user)
    kwargs = {"conversation_pk": str(mine.pk)} if nested else {}
    queryset = view_of(basename, user, **kwargs).get_queryset()
    assert isinstance(queryset, QuerySet)
    assert queryset.count() == rows
    theirs_too = view_of(basename, other_user, **kwargs)
    if nested and basename in ("message", "run", "share"):
        # Nested in a conversation of another user: that conversation does not exist.
        with pytest.raises(Http404):
            theirs_too.get_queryset()
    else:
        assert not set(queryset) & set(theirs_too.get_queryset())
