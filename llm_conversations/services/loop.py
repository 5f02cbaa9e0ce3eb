"""The tool loop: call the model, run the tools it asks for, store every turn.

A run is executed as a function of its id: each round loads what it needs from
the database, so a run can be executed by a task-queue worker, and a run
interrupted by a crash resumes where its stored turns end (only the calls still
unanswered are executed). No transaction is held across a provider call or a
tool call. State changes of the run live in :mod:`llm_conversations.services.runs`.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, Unpack

from django.db import IntegrityError, transaction

from llm_conversations import telemetry
from llm_conversations.completions import CompletionResponse, FinishReason
from llm_conversations.conf import conf
from llm_conversations.exceptions import (
    BudgetExceeded,
    ContextOverflow,
    ConversationBusy,
    RunStateError,
    ToolError,
)
from llm_conversations.messages import (
    ChatMessage,
    InvalidMessage,
    MessageInput,
    Role,
    ToolCall,
    unanswered_tool_call_ids,
)
from llm_conversations.models import (
    Decision,
    Run,
    RunStatus,
    TerminationReason,
)
from llm_conversations.parameters import RunParameterInput, RunParameters
from llm_conversations.providers import (
    Provider,
    ProviderError,
    ResponseCompleted,
    get_provider,
)
from llm_conversations.services import answers, leases, policy, run_events, run_log, runs
from llm_conversations.services.attachments import load_attachment_data
from llm_conversations.services.budgets import BudgetGuard, check_start
from llm_conversations.services.context import ContextWindow, check_strategy
from llm_conversations.services.events import (
    LoopEvent,
    MessageStored,
    RunCompleted,
    RunEvent,
    RunFailed,
    RunRequiresAction,
    TextDelta,
    ToolCallStarted,
    ToolResultStored,
)
from llm_conversations.services.store import (
    ConversationRef,
    append_messages,
    conversation_pk,
    load_messages,
    lock_idle_conversation,
)
from llm_conversations.tasks import enqueue_run
from llm_conversations.tool_specs import ToolSpec
from llm_conversations.tools import ToolRegistry, default_registry

__all__ = ["ConversationBusy", "RunStateError", "ToolLoopService"]

logger = logging.getLogger("llm_conversations.loop")

# The unique constraint admitting one active run per conversation (models/runs.py).

RunRef = Run | uuid.UUID | str
"""A run or its id."""


def _run_pk(run: RunRef) -> uuid.UUID | str:
    return run.pk if isinstance(run, Run) else run


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
        message: MessageInput | str,
        *,
        provider: str | None = None,
        tools: Iterable[str] | None = None,
        max_iterations: int | None = None,
        background: bool = False,
        user: Any = None,
        context_strategy: str | None = None,
        **parameters: Unpack[RunParameterInput],
    ) -> Run:
        """Store the user turn and a queued run, atomically; execute it with :meth:`execute`,
        or with ``background=True`` let a task worker execute it (queued once committed).

        ``message`` is the user turn: its text, a ``ChatMessage`` or its dict
        form; ``parameters`` (``RunParameterInput``) are kept on the run for
        its every model call. Errors name the argument in ``field``. Raises
        ``ConversationBusy`` when another run is active, ``InvalidMessage``,
        ``RunStateError`` (a bad limit), ``ToolError`` (an unknown tool),
        ``ProviderNotConfigured`` or ``ParameterError``; nothing is stored then.

        With a ``user`` the run policy applies (``RUN_POLICY``: omitted tools
        and limit default to what it permits; ``RunNotPermitted`` for more)
        and so does ``MAX_ACTIVE_RUNS_PER_USER`` (``TooManyActiveRuns``).
        ``BudgetExceeded`` when the conversation's owner or the conversation has
        spent a budget (docs/costs.md#budgets). ``context_strategy`` (``"error"``,
        ``"truncate"``, ``"summarize"``)
        overrides the provider entry's ``CONTEXT_STRATEGY`` for this run
        (docs/context.md).
        """
        user_turn = _user_turn(message)
        rules = None if user is None else policy.run_policy()
        limit = policy.default_iterations(user, rules) if max_iterations is None else max_iterations
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise RunStateError(
                "invalid_max_iterations",
                "max_iterations must be an integer.",
                field="max_iterations",
            )
        if not 1 <= limit <= conf.MAX_ITERATIONS_LIMIT:
            raise RunStateError(
                "invalid_max_iterations",
                f"max_iterations must be between 1 and {conf.MAX_ITERATIONS_LIMIT}.",
                field="max_iterations",
            )
        name, backend = self._provider_for(provider)
        if tools is None and rules is not None:
            tools = policy.permitted_tools(user, self.registry.names(), rules)
        try:
            offered = self.registry if tools is None else self.registry.subset(tools)
        except ToolError as exc:
            raise exc.within("tools") from None
        chosen = RunParameters.from_input(parameters)
        if rules is not None:
            model = chosen.model or backend.model
            asked = policy.RunRequest(name, model, tuple(offered.names()), limit)
            policy.check_run(user, asked, rules)
        backend.check_parameters(chosen, name=name, tools=offered.names())
        strategy = check_strategy(context_strategy, name, chosen.model or backend.model)
        conversation_id = conversation_pk(conversation)
        check_start(conversation_id)
        try:
            with transaction.atomic():
                # Under the conversation's lock, an active run is seen before
                # the insert: concurrent starts queue here, not on the index.
                lock_idle_conversation(conversation_id)
                policy.lock_active_runs(user)
                run = Run(
                    conversation_id=conversation_id,
                    provider=name,
                    model=backend.model,
                    max_iterations=limit,
                    context_strategy=strategy,
                )
                run.offered_tools = offered.specs()
                run.run_parameters = chosen
                run.save(force_insert=True)
                append_messages(conversation_id, [user_turn], run=run)
                if background:
                    transaction.on_commit(partial(enqueue_run, run.pk))
        except InvalidMessage as exc:
            # The store names the turn messages[0]; here it is the message argument.
            rest = (exc.field or "").removeprefix("messages[0]")
            raise InvalidMessage(exc.code, exc.message, field=f"message{rest}") from None
        except IntegrityError as exc:
            # The one-active-run constraint, for a run inserted without the lock.
            if Run.violates_one_active_run(exc):
                raise ConversationBusy() from None
            raise
        return run

    def send(
        self, conversation: ConversationRef, message: MessageInput | str, **kwargs: Any
    ) -> Run:
        """:meth:`start` then :meth:`execute`: one user turn, answered."""
        return self.execute(self.start(conversation, message, **kwargs))

    # Executing -------------------------------------------------------------

    def execute(self, run: RunRef) -> Run:
        """Run until the run completes, fails, or waits for action; return it."""
        last: LoopEvent | None = None
        for last in self.events(run, stream=False):  # noqa: B007 - only the last one counts
            pass
        if isinstance(last, RunEvent):
            return last.run
        return Run.objects.get(pk=_run_pk(run))

    resume = execute

    def events(self, run: RunRef, *, stream: bool = True) -> Iterator[LoopEvent]:
        """Execute the run, yielding :mod:`~llm_conversations.services.events` as they happen.

        With ``stream=True`` the provider is called in streaming mode and text
        arrives as ``TextDelta`` events. Queued runs and runs left running by
        a crash are executed; finished or waiting runs yield nothing.
        """
        row = Run.objects.get(pk=_run_pk(run))
        if not leases.claim(row, leases.new_owner()):
            return
        limit = conf.RUN_TIMEOUT
        deadline = None if limit is None else time.monotonic() + limit
        mine = runs.held(row)
        try:
            with leases.Heartbeat(row) as heartbeat:
                yield from telemetry.traced_run(row, self._rounds(row, stream, deadline, heartbeat))
        except ContextOverflow as exc:
            reason = TerminationReason.CONTEXT_OVERFLOW
            yield RunFailed(runs.finish(row, RunStatus.FAILED, reason, exc, where=mine))
        except BudgetExceeded as exc:
            reason = TerminationReason.BUDGET_EXCEEDED
            yield RunFailed(runs.finish(row, RunStatus.FAILED, reason, exc, where=mine))
        except ProviderError as exc:
            reason = TerminationReason.PROVIDER_ERROR
            yield RunFailed(runs.finish(row, RunStatus.FAILED, reason, exc, where=mine))
        except Exception as exc:
            logger.exception("Run %s failed", row.pk)
            reason = TerminationReason.ERROR
            yield RunFailed(runs.finish(row, RunStatus.FAILED, reason, exc, where=mine))
        except GeneratorExit:
            # The caller stopped early (a client went away): let another execution claim it.
            leases.release(row)
            raise

    def _rounds(
        self, run: Run, stream: bool, deadline: float | None, heartbeat: leases.Heartbeat
    ) -> Iterator[LoopEvent]:
        _, provider = self._provider_for(run.provider or None)
        mine = runs.held(run)
        specs = run.offered_tools
        parameters = run.run_parameters
        registry = self.registry  # once: MCP tool lists may refresh meanwhile
        offered = ToolRegistry(registry.get(spec.name) for spec in specs if spec.name in registry)
        # Read once: while this execution holds the lease only it appends, and
        # every append checks that this copy is still the whole conversation.
        history = load_messages(run.conversation_id)
        # After a lost worker, a call an earlier attempt logged as started may have run.
        ran_before = run_events.started_call_ids(run.pk) if run.attempts > 1 else set()
        logged: set[str] = set()  # calls this execution logged as started
        model = parameters.model or provider.model
        window = ContextWindow.for_run(run, model, parameters)
        guard = BudgetGuard.for_run(run, model)
        while True:
            # Every write below is conditional on the lease; the heartbeat
            # notices a cancel or a takeover while nothing is written.
            if heartbeat.lost.is_set():
                return
            if deadline is not None and time.monotonic() > deadline:
                late = RunStateError(
                    "run_timeout",
                    f"the run took longer than RUN_TIMEOUT ({conf.RUN_TIMEOUT:g} s).",
                )
                yield RunFailed(runs.finish(run, RunStatus.FAILED, TerminationReason.TIMEOUT, late))
                return
            schema = parameters.response_format
            if schema is not None and answers.ends_with_answer(run, history):
                if (yield from answers.resume_with_answer(run, schema, history[-1], where=mine)):
                    history = load_messages(run.conversation_id)  # with the repair prompt
                    continue
                return
            pending = set(unanswered_tool_call_ids(history))
            if pending:
                calls = [c for c in _last_tool_calls(history) if c.id in pending]
                waiting = runs.waiting_calls(calls, offered, run)
                if waiting:
                    yield RunRequiresAction(runs.pause(run, waiting))
                    return
                started = [c for c in calls if run.decision(c.id) is not Decision.DENIED]
                unlogged = [c for c in started if c.id not in logged]
                if unlogged and run_log.record_live(run, runs.started_events(unlogged)) is None:
                    return
                for call in started:
                    yield ToolCallStarted(call)
                results = runs.answer_calls(
                    calls, offered, run, stop=heartbeat.lost, ran_before=ran_before
                )
                rows = runs.store_results(run, results, history=history)
                if rows is None:
                    return
                history.extend(row.to_chat_message() for row in rows)
                for row in rows:
                    yield ToolResultStored(row)
                continue
            # max_iterations counts model calls; the last one is offered no
            # tools, so the model answers in words.
            closing = run.iterations + 1 >= run.max_iterations
            # Model calls that asked for tools (a repair round follows an answer).
            repairs = answers.repairs(parameters, history, run.iterations)
            worked = run.iterations > repairs
            asked = parameters if run.iterations == 0 else parameters.after_first_call()
            response: CompletionResponse | None = None
            text = run_log.TextBuffer(run)
            offer = [] if closing else specs
            # Fitted to the context window before anything is sent; the stored
            # conversation stays whole.
            sent = history if window is None else window.messages(history, offer, asked)
            if guard is not None:
                estimate = (
                    guard.estimate(history, offer, asked.instructions)
                    if window is None or window.cut is None
                    else window.cut.estimated
                )
                guard.check(estimate)
            for event in self._call(provider, sent, offer, stream, asked):
                if isinstance(event, CompletionResponse):
                    response = event
                    written = text.flush()
                else:
                    written = text.add(event.text)
                if text.stopped or heartbeat.lost.is_set():
                    return  # cancelled or taken over: nothing more from this execution
                if written:
                    yield TextDelta(written)
            if response is None:
                return
            cut_short = closing and (worked or bool(response.tool_calls))
            if closing and response.tool_calls:
                # Offered no tools, a model may still answer with calls; keep its words only.
                response = replace(
                    response,
                    content=response.content or "I stopped before finishing: too many tool rounds.",
                    tool_calls=(),
                )
            final = closing or not response.tool_calls
            verdict = answers.judge(parameters, response) if final else None
            # Calls that will run at once are logged as started with the turn.
            calls = list(response.tool_calls)
            starting = [] if runs.waiting_calls(calls, offered, run) else calls
            fitted = None if window is None else window.fields(response.usage.input_tokens)
            reply = runs.store_reply(
                run,
                response,
                history=history,
                starting=starting,
                context=fitted,
                **answers.stored(verdict),
            )
            if reply is None:
                return
            history.append(reply.to_chat_message())
            logged.update(call.id for call in starting)
            yield MessageStored(reply)
            if verdict is not None and not verdict.valid:
                if (yield from answers.repair_or_fail(run, verdict, repairs, where=mine)):
                    history = load_messages(run.conversation_id)  # with the repair prompt
                    continue
                return
            if final:
                reason = _end_reason(response, cut_short)
                yield RunCompleted(runs.finish(run, RunStatus.COMPLETED, reason, where=mine))
                return

    def _call(
        self,
        provider: Provider,
        history: list[ChatMessage],
        specs: list[ToolSpec],
        stream: bool,
        parameters: RunParameters,
    ) -> Iterator[TextDelta | CompletionResponse]:
        tools = specs or None
        # The bytes of images and files are read for each call, never kept.
        history = load_attachment_data(history)
        if not stream:
            yield provider.complete(history, tools=tools, parameters=parameters)
            return
        for event in provider.stream(history, tools=tools, parameters=parameters):
            if isinstance(event, TextDelta):
                yield event
            elif isinstance(event, ResponseCompleted):
                yield event.response

    # Actions on a waiting run -------------------------------------------------

    def _after_action(self, run: Run, resume: bool) -> Run:
        if resume and run.status == RunStatus.QUEUED:
            return self.execute(run)
        return run

    def approve(
        self, run: RunRef, call_ids: Iterable[str] | None = None, *, resume: bool = True
    ) -> Run:
        """Approve waiting calls (all when ``call_ids`` is ``None``); resume when none waits."""
        return self._after_action(runs.decide(_run_pk(run), call_ids, Decision.APPROVED), resume)

    def deny(
        self, run: RunRef, call_ids: Iterable[str] | None = None, *, resume: bool = True
    ) -> Run:
        """Deny waiting calls: each is answered with an error result saying so."""
        return self._after_action(runs.decide(_run_pk(run), call_ids, Decision.DENIED), resume)

    def submit_tool_outputs(
        self, run: RunRef, outputs: Mapping[str, Any], *, resume: bool = True
    ) -> Run:
        """Store the results of client-side calls: ``{call_id: output}``.

        An output is any value a tool may return, or ``{"output": ..., "is_error": bool}``.
        """
        return self._after_action(runs.submit_outputs(_run_pk(run), outputs), resume)

    def retry(self, run: RunRef, *, background: bool = False, user: Any = None) -> Run:
        """Run a failed run again from its stored turns, as a new attempt.

        Raises ``RunStateError("run_not_failed")`` for a run that did not fail
        and ``ConversationBusy`` when another run of the conversation is active;
        with a ``user``, ``RunNotPermitted`` when the run policy no longer
        permits what the run uses and ``TooManyActiveRuns``; ``BudgetExceeded``
        when a budget of the conversation or its owner is spent.
        """
        row = Run.objects.get(pk=_run_pk(run))
        if user is not None:
            policy.check_run(user, policy.RunRequest.of_run(row))
        check_start(row.conversation_id)
        queued = runs.requeue_failed(row.pk, user=user)
        if background:
            transaction.on_commit(partial(enqueue_run, queued.pk))
            return queued
        return self.execute(queued)

    def cancel(self, run: RunRef) -> Run:
        """Cancel an active run; calls left unanswered get an error result so the
        conversation stays valid."""
        return runs.cancel_run(_run_pk(run))


def _end_reason(response: CompletionResponse, cut_short: bool) -> TerminationReason:
    """Why a run ends with this reply: the model's own stop, or the iteration limit."""
    if response.finish_reason is FinishReason.CONTENT_FILTER:
        return TerminationReason.CONTENT_FILTER
    if response.finish_reason is FinishReason.LENGTH:
        return TerminationReason.LENGTH
    return TerminationReason.MAX_ITERATIONS if cut_short else TerminationReason.COMPLETED


def _user_turn(message: MessageInput | str) -> ChatMessage:
    """The user turn a run starts with; errors name the ``message`` argument."""
    try:
        if isinstance(message, str):
            return ChatMessage.user(message)
        turn = message if isinstance(message, ChatMessage) else ChatMessage.from_dict(message)
    except InvalidMessage as exc:
        raise exc.within("message") from None
    if turn.role is not Role.USER:
        raise InvalidMessage(
            "user_message_required", "a run starts with a user message.", field="message.role"
        )
    return turn
