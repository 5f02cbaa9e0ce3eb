"""``POST conversations/{id}/chat/``: the endpoint of the AI SDK's ``useChat``.

It takes the body ``DefaultChatTransport`` posts (``{id, messages, trigger,
messageId}``) and answers with the UI message stream protocol
(:mod:`llm_conversations.api.ai_sdk`), so a React app talks to a conversation
with ``useChat({transport: new DefaultChatTransport({api})})`` and nothing more.

The stored conversation is the history the model sees; of the client's
messages only the last one is read:

- a user message: its ``text`` parts (joined by blank lines) are the new user
  turn, and a run starts (in the request, or in a task worker per
  ``background`` / ``BACKGROUND_RUNS``, its log then streamed);
- an assistant message (what ``useChat`` sends after ``addToolApprovalResponse``
  or ``addToolOutput``): its tool parts decide the calls the conversation's
  waiting run waits on (``approval.approved``; ``output-available`` /
  ``output-error`` for client-side tools), and the run resumes in the request.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import HttpResponse, HttpResponseBase
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.decorators import action
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from llm_conversations.api.idempotency import IDEMPOTENCY_KEY, idempotent
from llm_conversations.api.serializers import (
    ChatRequestSerializer,
    ChatStopSerializer,
    RunSerializer,
    UIMessageChunkEventSerializer,
)
from llm_conversations.api.streams.ai_sdk import PROTOCOL_HEADER, PROTOCOL_VERSION, AiSdkStream
from llm_conversations.api.streams.formats import EVENT_STREAM
from llm_conversations.api.streams.responses import executing_stream_response, log_stream_response
from llm_conversations.api.ui_messages import UI_MESSAGE_ID, active_stretch, ui_messages
from llm_conversations.api.views.base import (
    BODY_ERRORS,
    CONVERSATION_ID,
    error_responses,
    owned,
)
from llm_conversations.api.views.run_starts import RunViews
from llm_conversations.exceptions import RunStateError
from llm_conversations.models import (
    ACTIVE_RUN_STATUSES,
    MAX_REASON_CHARS,
    Conversation,
    Run,
    RunStatus,
    WaitReason,
)
from llm_conversations.runs import ToolLoopService

__all__ = ["ChatViewSet", "decisions_of"]

# The shape of a UI message, as far as a schema can say it (the parts are the AI SDK's).
_UI_MESSAGES = OpenApiResponse(
    {
        "type": "array",
        "items": {
            "type": "object",
            "required": ["id", "role", "parts"],
            "properties": {
                "id": {"type": "string"},
                "role": {"type": "string", "enum": ["system", "user", "assistant"]},
                "metadata": {"type": "object", "additionalProperties": True},
                "parts": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["type"],
                        "properties": {"type": {"type": "string"}},
                        "additionalProperties": True,
                    },
                },
            },
        },
    },
    description="The conversation as the AI SDK's `UIMessage[]`. See docs/ai-sdk.md.",
)
_CHAT_ID = OpenApiParameter(
    "chat_id",
    str,
    OpenApiParameter.PATH,
    description="The chat's id as `useChat` names it (the conversation is the path's).",
)

_CHAT_STREAM = OpenApiResponse(
    UIMessageChunkEventSerializer,
    description=(
        f"The AI SDK's UI message stream protocol (`{PROTOCOL_HEADER}: {PROTOCOL_VERSION}`): "
        "one JSON chunk per `data:` line, `data: [DONE]` last. See docs/ai-sdk.md."
    ),
)


def decisions_of(
    message: dict[str, Any], run: Run
) -> tuple[list[str], list[str], dict[str, dict[str, Any]], dict[str, str]]:
    """What an assistant UI message decides about the run's waiting calls.

    ``(approved, denied, outputs, reasons)``: call ids approved and denied, the
    outputs of client-side calls, and the reason given with each decision
    (``addToolApprovalResponse({id, approved, reason})``). Parts about other
    calls are ignored.
    """
    waiting = {w.call.id: w.reason for w in run.waiting_calls}
    approved: list[str] = []
    denied: list[str] = []
    outputs: dict[str, dict[str, Any]] = {}
    reasons: dict[str, str] = {}
    for part in message["parts"]:
        call_id = part.get("toolCallId")
        reason = waiting.get(call_id) if isinstance(call_id, str) else None
        approval = part.get("approval")
        if reason == WaitReason.REQUIRES_APPROVAL and isinstance(approval, dict):
            if isinstance(approval.get("approved"), bool):
                (approved if approval["approved"] else denied).append(str(call_id))
                if isinstance(approval.get("reason"), str):
                    reasons[str(call_id)] = approval["reason"][:MAX_REASON_CHARS]
        elif reason == WaitReason.CLIENT_SIDE and part.get("state") == "output-available":
            outputs[str(call_id)] = {"output": part.get("output"), "is_error": False}
        elif reason == WaitReason.CLIENT_SIDE and part.get("state") == "output-error":
            outputs[str(call_id)] = {"output": str(part.get("errorText", "")), "is_error": True}
    return approved, denied, outputs, reasons


class ChatViewSet(RunViews[Conversation]):
    """A conversation as the AI SDK's chat endpoint; outside ``ATOMIC_REQUESTS`` (runs
    call providers and tools). ``RUN_RATE`` counts its starts like ``POST runs/``."""

    # Its answers are streams, or errors in JSON.
    renderer_classes = [JSONRenderer]
    serializer_class = ChatRequestSerializer
    start_actions = frozenset({"create"})
    queryset = Conversation.objects.all()

    def get_queryset(self) -> QuerySet[Conversation]:
        """The caller's conversations."""
        return owned(self.request)

    @extend_schema(
        summary="Chat (AI SDK)",
        parameters=[CONVERSATION_ID, IDEMPOTENCY_KEY],
        request=ChatRequestSerializer,
        responses={
            (200, EVENT_STREAM): _CHAT_STREAM,
            **error_responses(*BODY_ERRORS, 409, 422, media_type="application/json"),
        },
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        """Answer the last UI message: a new user turn, or decisions on a waiting run.
        A repeat with the same ``Idempotency-Key`` and body streams the first one's run."""
        return idempotent(request, lambda: self._chat(request))

    def _chat(self, request: Request) -> HttpResponseBase:
        conversation = self.get_conversation()
        body = self.validated_body(ChatRequestSerializer)
        last = body.validated_data["messages"][-1]
        if last["role"] == "assistant":
            return self._resume(request, conversation, last)
        text = body.validated_data["text"]
        # The client's id for its message: the history endpoint answers with it.
        ui_id = last.get("id")
        metadata = {UI_MESSAGE_ID: ui_id} if ui_id else None
        return self._start(request, text, body, stream=True, fmt=AiSdkStream, metadata=metadata)

    @extend_schema(
        summary="Chat history (AI SDK)",
        parameters=[CONVERSATION_ID],
        responses={(200, "application/json"): _UI_MESSAGES, **error_responses(404)},
    )
    @action(detail=False, methods=["get"])
    def messages(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """The stored conversation as ``UIMessage[]``, to initialise ``useChat`` with."""
        return Response(ui_messages(self.get_conversation(), request.build_absolute_uri))

    @extend_schema(
        summary="Resume the chat's stream (AI SDK)",
        parameters=[CONVERSATION_ID, _CHAT_ID],
        responses={
            (200, EVENT_STREAM): _CHAT_STREAM,
            204: OpenApiResponse(description="No run of the conversation is executing."),
            **error_responses(404, media_type="application/json"),
        },
    )
    def stream(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        """The executing run's stream from the start of its current stretch, or 204.

        What ``useChat({resume: true})`` asks for after a reload
        (``GET {api}/{chatId}/stream``); the history endpoint leaves that stretch out.
        """
        executing = active_stretch(self.get_conversation())
        if executing is None:
            return HttpResponse(status=204)
        run, paused = executing
        return log_stream_response(request._request, run.pk, paused, AiSdkStream)

    @extend_schema(
        summary="Stop the chat's run (AI SDK)",
        parameters=[CONVERSATION_ID, _CHAT_ID],
        request=ChatStopSerializer,
        responses={
            (200, "application/json"): RunSerializer,
            204: OpenApiResponse(description="No run to stop (or `activeStreamId` is stale)."),
            **error_responses(*BODY_ERRORS, media_type="application/json"),
        },
    )
    def stop(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        """Cancel the conversation's active run, keeping the text it streamed as its answer.

        The stop endpoint of the AI SDK's guide to stopping resumable streams
        (``POST {api}/{chatId}/stop``); ``chat.stop()`` alone is a disconnect.
        """
        conversation = self.get_conversation()
        body = self.validated_body(ChatStopSerializer).validated_data
        run = Run.objects.filter(conversation=conversation, status__in=ACTIVE_RUN_STATUSES).first()
        named = body.get("activeStreamId")
        if run is None or (named and named != str(run.pk)):
            return HttpResponse(status=204)
        try:
            stopped = ToolLoopService().cancel(run.pk)
        except RunStateError:  # it ended meanwhile: nothing left to stop
            return HttpResponse(status=204)
        return Response(RunSerializer(stopped).data)

    def _resume(
        self, request: Request, conversation: Conversation, message: dict[str, Any]
    ) -> HttpResponseBase:
        run = Run.objects.filter(
            conversation=conversation, status=RunStatus.REQUIRES_ACTION
        ).first()
        if run is None:
            raise RunStateError(
                "run_not_waiting", "No run of this conversation waits for a decision or an output."
            )
        approved, denied, outputs, reasons = decisions_of(message, run)
        if not (approved or denied or outputs):
            raise RunStateError(
                "unknown_tool_call",
                "The last message decides none of the calls the run waits on.",
                field="messages",
            )
        service = ToolLoopService()
        run = service.answer(
            run.pk,
            approve=approved,
            deny=denied,
            outputs=outputs,
            resume=False,
            user=request.user,
            reasons=reasons,
        )
        return executing_stream_response(request._request, service, run, AiSdkStream)
