"""The base of the views that start or resume runs (``RunViews``: ``runs/``, ``chat/``,
forks) and how their answers are described (``run_responses``, ``RUN_ID``, ...).

A run executes in the request, or with ``background`` (default
``BACKGROUND_RUNS``) in a task worker: the answer is then 202 with the queued
run. With ``stream: true`` (or ``Accept: text/event-stream``) the answer is a
Server-Sent Events stream; the run is started (or the decision stored) first,
so a refused request still gets an ordinary JSON error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

from django.db import models, transaction
from django.http import HttpResponseBase
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import status, viewsets
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle

from llm_conversations.api.errors import failed_run_error
from llm_conversations.api.schema import (
    AI_SDK_STREAM_NOTE,
    ServerSentEventSerializer,
    describe_run_events,
)
from llm_conversations.api.serializers import RunOptionsSerializer, RunSerializer
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
from llm_conversations.api.views.base import BODY_ERRORS, RunStartingView, error_responses
from llm_conversations.core.messages import MessageInput
from llm_conversations.models import Run, RunStatus
from llm_conversations.runs import ToolLoopService

if TYPE_CHECKING:
    from rest_framework.decorators import ViewSetAction
    from rest_framework.views import AsView, GenericView

__all__ = ["JSON", "RUN_ID", "RunViews", "run_responses"]

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
