"""Runs of the tool loop: start, list, inspect, follow, approve, deny, submit outputs,
retry, cancel.

Runs execute in the request, or with ``background`` (default
``BACKGROUND_RUNS``) in a task worker: the answer is then 202 with the queued
run. With ``stream: true`` (or ``Accept: text/event-stream``) the answer is a
Server-Sent Events stream; the run is started (or the decision stored) first,
so a refused request still gets an ordinary JSON error. ``GET
runs/{id}/events/`` follows a run's log from anywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from django.db import models, transaction
from django.db.models import QuerySet
from django.http import HttpResponseBase
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.pagination import CursorPagination
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle

from llm_conversations.api.errors import ApiError, failed_run_error
from llm_conversations.api.idempotency import IDEMPOTENCY_KEY, idempotent
from llm_conversations.api.schema import (
    AI_SDK_STREAM_NOTE,
    ServerSentEventSerializer,
    describe_run_events,
)
from llm_conversations.api.serializers import (
    RunCreateSerializer,
    RunEventsQuerySerializer,
    RunListQuerySerializer,
    RunOptionsSerializer,
    RunRetrySerializer,
    RunSerializer,
    SubmitToolOutputsSerializer,
    ToolDecisionSerializer,
)
from llm_conversations.api.streams.ag_ui import AG_UI_STREAM_NOTE
from llm_conversations.api.streams.base import LogRenderer
from llm_conversations.api.streams.formats import (
    EVENT_STREAM,
    STREAM_RENDERERS,
    StreamNegotiation,
    StreamRenderer,
    stream_format,
    wants_stream,
)
from llm_conversations.api.streams.responses import executing_stream_response, log_stream_response
from llm_conversations.api.throttling import RunStartThrottle
from llm_conversations.api.views.base import (
    BODY_ERRORS,
    CONVERSATION_ID,
    RunStartingView,
    error_responses,
    valid_query,
)
from llm_conversations.core.messages import MessageInput
from llm_conversations.models import Run, RunEvent, RunStatus
from llm_conversations.runs import ToolLoopService

if TYPE_CHECKING:
    from rest_framework.decorators import ViewSetAction
    from rest_framework.views import AsView, GenericView

__all__ = ["RunViewSet", "RunViews", "run_responses"]

_M = TypeVar("_M", bound=models.Model)

JSON = "application/json"
RUN_ID = OpenApiParameter(
    "run_pk", OpenApiTypes.UUID, OpenApiParameter.PATH, description="A run id."
)

_STREAM = OpenApiResponse(
    ServerSentEventSerializer,
    description=(
        "`stream: true` or `Accept: text/event-stream`: Server-Sent Events "
        f"({describe_run_events()}); each `data:` is a JSON object with `run_id`. "
        f"See docs/api.md. {AI_SDK_STREAM_NOTE} {AG_UI_STREAM_NOTE}"
    ),
)


_LOG_STREAM = OpenApiResponse(
    ServerSentEventSerializer,
    description=(
        "The run's log as Server-Sent Events, each with `id:` (the event id), `event:` and "
        f"`data:` ({describe_run_events()}), a `: keep-alive` comment every "
        "`SSE_HEARTBEAT_SECONDS` while it waits; it ends after `run.completed`, "
        "`run.failed`, `run.cancelled` or `run.requires_action`. See docs/api.md. "
        f"{AI_SDK_STREAM_NOTE} {AG_UI_STREAM_NOTE}"
    ),
)

LAST_EVENT_ID = OpenApiParameter(
    "Last-Event-ID",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description="Resume after this event id (what `EventSource` sends when it reconnects).",
    pattern=r"^[0-9]{1,18}$",
)


RETRY_AFTER = OpenApiParameter(
    "Retry-After",
    OpenApiTypes.INT,
    OpenApiParameter.HEADER,
    description="`throttled`: seconds until a run may be started again (`RUN_RATE`).",
    response=[429],
)


def run_responses(
    ok: int, *errors: int, stream: bool = True, queued: bool = False
) -> dict[Any, Any]:
    responses: dict[Any, Any] = {(ok, JSON): RunSerializer}
    if queued:
        responses[(202, JSON)] = OpenApiResponse(
            RunSerializer,
            description=(
                "`background`: the run, queued for a task worker; `if_busy: enqueue` on a "
                "busy conversation: the run, `waiting` behind the one `waits_for` names."
            ),
        )
    if stream:
        responses[(200, EVENT_STREAM)] = _STREAM
    if 500 in errors:
        # A request that executes a run answers a failed run by why it failed.
        errors = (*errors, 422, 429, 502, 504)
    responses.update(error_responses(*BODY_ERRORS, *errors, media_type=JSON))
    return responses


class RunPagination(CursorPagination):
    """Newest runs first, by cursor; ``?limit=`` runs a page (validated by
    :class:`RunListQuerySerializer` first)."""

    ordering = "-created_at"
    page_size = 20
    page_size_query_param = "limit"
    max_page_size = 100


def _after_id(request: Request) -> int:
    """Where a log stream resumes: ``Last-Event-ID``, else ``?after=``, else the start.
    The query is checked either way: a bad ``after`` is refused beside a header too."""
    after: int | None = valid_query(RunEventsQuerySerializer, request).validated_data.get("after")
    header = request.headers.get("Last-Event-ID")
    if header is not None:
        if not (header.isascii() and header.isdigit() and len(header) <= 18):
            raise ApiError(
                400,
                "invalid",
                "Last-Event-ID must be an event id (digits).",
                field="Last-Event-ID",
            )
        return int(header)
    return after or 0


class RunSchema(AutoSchema):
    """No ``?format=`` parameter: streams are chosen by ``stream`` or ``Accept``.

    ``?format=ai-sdk`` (the AI SDK's stream) is described in the stream responses'
    text rather than as a parameter: its chunks are not the events the
    ``text/event-stream`` schema describes.
    """

    def _get_format_parameters(self) -> list[dict[str, Any]]:
        return []


class RunViews(RunStartingView, viewsets.GenericViewSet[_M], Generic[_M]):
    """Views that start or resume runs and answer with the run or its stream.

    Every such view is outside ``ATOMIC_REQUESTS``' transaction: runs call
    providers and tools, which must not hold a transaction open.
    """

    schema = RunSchema()
    renderer_classes = [JSONRenderer, *STREAM_RENDERERS]
    content_negotiation_class = StreamNegotiation

    @classmethod
    def as_view(
        cls, actions: dict[str, str | ViewSetAction[Any]] | None = None, **initkwargs: Any
    ) -> AsView[GenericView]:
        """The router's views, each excluded from ``ATOMIC_REQUESTS``."""
        return transaction.non_atomic_requests(super().as_view(actions, **initkwargs))

    def finalize_response(  # type: ignore[override]
        self, request: Request, response: HttpResponseBase, *args: Any, **kwargs: Any
    ) -> HttpResponseBase:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[arg-type]
        if isinstance(response, Response) and isinstance(
            response.accepted_renderer, StreamRenderer
        ):
            # Only streams are event streams; errors and runs stay JSON.
            response.accepted_renderer = JSONRenderer()
            response.accepted_media_type = JSON
        return response

    def get_throttles(self) -> list[BaseThrottle]:
        """The project's throttles, and ``RUN_RATE`` on what starts a run."""
        throttles = super().get_throttles()
        if self.action in ("create", "retry", "edit", "regenerate"):
            throttles.append(RunStartThrottle())
        return throttles

    def _answer(self, run: Run, ok: int = status.HTTP_200_OK) -> Response:
        """The run, or the error that ended it."""
        data = RunSerializer(run).data
        error = failed_run_error(run, data)
        if error is not None:
            raise error
        return Response(data, status=ok)

    def _start(
        self,
        request: Request,
        message: MessageInput | str,
        body: RunOptionsSerializer,
        *,
        stream: bool,
        fmt: type[LogRenderer] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> HttpResponseBase:
        """Start a run of the URL's conversation for ``message``, with the options ``body``
        validated (``metadata`` goes on the user turn), and answer with it (:meth:`_started`)."""
        service = ToolLoopService()
        options = body.start_options()
        # A run this request executes is stored claimed: no claim of its own.
        claim = not options["background"]
        run = service.start(
            self.get_conversation(),
            message,
            user=request.user,
            metadata=metadata,
            claim=claim,
            **options,
        )
        return self._started(request, service, run, stream, options["background"], fmt=fmt)

    def _started(
        self,
        request: Request,
        service: ToolLoopService,
        run: Run,
        stream: bool,
        background: bool,
        *,
        fmt: type[LogRenderer] | None = None,
    ) -> HttpResponseBase:
        """The answer to a request that started ``run``: its stream (in the request's format
        unless ``fmt`` says), the queued run (``background``), or the run once
        executed here. A run waiting behind the active one is answered as a background
        run: a task worker executes it when its turn comes."""
        background = background or run.status == RunStatus.WAITING
        if wants_stream(request, stream):
            fmt = fmt or stream_format(request)
            if background:
                # A worker executes it: follow its log from the start.
                return log_stream_response(request._request, run.pk, 0, fmt)
            return executing_stream_response(request._request, service, run, fmt)
        if background:
            return Response(RunSerializer(run).data, status=status.HTTP_202_ACCEPTED)
        done = service.execute(run)
        if done.status in (RunStatus.QUEUED, RunStatus.RUNNING):
            # Another worker took the run over (this request's lease lapsed): it goes
            # on there, as a background run does.
            return Response(RunSerializer(done).data, status=status.HTTP_202_ACCEPTED)
        return self._answer(done, status.HTTP_201_CREATED)


class RunViewSet(RunViews[Run]):
    """Runs of one of the caller's conversations."""

    start_actions = frozenset({"create", "retry", "approve", "deny", "submit_tool_outputs"})
    queryset = Run.objects.all()
    serializer_class = RunSerializer
    lookup_url_kwarg = "run_pk"
    pagination_class = RunPagination

    def get_queryset(self) -> QuerySet[Run]:
        """The runs of the caller's conversation the URL names (404 for another's)."""
        return super().get_queryset().filter(conversation=self.get_conversation())

    @extend_schema(
        summary="Start a run",
        parameters=[CONVERSATION_ID, IDEMPOTENCY_KEY, RETRY_AFTER],
        request=RunCreateSerializer,
        responses=run_responses(201, 409, 422, 429, 500, 502, queued=True),
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        """Store the user turn and answer it; while a run is active, what ``if_busy`` says
        (409 ``conversation_busy`` for ``reject``, 202 with the waiting run for ``enqueue``), 403 for what the run policy does not permit, 429 over ``RUN_RATE`` or
        ``MAX_ACTIVE_RUNS_PER_USER``."""
        return idempotent(request, lambda: self._create(request))

    def _create(self, request: Request) -> HttpResponseBase:
        self.get_conversation()  # 404 before the body is read
        body = self.validated_body(RunCreateSerializer)
        return self._start(
            request, body.validated_data["message"], body, stream=body.validated_data["stream"]
        )

    @extend_schema(
        summary="List runs",
        parameters=[CONVERSATION_ID, RunListQuerySerializer],
        responses={(200, JSON): RunSerializer(many=True), **error_responses(400, media_type=JSON)},
    )
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """The conversation's runs, newest first, a page at a time (``next`` and ``previous``)."""
        valid_query(RunListQuerySerializer, request)
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(
        summary="Follow a run's events",
        parameters=[CONVERSATION_ID, RUN_ID, RunEventsQuerySerializer, LAST_EVENT_ID],
        responses={
            (200, EVENT_STREAM): _LOG_STREAM,
            **error_responses(400, media_type=JSON),
        },
    )
    @action(detail=True, methods=["get"])
    def events(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        """The run's event log as Server-Sent Events, live while it executes anywhere."""
        after = _after_id(request)
        run = self.get_object()
        if after and not RunEvent.objects.filter(run_id=run.pk, pk=after).exists():
            # Another run's id would skip or wait for events this run never logs.
            raise ApiError(
                400,
                "unknown_event",
                "not an event of this run: resume from an id its own stream sent.",
                field="Last-Event-ID" if "Last-Event-ID" in request.headers else "after",
            )
        return log_stream_response(request._request, run.pk, after, stream_format(request))

    @extend_schema(
        summary="Get a run",
        parameters=[CONVERSATION_ID, RUN_ID],
        responses={(200, JSON): RunSerializer, **error_responses(media_type=JSON)},
    )
    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """The run as it stands."""
        return Response(self.get_serializer(self.get_object()).data)

    def _decide(
        self, request: Request, decision: Literal["approve", "deny", "outputs"]
    ) -> HttpResponseBase:
        """Store the body's answers to the run's waiting calls (``decision``: ``approve``,
        ``deny`` or ``outputs``); the run resumes, in the request or its stream."""
        run = self.get_object()
        answers: dict[str, Any]
        if decision == "outputs":
            outputs = self.validated_body(SubmitToolOutputsSerializer)
            body, answers = outputs.validated_data, {"outputs": outputs.outputs()}
        else:
            body = self.validated_body(ToolDecisionSerializer).validated_data
            # Omitted ids (None) are every call waiting for approval.
            answers = {
                decision: body.get("tool_call_ids"),
                "reason": body["reason"],
                "digest": body.get("digest"),
            }
        stream = wants_stream(request, body["stream"])
        service = ToolLoopService()
        run = service.answer(run.pk, **answers, resume=not stream, user=request.user)
        if stream:
            return executing_stream_response(request._request, service, run, stream_format(request))
        return self._answer(run)

    @extend_schema(
        summary="Approve waiting tool calls",
        parameters=[CONVERSATION_ID, RUN_ID],
        request=ToolDecisionSerializer,
        responses=run_responses(200, 409, 500, 502),
    )
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        """Approve calls (all waiting ones by default); the run resumes when none waits."""
        return self._decide(request, "approve")

    @extend_schema(
        summary="Deny waiting tool calls",
        parameters=[CONVERSATION_ID, RUN_ID],
        request=ToolDecisionSerializer,
        responses=run_responses(200, 409, 500, 502),
    )
    @action(detail=True, methods=["post"])
    def deny(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        """Deny calls: each is answered with an error result saying so."""
        return self._decide(request, "deny")

    @extend_schema(
        summary="Submit outputs of client-side tools",
        parameters=[CONVERSATION_ID, RUN_ID],
        request=SubmitToolOutputsSerializer,
        responses=run_responses(200, 409, 500, 502),
    )
    @action(detail=True, methods=["post"])
    def submit_tool_outputs(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        """Store client-side results; the run resumes when no call waits."""
        return self._decide(request, "outputs")

    @extend_schema(
        summary="Retry a failed run",
        parameters=[CONVERSATION_ID, RUN_ID, RETRY_AFTER],
        request=RunRetrySerializer,
        responses=run_responses(200, 409, 429, 500, 502, stream=False, queued=True),
    )
    @action(detail=True, methods=["post"])
    def retry(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Run a failed run again from its stored turns; 409 ``run_not_failed`` otherwise."""
        run = self.get_object()
        background = self.validated_body(RunRetrySerializer).validated_data["background"]
        service = ToolLoopService()
        if background:
            queued = service.retry(run.pk, background=True, user=request.user)
            return Response(RunSerializer(queued).data, status=status.HTTP_202_ACCEPTED)
        return self._answer(service.retry(run.pk, user=request.user))

    @extend_schema(
        summary="Cancel a run",
        parameters=[CONVERSATION_ID, RUN_ID],
        request=None,
        responses={(200, JSON): RunSerializer, **error_responses(409, media_type=JSON)},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Cancel an active run; calls left unanswered get an error result."""
        return Response(RunSerializer(ToolLoopService().cancel(self.get_object().pk)).data)
