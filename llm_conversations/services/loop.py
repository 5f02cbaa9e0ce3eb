"""The tool loop: call the model, run the tools it asks for, store every turn.

A run is executed as a function of its id: each round loads what it needs from
the database, so a run can be executed by a task-queue worker, and a run
interrupted by a crash resumes where its stored turns end (only the calls still
unanswered are executed). No transaction is held across a provider call or a
tool call.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import IntegrityError, connections, transaction
from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone

from llm_conversations.completions import CompletionResponse
from llm_conversations.conf import conf
from llm_conversations.messages import (
    ChatMessage,
    InvalidMessage,
    MessageInput,
    Role,
    ToolCall,
    as_chat_messages,
    unanswered_tool_call_ids,
)
from llm_conversations.models import ACTIVE_RUN_STATUSES, Message, Run, RunStatus
from llm_conversations.providers import (
    Provider,
    ProviderError,
    ResponseCompleted,
    get_provider,
)
from llm_conversations.services.events import (
    LoopEvent,
    MessageStored,
    RunCompleted,
    RunFailed,
    RunRequiresAction,
    TextDelta,
    ToolCallStarted,
    ToolResultStored,
)
from llm_conversations.services.store import (
    ConversationRef,
    append_completion,
    append_messages,
    conversation_pk,
    load_messages,
)
from llm_conversations.signals import run_finished
from llm_conversations.tool_specs import ToolSpec
from llm_conversations.tools import ToolRegistry, default_registry, tool_result_message

__all__ = ["ConversationBusy", "RunStateError", "ToolLoopService"]

logger = logging.getLogger("llm_conversations.loop")

DENIED = "The operator denied this tool call."
CANCELLED = "The run was cancelled before this tool call ran."


class ConversationBusy(Exception):
    """Another run of the conversation is still active."""

    code = "conversation_busy"


class RunStateError(ValueError):
    """A request does not fit the run's state (``code`` says why)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _last_tool_calls(history: Sequence[ChatMessage]) -> tuple[ToolCall, ...]:
    for message in reversed(history):
        if message.role is Role.ASSISTANT:
            return message.tool_calls or ()
    return ()


