"""What every API view shares: error format, permissions, parsers, owner scoping.

Every viewset reads a real queryset scoped to the caller: their conversations
(:func:`owned_conversations`), and the messages, runs and forks of the one the
URL names (:meth:`ApiView.get_conversation`), so DRF's own ``get_object``,
pagination and filters, and the schema, work on them and another user's objects
do not exist (404).
"""

from __future__ import annotations

import uuid
from typing import Any, ClassVar, TypeVar

from django.db.models import OuterRef, QuerySet, Subquery
from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import NotAuthenticated
from rest_framework.permissions import BasePermission
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from llm_conversations.api.errors import api_exception_handler, error_body
from llm_conversations.api.parsers import BodyRequest, BoundedJSONParser, check_text
from llm_conversations.api.permissions import authentication_classes, permission_classes
from llm_conversations.api.serializers import ErrorSerializer, NamesSentFields
from llm_conversations.conversations.costs import with_cost
from llm_conversations.models import ACTIVE_RUN_STATUSES, Conversation, Run
from llm_conversations.runs.start_slots import Slot, slots
from llm_conversations.users import User

__all__ = [
    "CONVERSATION_ID",
    "ApiView",
    "RunStartingView",
    "error_responses",
    "not_found",
    "owned",
    "owned_conversations",
    "parse_uuid",
    "valid_query",
]

_S = TypeVar("_S", bound=serializers.BaseSerializer[Any])

_ERROR_DESCRIPTIONS = {
    400: "Invalid request: `invalid`, a message rule code, or a size limit.",
    401: "Not authenticated (authentication classes that send `WWW-Authenticate`).",
    403: (
        "Not authenticated, or not permitted; for runs, what `RUN_POLICY` does not permit: "
        "`provider_not_permitted`, `model_not_permitted`, `tool_not_permitted`, "
        "`max_iterations_not_permitted`."
    ),
    404: "`not_found`: no such object owned by the caller (or a malformed id).",
    406: "`not_acceptable`: the `Accept` header asks for no format this endpoint answers in.",
    409: (
        "The conversation or run is in the wrong state for this request, or "
        "`idempotency_key_in_use`."
    ),
    411: "`length_required`: a chunked body that cannot be read safely; send `Content-Length`.",
    413: "`too_large`: the body is over `MAX_REQUEST_BYTES` (`details.limit`).",
    415: "`unsupported_media_type`: send `application/json`.",
    422: (
        "`idempotency_key_reused`: the `Idempotency-Key` was sent with another request; "
        "`context_overflow` (requests that execute runs): the conversation did not fit the "
        "model's context window, `details.run` is the failed run."
    ),
    429: (
        "`throttled`: over `RUN_RATE`, or `SHARE_RATE` for share links (see the "
        "`Retry-After` header and `details.retry_after`); "
        "`too_many_active_runs`: `MAX_ACTIVE_RUNS_PER_USER` runs are active; "
        "`too_many_waiting_runs`: `MAX_WAITING_RUNS` runs wait behind the active one; "
        "`budget_exceeded`: a budget is spent (`details.run` when a run failed for it)."
    ),
    500: "`run_failed`: the run failed on the server (a bug); the run records the error.",
    502: (
        "`provider_error`: the provider failed; `invalid_output`: the model's answer did not "
        "match the `response_format`; `details.run` is the failed run."
    ),
    503: (
        "`database_unavailable`: the database is busy or unreachable for now; "
        "`server_busy` (requests that start runs): more than `RUN_START_CONCURRENCY` runs "
        "were being started. Nothing was changed; retry after `Retry-After` seconds. "
        "`worker_lost` (requests that execute runs): the run's workers were lost "
        "(`details.run`)."
    ),
    504: "`run_timeout`: the run ran out of time (`RUN_TIMEOUT`); `details.run` is the failed run.",
}


BODY_ERRORS = (400, 411, 413, 415)
"""What any request with a JSON body may be refused with."""


def error_responses(*codes: int, media_type: str | None = None) -> dict[Any, OpenApiResponse]:
    """Schema entries for error responses; 401, 403, 404, 406 and 503 are always possible."""
    statuses = sorted({401, 403, 404, 406, 503, *codes})
    return {
        ((code, media_type) if media_type else code): OpenApiResponse(
            ErrorSerializer, description=_ERROR_DESCRIPTIONS[code]
        )
        for code in statuses
    }


CONVERSATION_ID = OpenApiParameter(
    "conversation_pk", OpenApiTypes.UUID, OpenApiParameter.PATH, description="A conversation id."
)


@csrf_exempt
def not_found(request: HttpRequest) -> JsonResponse:
    """A path under the API's prefixes that no route takes, whatever the method: the
    API's JSON 404, not the project's HTML page (``api/urls.py``)."""
    return JsonResponse(error_body("not_found", "No such endpoint."), status=404)


def parse_uuid(value: Any) -> uuid.UUID:
    """``value`` as a UUID; anything else does not exist (404)."""
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise Http404 from None


