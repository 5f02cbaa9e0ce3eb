"""Runs of the tool loop: start, list, inspect, follow, approve, deny, submit outputs,
retry, cancel.

Their base, :class:`~llm_conversations.api.views.run_starts.RunViews`, chooses how a
run is answered (executed in the request, queued, streamed). ``GET
runs/{id}/events/`` follows a run's log from anywhere.
"""

from __future__ import annotations

from typing import Any, Literal

from django.db.models import QuerySet
from django.http import HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response

from llm_conversations.api.errors import ApiError
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
    RunRetrySerializer,
    RunSerializer,
    SubmitToolOutputsSerializer,
    ToolDecisionSerializer,
)
from llm_conversations.api.streams.ag_ui import AG_UI_STREAM_NOTE
from llm_conversations.api.streams.formats import EVENT_STREAM, stream_format, wants_stream
from llm_conversations.api.streams.responses import executing_stream_response, log_stream_response
from llm_conversations.api.views.base import CONVERSATION_ID, error_responses, valid_query
from llm_conversations.api.views.run_starts import JSON, RUN_ID, RunViews, run_responses
from llm_conversations.models import Run, RunEvent
from llm_conversations.runs import ToolLoopService

__all__ = ["RunViewSet"]


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
