"""One execution of a claimed run, round by round.

Each round is one step (:meth:`Execution.step`): run the tools of the calls
the last reply left unanswered (or pause for a person or a client), or
ask the model: fit the history to the context window, check the budgets, call
the model (no transaction held; streamed where the entry allows) and store
its reply. A step says whether another one follows; the run ends, pauses or
is given up inside the step that says no. Every write is conditional on the
run's lease (:mod:`llm_conversations.runs.transitions`);
:class:`~llm_conversations.runs.service.ToolLoopService` claims the run and
turns what escapes into the run's failure.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator, Sequence
from dataclasses import replace
from typing import NamedTuple

from llm_conversations.conf import conf
from llm_conversations.conversations.history import load_history
from llm_conversations.core.completions import CompletionResponse, FinishReason
from llm_conversations.core.messages import ChatMessage, Role, ToolCall
from llm_conversations.core.parameters import RunParameters
from llm_conversations.core.sequence import unanswered_tool_call_ids
from llm_conversations.core.tool_specs import ToolSpec
from llm_conversations.exceptions import CallInterrupted, RunStateError
from llm_conversations.models import Decision, Run, RunStatus, TerminationReason
from llm_conversations.providers import ProviderError
from llm_conversations.providers.interrupts import Interrupt
from llm_conversations.runs import (
    decisions,
    final_answers,
    leases,
    tool_runs,
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
    ToolCallStarted,
    ToolResultStored,
    delta_event,
)
from llm_conversations.runs.fallbacks import ProviderChain
from llm_conversations.runs.final_answers import Steps
from llm_conversations.runs.log.reader import started_call_ids
from llm_conversations.runs.log.writer import DeltaBuffer, EventItem, record_live
from llm_conversations.runs.model_calls import model_reply
from llm_conversations.tools import ToolRegistry

__all__ = ["Execution"]


class Reply(NamedTuple):
    """A model's reply, the ``PROVIDERS`` entry and model that gave it, the deltas
    of its text not logged yet (written with the stored turn), and the context
    window its call was fitted in."""

    response: CompletionResponse
    entry: str
    model: str
    unlogged: list[EventItem]
    window: ContextWindow | None


class Execution:
    """One execution of a claimed run: what it keeps between rounds, and the rounds.

    ``registry`` is read once (MCP tool lists may refresh meanwhile); the
    history is read once and kept, every append checking it is still whole.
    Each model call goes to the first entry of ``chain`` that answers.
    """

    def __init__(
        self,
        run: Run,
        chain: ProviderChain,
        registry: ToolRegistry,
        deadline: float | None,
        heartbeat: leases.Heartbeat,
    ) -> None:
        self.run = run
        self.chain = chain
        self.deadline = deadline
        self.heartbeat = heartbeat
        self.mine = transitions.held(run)
        self.specs = run.offered_tools
        self.parameters = run.run_parameters
        self.offered = ToolRegistry(
            registry.get(spec.name) for spec in self.specs if spec.name in registry
        )
        # Read once: while this execution holds the lease only it appends, and
        # every append checks that this copy is still the whole conversation.
        # Hidden messages stay in it (positions, pairing) but are never sent;
        # nobody hides one while the run is active.
        self.history, self.hidden = leases.claimed_history(run) or load_history(run.conversation_id)
        # After a lost worker, a call an earlier attempt logged as started may have run.
        self.ran_before = started_call_ids(run.pk) if run.attempts > 1 else set()
        self.logged: set[str] = set()  # calls this execution logged as started
        # Fitting and budgets reckon with the run's own model, which fallbacks stand in for.
        model = self.parameters.model or chain.primary.model
        self.window = ContextWindow.for_run(run, model, self.parameters)
        self.guard = BudgetGuard.for_run(run, model)

    def rounds(self) -> Iterator[LoopEvent]:
        """Step after step until the run ends, waits, or this execution stops holding it."""
        while (yield from self.step()):
            pass

    def step(self) -> Steps:
        """One round; whether another follows."""
        # Every write is conditional on the lease; the heartbeat notices a
        # cancel or a takeover while nothing is written.
        if self.heartbeat.lost.is_set():
            return False
        if self.deadline is not None and time.monotonic() > self.deadline:
            yield self._timed_out()
            return False
        schema = self.parameters.response_format
        if schema is not None and final_answers.ends_with_answer(self.run, self.history):
            resumed = yield from final_answers.resume_with_answer(
                self.run, schema, self.history[-1], where=self.mine
            )
            return self._reloaded(resumed)
        unanswered = set(unanswered_tool_call_ids(self.history))
        if unanswered:
            calls = [c for c in _last_tool_calls(self.history) if c.id in unanswered]
            return (yield from self.run_tools(calls))
        return (yield from self.ask_model())

    # Running tools ---------------------------------------------------------

    def run_tools(self, calls: list[ToolCall]) -> Steps:
        """Run the tools of ``calls`` and store their results, or pause for those that
        wait for a person's decision or a client's output."""
        run = self.run
        waiting = tool_runs.waiting_calls(calls, self.offered, run)
        if waiting:
            waiting = decisions.decide_by_rule(run, waiting)
        if waiting:
            yield RunRequiresAction(transitions.pause(run, waiting))
            return False
        started = [c for c in calls if run.decision(c.id) is not Decision.DENIED]
        unlogged = [c for c in started if c.id not in self.logged]
        if unlogged and record_live(run, transitions.started_events(unlogged)) is None:
            return False
        for call in started:
            yield ToolCallStarted(call)
        results = tool_runs.run_tool_calls(
            calls, self.offered, run, stop=self.heartbeat.lost, ran_before=self.ran_before
        )
        rows = transitions.store_results(run, results, history=self.history)
        if rows is None:
            return False
        self.history.extend(row.to_chat_message() for row in rows)
        for row in rows:
            yield ToolResultStored(row)
        return True

    # Asking the model ------------------------------------------------------

    def ask_model(self) -> Steps:
        """Call the model with the history as it fits, and store its reply."""
        run = self.run
        # max_iterations counts model calls; the last one is offered no
        # tools, so the model answers in words.
        closing = run.iterations + 1 >= run.max_iterations
        asked = self.parameters if run.iterations == 0 else self.parameters.after_first_call()
        offer = [] if closing else self.specs
        sent = self._fitted(offer, asked, self.window)
        reply = yield from self._reply(sent, offer, asked)
        if reply is None:
            return False
        return (yield from self.store_reply(reply, closing=closing))

    def _fitted(
        self, offer: list[ToolSpec], asked: RunParameters, window: ContextWindow | None
    ) -> list[ChatMessage]:
        """What the model is sent: the history fitted to ``window`` (the stored
        conversation stays whole), hidden turns left out, within the budgets."""
        guard = self.guard
        # A budget already spent stops the run before a summary is asked for.
        fitted = (
            self.history
            if window is None
            else window.messages(
                self.history,
                offer,
                asked,
                before_summary=None if guard is None else guard.check_spent,
                hidden=self.hidden,
            )
        )
        sent = _shown(fitted, self.history, self.hidden)
        if guard is not None:
            estimate = (
                guard.estimate(sent, offer, asked.instructions)
                if window is None or window.cut is None
                else window.cut.estimated
            )
            guard.check(estimate)
        return sent

    def _reply(
        self, sent: list[ChatMessage], offer: list[ToolSpec], asked: RunParameters
    ) -> Generator[LoopEvent, None, Reply | None]:
        """The reply of the run's entry, or of a fallback while they fail with retryable
        errors; ``None`` when the run stopped running here meanwhile. ``sent`` is
        what the run's own entry is sent; a fallback that cannot read its
        compacted state is sent the history fitted anew."""
        # The call itself stops at the run's deadline or a cancel, whatever the
        # provider sends meanwhile (keep-alives, a drip of text).
        interrupt = Interrupt(self.deadline, (self.heartbeat.lost,))
        for attempt in self.chain.attempts(self.run, asked):
            if attempt.fell_back is not None:
                yield attempt.fell_back
            window = self.window and self.window.for_backend(attempt.provider.backend)
            messages = sent if window is self.window else self._fitted(offer, asked, window)
            text = DeltaBuffer(self.run)
            try:
                response = yield from model_reply(
                    attempt.provider,
                    messages,
                    offer,
                    attempt.parameters,
                    interrupt,
                    text,
                    self.heartbeat.lost,
                )
            except CallInterrupted as stopped:
                attempt.interrupted()
                if stopped.timed_out:
                    yield self._timed_out()
                return None
            except ProviderError as failed:
                if self.chain.failed(attempt, failed):
                    continue
                raise
            if response is None:
                attempt.interrupted()  # cancelled or taken over
                return None
            self.chain.succeeded(attempt)
            model = attempt.parameters.model or attempt.provider.model
            return Reply(response, attempt.entry, model, text.take(), window)
        return None  # the run stopped while a fallback was logged

    def store_reply(self, reply: Reply, *, closing: bool) -> Steps:
        """Store the model's reply; the run completes with a final one, in the same
        transaction, and a final answer that does not match the ``response_format``
        is repaired or fails it."""
        run, parameters, response = self.run, self.parameters, reply.response
        # Model calls that asked for tools (a repair round follows an answer).
        repairs = final_answers.repairs(parameters, self.history, run.iterations)
        cut_short = closing and (run.iterations > repairs or bool(response.tool_calls))
        if closing and response.tool_calls:
            # Offered no tools, a model may still answer with calls; keep its words only.
            response = replace(
                response,
                content=response.content or "I stopped before finishing: too many tool rounds.",
                tool_calls=(),
            )
        final = closing or not response.tool_calls
        judgment = final_answers.judge(parameters, response) if final else None
        # Calls that will run at once are logged as started with the turn.
        calls = list(response.tool_calls)
        starting = [] if tool_runs.waiting_calls(calls, self.offered, run) else calls
        fitted = None if reply.window is None else reply.window.fields(response.usage.input_tokens)
        answered = final and (judgment is None or judgment.valid)
        ending = _end_reason(response, cut_short) if answered else None
        row = transitions.store_reply(
            run,
            response,
            history=self.history,
            starting=starting,
            context=fitted,
            entry=reply.entry,
            model=reply.model,
            unlogged=reply.unlogged,
            ending=ending,
            **final_answers.stored(judgment),
        )
        if row is None:
            return False
        self.history.append(row.to_chat_message())
        self.logged.update(call.id for call in starting)
        for item in reply.unlogged:
            yield delta_event(item)
        yield MessageStored(row)
        if ending is not None:
            yield RunCompleted(run)  # ended with its answer, in the same transaction
            return False
        if judgment is not None and not judgment.valid:
            repaired = yield from final_answers.repair_or_fail(
                run, judgment, repairs, where=self.mine
            )
            return self._reloaded(repaired)
        return True

    def _reloaded(self, going_on: bool) -> bool:
        """After a repair prompt was stored (``going_on``), the history with it."""
        if going_on:
            self.history, self.hidden = load_history(self.run.conversation_id)
        return going_on

    def _timed_out(self) -> RunFailed:
        """End the run for its ``RUN_TIMEOUT``."""
        late = RunStateError(
            "run_timeout", f"the run took longer than RUN_TIMEOUT ({conf.RUN_TIMEOUT:g} s)."
        )
        reason = TerminationReason.TIMEOUT
        return RunFailed(transitions.finish(self.run, RunStatus.FAILED, reason, late))


def _shown(
    sent: list[ChatMessage], history: Sequence[ChatMessage], hidden: frozenset[int]
) -> list[ChatMessage]:
    """``sent`` (the history, or the context window's cut of it) less the messages
    of ``history`` at the ``hidden`` positions: the one place they are left out."""
    if not hidden:
        return sent
    left_out = {id(history[position]) for position in hidden}
    return [message for message in sent if id(message) not in left_out]


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