class ToolLoopService:
    """Runs conversations through a provider and a set of tools.

    ``provider`` is a name of ``LLM_CONVERSATIONS["PROVIDERS"]`` (the default
    provider when ``None``) or a ``Provider`` instance; ``tools`` is the
    registry tools are offered from (the settings' ``TOOLS`` when ``None``).
    A worker that resumes runs must be built with the same tools.
    """

    def __init__(
        self,
        provider: str | Provider | None = None,
        *,
        tools: ToolRegistry | None = None,
    ) -> None:
        self._provider = provider
        self._tools = tools

    @property
    def registry(self) -> ToolRegistry:
        return self._tools if self._tools is not None else default_registry()

    def _provider_for(self, name: str | None) -> tuple[str, Provider]:
        """The provider called ``name``; ``None`` means this service's own.

        A service built with an instance records it under its backend name.
        """
        if isinstance(self._provider, Provider) and name in (None, self._provider.backend):
            return self._provider.backend, self._provider
        chosen = name or (self._provider if isinstance(self._provider, str) else None)
        chosen = chosen or conf.DEFAULT_PROVIDER
        return chosen, get_provider(chosen)

    # Starting --------------------------------------------------------------

    def start(
        self,
        conversation: ConversationRef,
        message: MessageInput,
        *,
        provider: str | None = None,
        tools: Iterable[str] | None = None,
        max_iterations: int | None = None,
    ) -> Run:
        """Store the user turn and a queued run, atomically; execute it with :meth:`execute`.

        Raises ``ConversationBusy`` when another run is active, ``InvalidMessage``
        for a bad message, ``RunStateError`` for a bad limit, ``ToolError`` for
        an unknown tool name, ``ProviderNotConfigured`` for an unknown provider.
        """
        (user_turn,) = as_chat_messages([message])
        if user_turn.role is not Role.USER:
            raise InvalidMessage(
                "user_message_required", "a run starts with a user message.", field="role"
            )
        limit = conf.MAX_ITERATIONS if max_iterations is None else max_iterations
        if not 1 <= limit <= conf.MAX_ITERATIONS_LIMIT:
            raise RunStateError(
                "invalid_max_iterations",
                f"max_iterations must be between 1 and {conf.MAX_ITERATIONS_LIMIT}.",
            )
        name, backend = self._provider_for(provider)
        offered = self.registry if tools is None else self.registry.subset(tools)
        conversation_id = conversation_pk(conversation)
        try:
            with transaction.atomic():
                run = Run.objects.create(
                    conversation_id=conversation_id,
                    provider=name,
                    model=backend.model,
                    tools=[spec.to_wire() for spec in offered.specs()],
                    max_iterations=limit,
                )
                append_messages(conversation_id, [user_turn], run=run)
        except IntegrityError:
            # SQLite does not name the violated partial index, so ask.
            if Run.objects.filter(
                conversation_id=conversation_id, status__in=ACTIVE_RUN_STATUSES
            ).exists():
                raise ConversationBusy(
                    "another run of this conversation is still active."
                ) from None
            raise
        return run

    def send(self, conversation: ConversationRef, message: MessageInput, **kwargs: Any) -> Run:
        """:meth:`start` then :meth:`execute`: one user turn, answered."""
        return self.execute(self.start(conversation, message, **kwargs).pk)

    # Executing -------------------------------------------------------------

    def execute(self, run_id: Any) -> Run:
        """Run until the run completes, fails, or waits for action; return it."""
        last: LoopEvent | None = None
        for last in self.events(run_id, stream=False):  # noqa: B007 - only the last one counts
            pass
        if isinstance(last, RunCompleted | RunFailed | RunRequiresAction):
            return last.run
        return Run.objects.get(pk=run_id)

    resume = execute

    def events(self, run_id: Any, *, stream: bool = True) -> Iterator[LoopEvent]:
        """Execute the run, yielding :mod:`~llm_conversations.services.events` as they happen.

        With ``stream=True`` the provider is called in streaming mode and text
        arrives as ``TextDelta`` events. Queued runs and runs left running by
        a crash are executed; finished or waiting runs yield nothing.
        """
        run = Run.objects.get(pk=run_id)
        # A conditional claim: a run finished or cancelled meanwhile stays so.
        claimed = Run.objects.filter(
            pk=run.pk, status__in=(RunStatus.QUEUED, RunStatus.RUNNING)
        ).update(status=RunStatus.RUNNING, started_at=Coalesce(F("started_at"), timezone.now()))
        if not claimed:
            return
        run.status = RunStatus.RUNNING
        try:
            yield from self._rounds(run, stream)
        except ProviderError as exc:
            yield RunFailed(self._finish(run, RunStatus.FAILED, "provider_error", exc))
        except Exception as exc:
            logger.exception("Run %s failed", run.pk)
            yield RunFailed(self._finish(run, RunStatus.FAILED, "error", exc))

    def _rounds(self, run: Run, stream: bool) -> Iterator[LoopEvent]:
        _, provider = self._provider_for(run.provider or None)
        specs = [ToolSpec(**item["function"]) for item in run.tools]
        offered = ToolRegistry(
            self.registry.get(spec.name) for spec in specs if spec.name in self.registry
        )
        while True:
            if self._status(run) != RunStatus.RUNNING:
                return
            history = load_messages(run.conversation_id)
            pending = set(unanswered_tool_call_ids(history))
            if pending:
                calls = [c for c in _last_tool_calls(history) if c.id in pending]
                waiting = self._waiting(calls, offered, run.decisions)
                if waiting:
                    yield RunRequiresAction(self._pause(run, waiting))
                    return
                for call in calls:
                    if run.decisions.get(call.id) != "denied":
                        yield ToolCallStarted(call)
                results = self._run_tools(calls, offered, run.decisions)
                rows = self._store_results(run, results)
                if rows is None:
                    return
                for row in rows:
                    yield ToolResultStored(row)
                continue
            closing = run.iterations >= run.max_iterations
            response: CompletionResponse | None = None
            for event in self._call(provider, history, [] if closing else specs, stream):
                if isinstance(event, CompletionResponse):
                    response = event
                else:
                    yield event
            assert response is not None
            if closing and response.tool_calls:
                # Offered no tools, a model may still answer with calls; keep its words only.
                response = CompletionResponse(
                    response.content or "I stopped before finishing: too many tool rounds.",
                    usage=response.usage,
                    model=response.model,
                    provider=response.provider,
                    raw_finish_reason=response.raw_finish_reason,
                )
            reply = self._store_reply(run, response)
            if reply is None:
                return
            yield MessageStored(reply)
            if closing:
                yield RunCompleted(self._finish(run, RunStatus.COMPLETED, "max_iterations"))
                return
            if not response.tool_calls:
                yield RunCompleted(self._finish(run, RunStatus.COMPLETED, "completed"))
                return

    def _call(
        self,
        provider: Provider,
        history: list[ChatMessage],
        specs: list[ToolSpec],
        stream: bool,
    ) -> Iterator[TextDelta | CompletionResponse]:
        tools = specs or None
        if not stream:
            yield provider.complete(history, tools=tools)
            return
        for event in provider.stream(history, tools=tools):
            if isinstance(event, TextDelta):
                yield event
            elif isinstance(event, ResponseCompleted):
                yield event.response

    def _store_reply(self, run: Run, response: CompletionResponse) -> Message | None:
        usage = response.usage
        with transaction.atomic():
            # The conditional update locks the run; a run cancelled while the
            # provider answered matches nothing and keeps no late reply.
            counted = Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
                iterations=F("iterations") + 1,
                input_tokens=F("input_tokens") + usage.input_tokens,
                output_tokens=F("output_tokens") + usage.output_tokens,
                total_tokens=F("total_tokens") + (usage.total_tokens or 0),
                cached_tokens=F("cached_tokens") + (usage.cached_tokens or 0),
            )
            if not counted:
                return None
            row = append_completion(run.conversation_id, response, run=run)
        run.iterations += 1
        return row

    @staticmethod
    def _store_results(run: Run, results: list[ChatMessage]) -> list[Message] | None:
        with transaction.atomic():
            # Lock the run; one cancelled while its tools ran has answered
            # the calls already, so these late results are dropped.
            if not Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
                updated_at=timezone.now()
            ):
                return None
            return append_messages(run.conversation_id, results, run=run)

    # Tools -----------------------------------------------------------------

    @staticmethod
    def _waiting(
        calls: Sequence[ToolCall], offered: ToolRegistry, decisions: Mapping[str, str]
    ) -> list[dict[str, Any]]:
        """Calls that need a person or a frontend before the turn's calls may run."""
        waiting = []
        for call in calls:
            if call.name not in offered:
                continue
            tool = offered.get(call.name)
            if tool.is_client_side:
                reason = "client_side"
            elif tool.requires_approval and call.id not in decisions:
                reason = "requires_approval"
            else:
                continue
            waiting.append({**call.to_stored(), "reason": reason})
        return waiting

    @staticmethod
    def _run_tools(
        calls: Sequence[ToolCall], offered: ToolRegistry, decisions: Mapping[str, str]
    ) -> list[ChatMessage]:
        """Answer each call, in call order; several calls run on a bounded thread pool."""

        def answer(call: ToolCall) -> ChatMessage:
            if decisions.get(call.id) == "denied":
                return tool_result_message(call.id, DENIED, is_error=True)
            return offered.execute(call)

        def answer_in_thread(call: ToolCall) -> ChatMessage:
            try:
                return answer(call)
            finally:
                # A tool that used the ORM opened this thread's own connection.
                connections.close_all()

        if len(calls) == 1:
            return [answer(calls[0])]
        with ThreadPoolExecutor(max_workers=min(conf.TOOL_WORKERS, len(calls))) as pool:
            return list(pool.map(answer_in_thread, calls))

    # State changes ---------------------------------------------------------

    @staticmethod
    def _status(run: Run) -> str:
        return Run.objects.values_list("status", flat=True).get(pk=run.pk)

    @staticmethod
    def _pause(run: Run, waiting: list[dict[str, Any]]) -> Run:
        Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
            status=RunStatus.REQUIRES_ACTION, pending_tool_calls=waiting
        )
        run.refresh_from_db()
        return run

    @staticmethod
    def _finish(run: Run, status: str, reason: str, error: BaseException | None = None) -> Run:
        fields: dict[str, Any] = {
            "status": status,
            "termination_reason": reason,
            "pending_tool_calls": [],
            "finished_at": timezone.now(),
        }
        if error is not None:
            fields["error_type"] = type(error).__name__
            # Provider errors are redacted at their source; others are kept short.
            fields["error_message"] = str(error)[:2000]
        # Only an active run ends here; one cancelled meanwhile keeps its state.
        ended = Run.objects.filter(pk=run.pk, status__in=ACTIVE_RUN_STATUSES).update(**fields)
        run.refresh_from_db()
        if ended:
            run_finished.send(sender=Run, run=run)
        return run

    def _locked_waiting_run(self, run_id: Any) -> Run:
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.status != RunStatus.REQUIRES_ACTION:
            raise RunStateError(
                "run_not_waiting", f"the run is {run.status}, not waiting for action."
            )
        return run

    def _after_action(self, run: Run, resume: bool) -> Run:
        if resume and run.status == RunStatus.QUEUED:
            return self.execute(run.pk)
        return run

    @staticmethod
    def _take_waiting(run: Run, reason: str, chosen: Iterable[str] | None) -> list[str]:
        """Check ``chosen`` calls wait for ``reason`` (all such calls when ``None``),
        take them off the run's pending list and set the status that follows."""
        awaiting = [p["id"] for p in run.pending_tool_calls if p["reason"] == reason]
        taken = list(awaiting if chosen is None else chosen)
        unknown = [i for i in taken if i not in awaiting]
        if unknown or not taken:
            raise RunStateError(
                "unknown_tool_call",
                f"no call waiting ({reason}) has id {', '.join(unknown) or '(none given)'}; "
                f"waiting: {', '.join(awaiting) or 'none'}.",
            )
        taken = [i for i in awaiting if i in taken]  # call order, each once
        run.pending_tool_calls = [p for p in run.pending_tool_calls if p["id"] not in taken]
        run.status = RunStatus.REQUIRES_ACTION if run.pending_tool_calls else RunStatus.QUEUED
        return taken

    def _decide(self, run_id: Any, call_ids: Iterable[str] | None, decision: str) -> Run:
        with transaction.atomic():
            run = self._locked_waiting_run(run_id)
            chosen = self._take_waiting(run, "requires_approval", call_ids)
            run.decisions = {**run.decisions, **dict.fromkeys(chosen, decision)}
            run.save(update_fields=["decisions", "pending_tool_calls", "status", "updated_at"])
        return run

    def approve(
        self, run_id: Any, call_ids: Iterable[str] | None = None, *, resume: bool = True
    ) -> Run:
        """Approve waiting calls (all when ``call_ids`` is ``None``); resume when none waits."""
        return self._after_action(self._decide(run_id, call_ids, "approved"), resume)

    def deny(
        self, run_id: Any, call_ids: Iterable[str] | None = None, *, resume: bool = True
    ) -> Run:
        """Deny waiting calls: each is answered with an error result saying so."""
        return self._after_action(self._decide(run_id, call_ids, "denied"), resume)

    def submit_tool_outputs(
        self, run_id: Any, outputs: Mapping[str, Any], *, resume: bool = True
    ) -> Run:
        """Store the results of client-side calls: ``{call_id: output}``.

        An output is any value a tool may return, or ``{"output": ..., "is_error": bool}``.
        """
        with transaction.atomic():
            run = self._locked_waiting_run(run_id)
            submitted = self._take_waiting(run, "client_side", outputs)
            results = []
            for call_id in submitted:
                value = outputs[call_id]
                if (
                    isinstance(value, Mapping)
                    and set(value) <= {"output", "is_error"}
                    and "output" in value
                ):
                    results.append(
                        tool_result_message(
                            call_id, value["output"], is_error=bool(value.get("is_error"))
                        )
                    )
                else:
                    results.append(tool_result_message(call_id, value))
            append_messages(run.conversation_id, results, run=run)
            run.save(update_fields=["pending_tool_calls", "status", "updated_at"])
        return self._after_action(run, resume)

    def cancel(self, run_id: Any) -> Run:
        """Cancel an active run; calls left unanswered get an error result so the
        conversation stays valid."""
        with transaction.atomic():
            run = Run.objects.select_for_update().get(pk=run_id)
            if not run.is_active:
                raise RunStateError("run_not_active", f"the run is already {run.status}.")
            pending = unanswered_tool_call_ids(load_messages(run.conversation_id))
            if pending:
                append_messages(
                    run.conversation_id,
                    [tool_result_message(i, CANCELLED, is_error=True) for i in pending],
                    run=run,
                )
            return self._finish(run, RunStatus.CANCELLED, "cancelled")
