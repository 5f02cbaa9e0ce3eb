"""A share link's page: the snapshot read-only, and "Continue as a fork".

Everything shown is escaped by the template engine; the page shows what the
API's ``shared/{token}/`` shows, no more: only the messages of the snapshot
(no hidden one), only the attachments they show. An unknown, revoked or
expired token, or a link of a trashed conversation, is the project's 404 page.
With ``SHARE_LINKS_REQUIRE_LOGIN`` an anonymous reader is sent to the login
page first. No answer is for a cache to keep (``never_cache``).

The page's referrer policy is ``same-origin``: its form posts with the page's
own ``Origin``, which Django's CSRF check needs (``no-referrer`` would send
``Origin: null``, refused), and no other site is sent its address (the token).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from llm_conversations.conf import conf
from llm_conversations.conversations.attachments import file_response
from llm_conversations.conversations.history import stored_message
from llm_conversations.conversations.shares import (
    continue_as_fork,
    resolve_share,
    snapshot_attachment,
    snapshot_messages,
)
from llm_conversations.core.content_parts import AttachedPart, ImagePart, TextPart
from llm_conversations.exceptions import LLMConversationsError, ShareError
from llm_conversations.models import (
    MESSAGE_COLUMNS,
    Attachment,
    Conversation,
    ShareLink,
)

__all__ = ["PageEntry", "shared_attachment", "shared_fork", "shared_page"]

TEMPLATE = "llm_conversations/shared.html"


@dataclass(frozen=True, slots=True)
class PageEntry:
    """One message as the page shows it: its role, text, attachments and calls."""

    role: str
    texts: tuple[str, ...]
    images: tuple[str, ...]
    files: tuple[str, ...]
    calls: tuple[tuple[str, str], ...]
    is_error: bool


def _share(token: str) -> ShareLink:
    try:
        return resolve_share(token)
    except ShareError:
        raise Http404("no such share link") from None


def _entries(share: ShareLink) -> list[PageEntry]:
    """The snapshot's messages, oldest first (one query)."""
    entries = []
    for row in snapshot_messages(share).values(*MESSAGE_COLUMNS):
        message = stored_message(row)
        parts = message.parts or ()
        attached = [part for part in parts if isinstance(part, AttachedPart)]
        texts = [part.text for part in parts if isinstance(part, TextPart)]
        if not parts and message.content:
            texts = [message.content]
        entries.append(
            PageEntry(
                role=message.role.value,
                texts=tuple(texts),
                images=tuple(str(p.attachment_id) for p in attached if isinstance(p, ImagePart)),
                files=tuple(str(p.attachment_id) for p in attached if not isinstance(p, ImagePart)),
                calls=tuple(
                    (call.name, json.dumps(call.arguments, ensure_ascii=False))
                    for call in message.tool_calls or ()
                ),
                is_error=message.is_error,
            )
        )
    return entries


def _login_first(request: HttpRequest) -> bool:
    return conf.SHARE_LINKS_REQUIRE_LOGIN and not request.user.is_authenticated


@never_cache
@require_GET
def shared_page(request: HttpRequest, token: str) -> HttpResponseBase:
    """The snapshot, read-only, with a "Continue as a fork" form for signed-in readers."""
    if _login_first(request):
        return redirect_to_login(request.get_full_path())
    share = _share(token)
    return _render(request, share, token, fork=None)


@never_cache
@require_POST
def shared_fork(request: HttpRequest, token: str) -> HttpResponseBase:
    """Continue the snapshot as a conversation of the signed-in reader (CSRF-checked);
    a snapshot that changed while it was forked is the page again, saying so (409)."""
    user = request.user
    if not user.is_authenticated:
        # Back to the page after signing in (the fork is a POST of its form).
        return redirect_to_login(reverse("llm_conversations_pages:shared", args=[token]))
    share = _share(token)
    try:
        fork = continue_as_fork(share, user)
    except Conversation.DoesNotExist:
        raise Http404("no such share link") from None
    except LLMConversationsError as error:
        return _render(request, share, token, fork=None, refused=error.message, status=409)
    return _render(request, share, token, fork=fork, status=201)


def _render(
    request: HttpRequest,
    share: ShareLink,
    token: str,
    *,
    fork: Conversation | None,
    refused: str = "",
    status: int = 200,
) -> HttpResponse:
    context = {
        "share": share,
        "token": token,
        "entries": _entries(share),
        "fork": fork,
        "refused": refused,
        "signed_in": request.user.is_authenticated,
    }
    return render(request, TEMPLATE, context, status=status)


@never_cache
@require_GET
def shared_attachment(request: HttpRequest, token: str, attachment_id: str) -> HttpResponseBase:
    """The bytes of an attachment the snapshot shows; any other one is a 404."""
    if _login_first(request):
        return redirect_to_login(request.get_full_path())
    try:
        attachment = snapshot_attachment(_share(token), attachment_id)
    except Attachment.DoesNotExist:
        raise Http404("no such attachment in this snapshot") from None
    return file_response(attachment)
