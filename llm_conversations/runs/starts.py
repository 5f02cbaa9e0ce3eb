"""Starting a run: what a start asks for (:class:`StartRequest`), checked, then stored.

:meth:`ToolLoopService.start <llm_conversations.runs.service.ToolLoopService.start>`
takes a start's options by keyword and gathers them into one
:class:`StartRequest`; everything that can refuse the start is checked before
anything is stored, and :func:`store_start` stores the run and its user turn
(or its intent to wait behind the active run) in one transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from llm_conversations.conf import BusyStrategy, conf
from llm_conversations.conversations.history import ConversationRef, load_history
from llm_conversations.conversations.locks import count_in
from llm_conversations.conversations.storable import check_storable
from llm_conversations.conversations.store import append_locked
from llm_conversations.core.messages import ChatMessage, InvalidMessage, MessageInput, Role
from llm_conversations.core.parameters import PARAMETER_NAMES, RunParameterInput
from llm_conversations.exceptions import ConversationBusy, RunStateError
from llm_conversations.models import Conversation, Run, RunStatus
from llm_conversations.runs import busy, leases, policy, waiting_runs
from llm_conversations.runs.options import RunOptions
from llm_conversations.users import AnyUser

if TYPE_CHECKING:
    from llm_conversations.runs.policy import RunPolicy

__all__ = ["StartRequest", "checked_iterations", "store_start", "user_turn"]


@dataclass(frozen=True)
class StartRequest:
    """What a start asks for: the conversation, the user turn as given, and its options.

    The fields are the keyword arguments of ``ToolLoopService.start``
    (:class:`~llm_conversations.runs.options.RunOptions`) but the run parameters,
    which ``parameters`` holds (``RunParameterInput``), and ``claim``, which
    only the service passes.
    """

    conversation: ConversationRef
    message: MessageInput | str
    provider: str | None = None
    tools: Iterable[str] | None = None
    max_iterations: int | None = None
    background: bool = False
    user: AnyUser | None = None
    context_strategy: str | None = None
    metadata: Mapping[str, Any] | None = None
    if_busy: str | None = None
    claim: bool = False
    parameters: RunParameterInput = field(default_factory=lambda: RunParameterInput())

    @classmethod
    def of(
        cls,
        conversation: ConversationRef,
        message: MessageInput | str,
        options: RunOptions,
        *,
        claim: bool = False,
    ) -> StartRequest:
        """The request of ``start(conversation, message, claim=claim, **options)``."""
        # Any other name is a run parameter, checked (and refused if unknown) as one.
        parameters = {name: value for name, value in options.items() if name not in _OPTIONS}
        return cls(
            conversation,
            message,
            provider=options.get("provider"),
            tools=options.get("tools"),
            max_iterations=options.get("max_iterations"),
            background=options.get("background", False),
            user=options.get("user"),
            context_strategy=options.get("context_strategy"),
            metadata=options.get("metadata"),
            if_busy=options.get("if_busy"),
            claim=claim,
            parameters=cast(RunParameterInput, parameters),
        )


# The options a start takes besides the run parameters.
_OPTIONS = frozenset(RunOptions.__optional_keys__) - frozenset(PARAMETER_NAMES)


def user_turn(message: MessageInput | str) -> ChatMessage:
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


def checked_iterations(request: StartRequest, rules: RunPolicy | None) -> int:
    """The run's iteration limit: the one asked for, else the policy's or the settings'
    default; ``RunStateError`` for one that is not an integer within ``MAX_ITERATIONS_LIMIT``."""
    limit = request.max_iterations
    if limit is None:
        limit = policy.default_iterations(request.user, rules)
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
    return limit


def store_start(run: Run, turn: ChatMessage, when_busy: BusyStrategy, request: StartRequest) -> Run:
    """Store ``run`` (prepared, not saved) and its user turn, or its intent to wait,
    in one transaction, as ``when_busy`` says while another run is active.

    A queued background run is not enqueued here: the caller asks for its task
    once this transaction commits.
    """
    # A start that interrupts a run may find another started meanwhile (by
    # another interrupting start): it interrupts that one in turn.
    tries = 3 if when_busy in busy.REPLACING else 1
    for attempt in range(1, tries + 1):
        try:
            return _store_once(run, turn, when_busy, request)
        except ConversationBusy:
            if attempt == tries:
                raise
    raise AssertionError("unreachable")  # the last try returns or raises


def _store_once(run: Run, turn: ChatMessage, when_busy: BusyStrategy, request: StartRequest) -> Run:
    """One try of :func:`store_start`, in one transaction."""
    conversation_id = run.conversation_id
    try:
        with transaction.atomic():
            replaced = None
            if when_busy in busy.REPLACING:
                # The active run's lock before the conversation's: the loop's order.
                replaced = busy.replace_active(conversation_id, when_busy)
            # Under the conversation's lock, an active run is seen before the
            # insert: concurrent starts queue here, not on the index. The lock
            # counts the user turn in.
            count, active = count_in(conversation_id, 1)
            run.pk, run.replaced = uuid.uuid4(), replaced
            if active is not None:
                if when_busy != "enqueue":
                    raise ConversationBusy()
                return _store_waiting(run, turn, active, request)
            _store_queued(run, turn, count, request)
            if replaced is not None:
                busy.succeed_replaced(replaced, run)
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


def _store_waiting(run: Run, turn: ChatMessage, active: uuid.UUID, request: StartRequest) -> Run:
    """Store ``run`` waiting behind the active run; its turn is stored when its turn comes."""
    conversation_id = run.conversation_id
    Conversation.objects.filter(pk=conversation_id).update(message_count=F("message_count") - 1)
    check_storable(conversation_id, turn)
    run.status = RunStatus.WAITING
    run.waits_for_id = waiting_runs.last_in_line(conversation_id, active)
    run.waiting_turn = waiting_runs.waiting_turn(turn, dict(request.metadata or {}))
    run.save(force_insert=True)
    return run


def _store_queued(run: Run, turn: ChatMessage, count: int, request: StartRequest) -> None:
    """Store ``run`` queued (or claimed, to execute here) and its user turn, the
    conversation's lock held and ``count`` turns before it."""
    conversation_id, background = run.conversation_id, request.background
    policy.lock_active_runs(request.user)
    now = timezone.now()
    run.status, run.queued_at = RunStatus.QUEUED, now
    # Marked in the insert: enqueue_run need not update the row again.
    run.enqueued_at = now if background else None
    claimed = request.claim and not background
    # Executed here: the history is read once, under this lock, for the
    # execution too (an empty conversation needs no read at all).
    known = (load_history(conversation_id) if count else ([], frozenset())) if claimed else None
    if claimed:
        leases.claim_new(run)
    run.save(force_insert=True)
    rows = append_locked(
        conversation_id,
        count,
        [turn],
        run=run,
        metadata=request.metadata,
        history=None if known is None else known[0],
        counted=True,
    )
    if known is not None:
        history, hidden = known
        leases.log_claimed(run, ([*history, rows[0].to_chat_message()], hidden))
