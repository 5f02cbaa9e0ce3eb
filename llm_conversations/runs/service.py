"""The tool loop: call the model, run the tools it asks for, store every turn.

A run is executed as a function of its id: each round loads what it needs from
the database, so a run can be executed by a task-queue worker, and a run
interrupted by a crash resumes where its stored turns end (only the calls still
unanswered are executed). No transaction is held across a provider call or a
tool call. State changes of the run live in :mod:`llm_conversations.runs.transitions`.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from functools import partial
from typing import Any, Unpack

from django.db import transaction
from django.utils import timezone

from llm_conversations import telemetry
from llm_conversations.conf import conf
from llm_conversations.conversations.history import ConversationRef, conversation_pk
from llm_conversations.core.messages import MessageInput
from llm_conversations.core.parameters import RunParameters
from llm_conversations.exceptions import BudgetExceeded, ContextOverflow, ToolError
from llm_conversations.models import Conversation, Run, RunStatus, TerminationReason
from llm_conversations.providers import Provider, ProviderError, get_provider
from llm_conversations.runs import busy, decisions, leases, policy, start_slots, transitions
from llm_conversations.runs.budgets import check_start
from llm_conversations.runs.context_window import check_strategy
from llm_conversations.runs.events import LoopEvent, RunEnded, RunFailed
from llm_conversations.runs.fallbacks import ProviderChain
from llm_conversations.runs.options import RunOptions
from llm_conversations.runs.rounds import Execution
from llm_conversations.runs.starts import StartRequest, checked_iterations, store_start, user_turn
from llm_conversations.tasks.enqueue import enqueue, task
from llm_conversations.tools import ToolRegistry, default_registry, offered_by_default
from llm_conversations.users import AnyUser

__all__ = ["RunRef", "ToolLoopService", "enqueue_run", "enqueue_waited", "execute_run"]

logger = logging.getLogger("llm_conversations.loop")

RunRef = Run | uuid.UUID | str
"""A run or its id."""


def _run_pk(run: RunRef) -> uuid.UUID | str:
    return run.pk if isinstance(run, Run) else run


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

    def default_tools(self, registry: ToolRegistry | None = None) -> list[str]:
        """The tools a run offers when it names none: every tool of a registry this
        service was given; of the settings' registry, those ``DEFAULT_TOOLS`` says."""
        if self._tools is not None:
            return self._tools.names()
        return offered_by_default(registry or self.registry)

    def _provider_for(self, name: str | None) -> tuple[str, Provider]:
        """The provider called ``name``; ``None`` means this service's own.

        A service built with an instance records it under its backend name.
        """
        if isinstance(self._provider, Provider) and name in (None, self._provider.backend):
            return self._provider.backend, self._provider
        chosen = name or (self._provider if isinstance(self._provider, str) else None)
        chosen = chosen or conf.DEFAULT_PROVIDER
        return chosen, get_provider(chosen)

    def _chain_for(self, name: str | None) -> ProviderChain:
        """The entries the calls of a run on ``name`` go to: it, then its ``FALLBACKS``.

        A service built with an instance calls that instance alone.
        """
        if isinstance(self._provider, Provider) and name in (None, self._provider.backend):
            return ProviderChain.single(self._provider.backend, self._provider)
        chosen, _ = self._provider_for(name)
        return ProviderChain.of_entry(chosen)

    # Starting --------------------------------------------------------------

    def start(
        self,
        conversation: ConversationRef,
        message: MessageInput | str,
        *,
        claim: bool = False,
        **options: Unpack[RunOptions],
    ) -> Run:
        """Store the user turn and a queued run, atomically; execute it with :meth:`execute`,
        or with ``background=True`` let a task worker execute it (queued once committed).

        ``message`` is the user turn: its text, a ``ChatMessage`` or its dict
        form. ``options`` (:class:`~llm_conversations.runs.options.RunOptions`)
        are ``provider``, ``tools``, ``max_iterations``, ``background``,
        ``user``, ``context_strategy``, ``metadata``, ``if_busy`` and the run
        parameters (``RunParameterInput``), kept on the run for its every model
        call; they travel on as one :class:`~llm_conversations.runs.starts.StartRequest`.
        Errors name the argument in ``field``. Raises ``ConversationBusy`` when
        another run is active, ``InvalidMessage``, ``RunStateError`` (a bad
        limit), ``ToolError`` (an unknown tool), ``ProviderNotConfigured`` or
        ``ParameterError``; nothing is stored then.

        With a ``user`` the run policy applies (``RUN_POLICY``: omitted tools
        and limit default to what it permits; ``RunNotPermitted`` for more)
        and so does ``MAX_ACTIVE_RUNS_PER_USER`` (``TooManyActiveRuns``).
        ``BudgetExceeded`` when the conversation's owner or the conversation has
        spent a budget (docs/costs.md#budgets). ``context_strategy`` (``"error"``,
        ``"truncate"``, ``"summarize"``) overrides the provider entry's
        ``CONTEXT_STRATEGY`` for this run (docs/context.md). ``metadata`` is
        stored on the user turn (``Message.metadata``).

        ``if_busy`` (``BUSY_STRATEGY`` when ``None``) says what happens while
        another run of the conversation is active (docs/busy-conversations.md):
        ``"reject"`` raises ``ConversationBusy``; ``"enqueue"`` returns a run
        with status ``waiting`` (``waits_for`` names the run ahead of it) that
        a task worker executes once the runs ahead have ended, whatever
        ``background`` says; ``"interrupt"`` cancels the active run and starts
        this one (``replaced`` names it); ``"rollback"`` also removes the
        cancelled run's turns.

        ``claim`` (not with ``background``) stores the run already running
        here, for :meth:`execute` or :meth:`events` to execute at once with the
        returned instance: one transaction fewer. A run so claimed that is never
        executed is recovered as any whose worker died (leases, the reaper).
        """
        request = StartRequest.of(conversation, message, options, claim=claim)
        when_busy = busy.busy_strategy(request.if_busy)
        turn = user_turn(request.message)
        run = store_start(self._prepared_run(request), turn, when_busy, request)
        if request.background and run.status == RunStatus.QUEUED:
            transaction.on_commit(partial(enqueue_run, run.pk, marked=True))
        return run

    def _prepared_run(self, request: StartRequest) -> Run:
        """The run ``request`` asks for, not saved, once everything that can refuse it
        before anything is stored has been checked (the policy, the limit, the
        tools, the provider, the parameters, the context strategy, the budgets)."""
        user = request.user
        rules = None if user is None else policy.run_policy()
        limit = checked_iterations(request, rules)
        name, backend = self._provider_for(request.provider)
        offered = self._offered(request, rules)
        chosen = RunParameters.from_input(request.parameters)
        model = chosen.model or backend.model
        if user is not None:
            policy.check_run(
                user, policy.RunRequest(name, model, tuple(offered.names()), limit), rules
            )
        backend.check_parameters(chosen, name=name, tools=offered.names())
        strategy = check_strategy(request.context_strategy, name, model)
        conversation_id = conversation_pk(request.conversation)
        check_start(conversation_id)
        run = Run(
            conversation_id=conversation_id,
            provider=name,
            model=backend.model,
            max_iterations=limit,
            context_strategy=strategy,
        )
        if isinstance(request.conversation, Conversation):
            run.conversation = request.conversation  # kept for the tools' context
        run.offered_tools = offered.specs()
        run.run_parameters = chosen
        return run

    def _offered(self, request: StartRequest, rules: policy.RunPolicy | None) -> ToolRegistry:
        """The tools the run offers: those it names, else the defaults (what the
        ``user`` may use of them); ``ToolError`` within ``tools`` for an unknown one."""
        registry = self.registry
        tools = request.tools
        if tools is None:
            tools = self.default_tools(registry)
            if request.user is not None:
                tools = policy.permitted_tools(request.user, tools, rules)
        try:
            return registry.subset(tools)
        except ToolError as exc:
            raise exc.within("tools") from None

    def send(
        self,
        conversation: ConversationRef,
        message: MessageInput | str,
        **options: Unpack[RunOptions],
    ) -> Run:
        """:meth:`start` then :meth:`execute`: one user turn, answered; ``options`` as
        :meth:`start` takes them (:class:`~llm_conversations.runs.options.RunOptions`)."""
        return self.execute(self.start(conversation, message, claim=True, **options))

    # Executing -------------------------------------------------------------

    def execute(self, run: RunRef) -> Run:
        """Run until the run completes, fails, or waits for action; return it."""
        last: LoopEvent | None = None
        for last in self.events(run):  # noqa: B007 - only the last one counts
            pass
        if isinstance(last, RunEnded):
            return last.run
        return Run.objects.get(pk=_run_pk(run))

    def events(self, run: RunRef) -> Iterator[LoopEvent]:
        """Execute the run, yielding :mod:`~llm_conversations.runs.events` as they happen.

        The provider is called in streaming mode unless its entry says
        ``STREAM: False``; text is logged and yielded as ``TextDelta`` events
        as it arrives. Queued runs and runs left running by a crash are
        executed; finished or waiting runs yield nothing.
        """
        if isinstance(run, Run) and leases.holds(run, executing=True):
            row = run  # stored claimed by this process: nothing to read or claim
        else:
            row = Run.objects.get(pk=_run_pk(run))
            if not leases.claim(row, leases.new_owner()):
                return
        # The request that prepared the run (if any) executes it without its start slot.
        start_slots.give_back()
        limit = conf.RUN_TIMEOUT
        deadline = None if limit is None else time.monotonic() + limit
        mine = transitions.held(row)
        try:
            with leases.Heartbeat(row) as heartbeat:
                chain = self._chain_for(row.provider or None)
                execution = Execution(row, chain, self.registry, deadline, heartbeat)
                yield from telemetry.traced_run(row, execution.rounds())
        except ContextOverflow as exc:
            reason = TerminationReason.CONTEXT_OVERFLOW
            yield RunFailed(transitions.finish(row, RunStatus.FAILED, reason, exc, where=mine))
        except BudgetExceeded as exc:
            reason = TerminationReason.BUDGET_EXCEEDED
            yield RunFailed(transitions.finish(row, RunStatus.FAILED, reason, exc, where=mine))
        except ProviderError as exc:
            reason = TerminationReason.PROVIDER_ERROR
            yield RunFailed(transitions.finish(row, RunStatus.FAILED, reason, exc, where=mine))
        except Exception as exc:
            logger.exception("Run %s failed", row.pk)
            reason = TerminationReason.ERROR
            yield RunFailed(transitions.finish(row, RunStatus.FAILED, reason, exc, where=mine))
        except GeneratorExit:
            # The caller stopped early (a client went away): let another execution claim it.
            leases.release(row)
            raise

    # Actions on a waiting run -------------------------------------------------

    def answer(
        self,
        run: RunRef,
        *,
        approve: Iterable[str] | None = (),
        deny: Iterable[str] | None = (),
        outputs: Mapping[str, Any] | None = None,
        resume: bool = True,
        user: AnyUser | None = None,
        reason: str = "",
        reasons: Mapping[str, str] | None = None,
        digest: str | None = None,
    ) -> Run:
        """Answer a waiting run's calls at once; with ``resume``, execute it when none waits.

        ``approve`` and ``deny`` name calls waiting for approval (``None``: every
        one of them; a denied call is answered with an error result saying so);
        ``outputs`` are the results of client-side calls, ``{call_id: output}``,
        an output being any value a tool may return or ``{"output": ...,
        "is_error": bool}``. Everything is stored in one transaction, or nothing:
        ``RunStateError`` ``run_not_waiting``, or ``unknown_tool_call`` for a call
        that does not wait for that answer (or no call named at all).

        Each decision is kept in the approvals trail (``ToolDecision``): who
        (``user``), why (``reasons[call_id]``, else ``reason``), and the digest
        of the calls that waited. A ``digest`` (``Run.approval_digest`` as the
        caller saw it) that no longer matches is ``RunStateError``
        ``stale_decision``.
        """
        answered = decisions.answer_waiting(
            _run_pk(run),
            approve,
            deny,
            outputs,
            user=user,
            reason=reason,
            reasons=reasons,
            digest=digest,
        )
        if resume and answered.status == RunStatus.QUEUED:
            return self.execute(answered)
        return answered

    def approve(
        self,
        run: RunRef,
        call_ids: Iterable[str] | None = None,
        *,
        resume: bool = True,
        user: AnyUser | None = None,
        reason: str = "",
    ) -> Run:
        """Approve waiting calls (all when ``call_ids`` is ``None``); resume when none waits."""
        return self.answer(run, approve=call_ids, resume=resume, user=user, reason=reason)

    def deny(
        self,
        run: RunRef,
        call_ids: Iterable[str] | None = None,
        *,
        resume: bool = True,
        user: AnyUser | None = None,
        reason: str = "",
    ) -> Run:
        """Deny waiting calls: each is answered with an error result saying so."""
        return self.answer(run, deny=call_ids, resume=resume, user=user, reason=reason)

    def submit_tool_outputs(
        self, run: RunRef, outputs: Mapping[str, Any], *, resume: bool = True
    ) -> Run:
        """Store the results of client-side calls: ``{call_id: output}`` (see :meth:`answer`)."""
        return self.answer(run, outputs=outputs, resume=resume)

    def retry(self, run: RunRef, *, background: bool = False, user: AnyUser | None = None) -> Run:
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
        queued = transitions.requeue_failed(row.pk, user=user)
        if background:
            transaction.on_commit(partial(enqueue_run, queued.pk))
            return queued
        return self.execute(queued)

    def cancel(self, run: RunRef) -> Run:
        """Cancel an active run; calls left unanswered get an error result so the
        conversation stays valid."""
        return transitions.cancel_run(_run_pk(run))


@task()
def execute_run(run_id: str) -> str:
    """Execute a queued run until it ends or waits; returns its status."""
    return str(ToolLoopService().execute(run_id).status)


def enqueue_run(run_id: uuid.UUID | str, *, marked: bool = False) -> Any:
    """Queue :func:`execute_run` for a run on the configured task backend.

    The run's ``enqueued_at`` is set first (unless ``marked``: the caller set it
    as it stored the run), so the reaper can tell a run whose task was lost
    from one still waiting its turn (``REQUEUE_SECONDS``).
    """
    if not marked:
        Run.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(enqueued_at=timezone.now())
    return enqueue(execute_run, str(run_id))


def enqueue_waited(sender: type[Run], run: Run, **kwargs: Any) -> None:
    """The receiver of ``waiting_run_queued`` (connected in ``apps.py``): a run that
    waited behind another was queued, and a task worker executes it."""
    enqueue_run(run.pk, marked=True)
