"""One execution of a claimed run, round by round.

Each round fits the history to the context window, checks the budgets, calls
the model (no transaction held), stores its reply and runs the tools it asked
for, until the run completes, fails or waits for someone to act. Every write
is conditional on the run's lease (:mod:`llm_conversations.runs.transitions`);
:class:`~llm_conversations.runs.service.ToolLoopService` claims the run and
turns what escapes into the run's failure.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import replace

from llm_conversations.conf import conf
from llm_conversations.conversations.attachments import load_attachment_data
from llm_conversations.conversations.history import load_history
from llm_conversations.core.completions import CompletionResponse, FinishReason
from llm_conversations.core.messages import ChatMessage, Role, ToolCall, unanswered_tool_call_ids
from llm_conversations.core.parameters import RunParameters
from llm_conversations.core.tool_specs import ToolSpec
from llm_conversations.exceptions import CallInterrupted, RunStateError
from llm_conversations.models import Decision, Run, RunStatus, TerminationReason
from llm_conversations.providers import Provider, ProviderError, ResponseCompleted
from llm_conversations.providers.interrupts import Interrupt
from llm_conversations.runs import (
    decisions,
    event_log,
    event_reader,
    final_answers,
    leases,
    tool_answers,
    transitions,
)
from llm_conversations.runs.budgets import BudgetGuard
from llm_conversations.runs.context_window import ContextWindow
from llm_conversations.runs.events import (
    LoopEvent,
    MessageStored,
    RunCompleted,
    RunFailed,
    RunRequiresAction,
    TextDelta,
    ToolCallStarted,
    ToolResultStored,
)
from llm_conversations.runs.fallbacks import ProviderChain
from llm_conversations.runs.live_connections import return_connection
from llm_conversations.tools import ToolRegistry

__all__ = ["execute_rounds"]


def execute_rounds(
    run: Run,
    chain: ProviderChain,
    registry: ToolRegistry,
    stream: bool,
    deadline: float | None,
    heartbeat: leases.Heartbeat,
) -> Iterator[LoopEvent]:
    """Round after round of a claimed run until it completes, fails or waits.

    ``registry`` is read once (MCP tool lists may refresh meanwhile); the
    history is read once and kept, every append checking it is still whole.
    Each model call goes to the first entry of ``chain`` that answers.
    """
    mine = transitions.held(run)
    specs = run.offered_tools
    parameters = run.run_parameters
    offered = ToolRegistry(registry.get(spec.name) for spec in specs if spec.name in registry)
    # Read once: while this execution holds the lease only it appends, and
    # every append checks that this copy is still the whole conversation.
    # Hidden messages stay in it (positions, pairing) but are never sent;
    # nobody hides one while the run is active.
    history, hidden = load_history(run.conversation_id)
    # After a lost worker, a call an earlier attempt logged as started may have run.
    ran_before = event_reader.started_call_ids(run.pk) if run.attempts > 1 else set()
    logged: set[str] = set()  # calls this execution logged as started
    # Fitting and budgets reckon with the run's own model, which fallbacks stand in for.
    model = parameters.model or chain.primary.model
    window = ContextWindow.for_run(run, model, parameters)
    guard = BudgetGuard.for_run(run, model)
    while True:
        # Every write below is conditional on the lease; the heartbeat
        # notices a cancel or a takeover while nothing is written.
        if heartbeat.lost.is_set():
            return
        if deadline is not None and time.monotonic() > deadline:
            yield _timed_out(run)
            return
        schema = parameters.response_format
        if schema is not None and final_answers.ends_with_answer(run, history):
            if (yield from final_answers.resume_with_answer(run, schema, history[-1], where=mine)):
                history, hidden = load_history(run.conversation_id)  # with the repair prompt
                continue
            return
        pending = set(unanswered_tool_call_ids(history))
        if pending:
            calls = [c for c in _last_tool_calls(history) if c.id in pending]
            waiting = tool_answers.waiting_calls(calls, offered, run)
            if waiting:
                waiting = decisions.decide_by_rule(run, waiting)
            if waiting:
                yield RunRequiresAction(transitions.pause(run, waiting))
                return
            started = [c for c in calls if run.decision(c.id) is not Decision.DENIED]
            unlogged = [c for c in started if c.id not in logged]
            if (
                unlogged
                and event_log.record_live(run, transitions.started_events(unlogged)) is None
            ):
                return
            for call in started:
                yield ToolCallStarted(call)
            results = tool_answers.answer_calls(
                calls, offered, run, stop=heartbeat.lost, ran_before=ran_before
            )
            rows = transitions.store_results(run, results, history=history)
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
        repairs = final_answers.repairs(parameters, history, run.iterations)
        worked = run.iterations > repairs
        asked = parameters if run.iterations == 0 else parameters.after_first_call()
        response: CompletionResponse | None = None
        entry = run.provider
        offer = [] if closing else specs
        # Fitted to the context window before anything is sent; the stored
        # conversation stays whole.
        # A budget already spent stops the run before a summary is asked for.
        sent = _shown(
            history
            if window is None
            else window.messages(
                history,
                offer,
                asked,
                before_summary=None if guard is None else guard.check_spent,
                hidden=hidden,
            ),
            history,
            hidden,
        )
        if guard is not None:
            estimate = (
                guard.estimate(sent, offer, asked.instructions)
                if window is None or window.cut is None
                else window.cut.estimated
            )
            guard.check(estimate)
        # The call itself stops at the run's deadline or a cancel, whatever the
        # provider sends meanwhile (keep-alives, a drip of text).
        interrupt = Interrupt(deadline, heartbeat.lost)
        # The run's entry, then its fallbacks while they fail with retryable errors.
        for attempt in chain.attempts(run, asked):
            if attempt.fell_back is not None:
                yield attempt.fell_back
            text = event_log.TextBuffer(run)
            try:
                for event in _call(
                    attempt.provider, sent, offer, stream, attempt.parameters, interrupt
                ):
                    if isinstance(event, CompletionResponse):
                        response = event
                        written = text.flush()
                    else:
                        written = text.add(event.text)
                    if text.stopped or heartbeat.lost.is_set():
                        attempt.interrupted()
                        return  # cancelled or taken over: nothing more from this execution
                    if written:
                        yield TextDelta(written)
            except CallInterrupted as stopped:
                attempt.interrupted()
                if stopped.timed_out:
                    yield _timed_out(run)
                return
            except ProviderError as failed:
                if chain.failed(attempt, failed):
                    continue
                raise
            chain.succeeded(attempt)
            entry = attempt.entry
            break
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
        verdict = final_answers.judge(parameters, response) if final else None
        # Calls that will run at once are logged as started with the turn.
        calls = list(response.tool_calls)
        starting = [] if tool_answers.waiting_calls(calls, offered, run) else calls
        fitted = None if window is None else window.fields(response.usage.input_tokens)
        reply = transitions.store_reply(
            run,
            response,
            history=history,
            starting=starting,
            context=fitted,
            entry=entry,
            **final_answers.stored(verdict),
        )
        if reply is None:
            return
        history.append(reply.to_chat_message())
        logged.update(call.id for call in starting)
        yield MessageStored(reply)
        if verdict is not None and not verdict.valid:
            if (yield from final_answers.repair_or_fail(run, verdict, repairs, where=mine)):
                history, hidden = load_history(run.conversation_id)  # with the repair prompt
                continue
            return
        if final:
            reason = _end_reason(response, cut_short)
            yield RunCompleted(transitions.finish(run, RunStatus.COMPLETED, reason, where=mine))
            return


def _call(
    provider: Provider,
    history: list[ChatMessage],
    specs: list[ToolSpec],
    stream: bool,
    parameters: RunParameters,
    interrupt: Interrupt,
) -> Iterator[TextDelta | CompletionResponse]:
    tools = specs or None
    # The bytes of images and files are read for each call, never kept.
    history = load_attachment_data(history)
    # No connection is held while the provider works, nor between streamed
    # pieces (the caller logs text meanwhile): see return_connection().
    return_connection()
    if not stream:
        yield provider.complete(history, tools=tools, parameters=parameters, interrupt=interrupt)
        return
    for event in provider.stream(history, tools=tools, parameters=parameters, interrupt=interrupt):
        if isinstance(event, TextDelta):
            # A provider without HTTP (echo, a test's) is checked here, as its text
            # arrives; a whole reply that arrived is kept, deadline or not.
            interrupt.check()
            yield event
            return_connection()
        elif isinstance(event, ResponseCompleted):
            yield event.response


def _shown(
    sent: list[ChatMessage], history: Sequence[ChatMessage], hidden: frozenset[int]
) -> list[ChatMessage]:
    """``sent`` (the history, or the context window's cut of it) less the messages
    of ``history`` at the ``hidden`` positions: the one place they are left out."""
    if not hidden:
        return sent
    left_out = {id(history[position]) for position in hidden}
    return [message for message in sent if id(message) not in left_out]


def _timed_out(run: Run) -> RunFailed:
    """End the run for its ``RUN_TIMEOUT``."""
    late = RunStateError(
        "run_timeout", f"the run took longer than RUN_TIMEOUT ({conf.RUN_TIMEOUT:g} s)."
    )
    return RunFailed(transitions.finish(run, RunStatus.FAILED, TerminationReason.TIMEOUT, late))


def _end_reason(response: CompletionResponse, cut_short: bool) -> TerminationReason:
    """Why a run ends with this reply: the model's own stop, or the iteration limit."""
    if response.finish_reason is FinishReason.CONTENT_FILTER:
        return TerminationReason.CONTENT_FILTER
    if response.finish_reason is FinishReason.LENGTH:
        return TerminationReason.LENGTH
    return TerminationReason.MAX_ITERATIONS if cut_short else TerminationReason.COMPLETED


def _last_tool_calls(history: Sequence[ChatMessage]) -> tuple[ToolCall, ...]:
    for message in reversed(history):
        if message.role is Role.ASSISTANT:
            return message.tool_calls or ()
    return ()