def valid_query(
    serializer_class: type[serializers.Serializer[Any]], request: Request
) -> serializers.Serializer[Any]:
    """The query parameters, validated: a parameter sent empty or malformed is a 400.

    Read as a plain dict (the last value of each), so ``?order=`` is an empty
    value to refuse rather than a missing one to default.
    """
    query = serializer_class(data=request.query_params.dict())
    query.is_valid(raise_exception=True)
    return query


def owned(request: Request) -> QuerySet[Conversation]:
    """The caller's conversations (none for an anonymous caller).

    Every view finds conversations here, and runs and messages through the
    conversation it returns, so another user's objects do not exist for the
    caller (404).
    """
    user = request.user
    if not user.is_authenticated:
        return Conversation.objects.none()
    return Conversation.objects.filter(owner=user)


def signed_in(request: Request) -> User:
    """The caller, who must be signed in: ``not_authenticated`` otherwise (401, or
    403 when the authentication scheme sends no challenge, as DRF does).

    For writes that record who made them (an upload's owner, a rating), where
    a project's permissions may still let an anonymous caller through.
    """
    user = request.user
    if not user.is_authenticated:
        raise NotAuthenticated()
    return user


def owned_conversations(request: Request) -> QuerySet[Conversation]:
    """The caller's conversations, each annotated with its active run id and cost
    (what :class:`ConversationSerializer` shows)."""
    active = Run.objects.filter(
        conversation_id=OuterRef("pk"), status__in=ACTIVE_RUN_STATUSES
    ).values("pk")[:1]
    return with_cost(owned(request).annotate(active_run=Subquery(active)))


class ApiView(APIView):
    """Base of the API's views.

    Errors use the API's one format through ``get_exception_handler``, so the
    host project's ``REST_FRAMEWORK`` settings are left alone; permission and
    authentication classes come from ``LLM_CONVERSATIONS`` on each request.
    """

    parser_classes = [BoundedJSONParser]
    renderer_classes = [JSONRenderer]
    # The router matches any segment as an id; the views answer 404 for one
    # that is not a UUID, in the API's error format.
    lookup_value_regex = "[^/]+"
    body_serializer: serializers.BaseSerializer[Any] | None = None
    _conversation: Conversation | None = None

    def get_exception_handler(self) -> Any:
        return api_exception_handler

    def get_permissions(self) -> list[BasePermission]:
        return [cls() for cls in permission_classes()]

    def get_authenticators(self) -> list[BaseAuthentication]:
        return [cls() for cls in authentication_classes()]

    def initialize_request(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Request:
        """A :class:`BodyRequest`: bodies without a ``Content-Length`` are read too."""
        # DRF's own (a viewset also picks its action there), then the same as a BodyRequest.
        drf_request = super().initialize_request(request, *args, **kwargs)
        return BodyRequest(
            request,
            parsers=drf_request.parsers,
            authenticators=self.get_authenticators(),
            negotiator=drf_request.negotiator,
            parser_context=drf_request.parser_context,
        )

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        for key, values in request.query_params.lists():
            for value in values:
                check_text({key: value})
        if request.method in ("POST", "PUT", "PATCH"):
            # Every body is read and checked (size, depth, text) before the view runs.
            _ = request.data

    def get_conversation(self) -> Conversation:
        """The caller's conversation named by the URL, or 404 (read once a request); not
        annotated: the nested views only need it to scope their objects."""
        if self._conversation is None:
            pk = parse_uuid(self.kwargs["conversation_pk"])
            try:
                conversation = owned(self.request).get(pk=pk)
            except Conversation.DoesNotExist:
                raise Http404 from None
            # Found among the caller's own: its owner is the caller (no query for it).
            conversation.owner = signed_in(self.request)
            self._conversation = conversation
        return self._conversation

    def validated_body(self, serializer_class: type[_S]) -> _S:
        """The request body, validated by ``serializer_class`` (400 otherwise)."""
        serializer = serializer_class(data=self.request.data)
        # Kept so that errors name fields as this body does (sent_names).
        self.body_serializer = serializer
        serializer.is_valid(raise_exception=True)
        return serializer

    def sent_names(self) -> dict[str, str]:
        """How the validated body names values a service names otherwise, for the exception
        handler (:func:`~llm_conversations.api.errors.sent_field`)."""
        body = self.body_serializer
        return body.sent_names() if isinstance(body, NamesSentFields) else {}


class RunStartingView(ApiView):
    """Base of views whose ``start_actions`` start or resume runs: each such request holds
    one of the process's :mod:`~llm_conversations.runs.start_slots` from once it is
    authenticated, permitted, throttled and its body read, until its run is claimed
    or the request ends, so a burst of starts cannot take every connection and
    thread the rest of the site needs, and a caller who is refused (a wrong
    password, over ``RUN_RATE``) never holds a slot while it is refused."""

    start_actions: ClassVar[frozenset[str]] = frozenset()
    _start_slot: Slot | None = None

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if getattr(self, "action", None) in self.start_actions:
            # Refused here (503 server_busy), the request has stored nothing.
            self._start_slot = slots.take()

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().dispatch(request, *args, **kwargs)
        finally:
            if self._start_slot is not None:
                self._start_slot.close()
                self._start_slot = None
