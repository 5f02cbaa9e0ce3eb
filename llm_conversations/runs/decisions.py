"""Actions on a run waiting for action: a person's approvals and denials, the
results a frontend submits for client-side calls, and the run policy's own
decisions, each kept as a :class:`ToolDecision` for audit.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext

from llm_conversations.conversations.store import append_messages
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.exceptions import RunStateError
from llm_conversations.models import (
    MAX_REASON_CHARS,
    Decision,
    Run,
    RunStatus,
    ToolDecision,
    WaitingCall,
    WaitReason,
)
from llm_conversations.models.waiting_calls import approval_digest
from llm_conversations.runs import policy
from llm_conversations.runs.transitions import held
from llm_conversations.tools import tool_result_message
from llm_conversations.users import AnyUser

__all__ = ["answer_waiting", "decide_by_rule", "decided"]


def _locked_waiting_run(run_id: uuid.UUID | str) -> Run:
    run = Run.objects.select_for_update().get(pk=run_id)
    if run.status != RunStatus.REQUIRES_ACTION:
        raise RunStateError(
            "run_not_waiting",
            gettext("the run is %(status)s, not waiting for action.") % {"status": run.status},
        )
    return run


def answer_waiting(
    run_id: uuid.UUID | str,
    approve: Iterable[str] | None,
    deny: Iterable[str] | None,
    outputs: Mapping[str, Any] | None,
    *,
    user: AnyUser | None = None,
    reason: str = "",
    reasons: Mapping[str, str] | None = None,
    digest: str | None = None,
) -> Run:
    """Answer calls of a waiting run in one transaction: decisions on calls waiting for
    approval (``None``: every one of them) and the results of client-side calls.

    The run is queued once no call waits. Naming no call at all is
    ``unknown_tool_call``, as naming one that does not wait is. Each decision
    is kept as a :class:`ToolDecision` (``user``, and ``reasons[call_id]`` or
    else ``reason``); a ``digest``
    that is not the run's ``approval_digest`` (the calls waiting changed since
    the caller looked) is refused with ``stale_decision``.
    """
    decisions: list[tuple[list[str] | None, Decision]] = []
    for ids, decision in ((approve, Decision.APPROVED), (deny, Decision.DENIED)):
        chosen = None if ids is None else list(ids)
        if chosen is None or chosen:
            decisions.append((chosen, decision))
    with transaction.atomic():
        run = _locked_waiting_run(run_id)
        if digest is not None and digest != run.approval_digest:
            raise RunStateError(
                "stale_decision",
                gettext("the calls waiting for approval changed; look at them again."),
                field="digest",
            )
        seen = run.approval_digest or ""
        waited = {p.call.id: p.call for p in run.waiting_calls}
        why = reasons or {}
        if not decisions and not outputs:
            # take_waiting refuses an empty choice, naming the calls that wait.
            asked = WaitReason.REQUIRES_APPROVAL if outputs is None else WaitReason.CLIENT_SIDE
            run.take_waiting(asked, ())
        trail: list[ToolDecision] = []
        for chosen, decision in decisions:
            taken = run.take_waiting(WaitReason.REQUIRES_APPROVAL, chosen)
            run.record_decisions(taken, decision)
            trail += [
                decided(run, waited[i], decision, seen, user=user, reason=why.get(i, reason))
                for i in taken
            ]
        ToolDecision.objects.bulk_create(trail)
        if outputs:
            submitted = run.take_waiting(WaitReason.CLIENT_SIDE, outputs)
            results = [_output_message(call_id, outputs[call_id]) for call_id in submitted]
            append_messages(run.conversation_id, results, run=run)
        run.save(
            update_fields=[
                "decisions",
                "waiting_calls",
                "status",
                "queued_at",
                "attempts",
                "updated_at",
            ]
        )
    return run


def decided(
    run: Run,
    call: ToolCall,
    decision: Decision,
    digest: str,
    *,
    user: AnyUser | None = None,
    reason: str = "",
    by_rule: bool = False,
) -> ToolDecision:
    """The audit row of one decision (saved by the caller, in its transaction)."""
    return ToolDecision(
        run=run,
        call_id=call.id,
        tool_name=call.name,
        arguments=call.to_stored()["function"]["arguments"],
        decision=decision,
        decided_by=user if user is not None and user.is_authenticated else None,
        by_rule=by_rule,
        reason=reason[:MAX_REASON_CHARS],
        digest=digest,
    )


def decide_by_rule(run: Run, waiting: Sequence[WaitingCall]) -> list[WaitingCall]:
    """Let the run policy's ``decide_call`` approve or deny waiting calls before a person
    is asked; returns the calls still waiting. A decision is recorded like a
    person's (``by_rule``), under this execution's lease."""
    rules = policy.run_policy()
    verdicts = {
        p.call.id: verdict
        for p in waiting
        if p.reason == WaitReason.REQUIRES_APPROVAL
        and (verdict := rules.decide_call(run, p.call)) is not None
    }
    if not verdicts:
        return list(waiting)
    digest = approval_digest(waiting) or ""
    for call_id, verdict in verdicts.items():
        run.record_decisions([call_id], verdict.decision)
    with transaction.atomic():
        if not Run.objects.filter(held(run), status=RunStatus.RUNNING).update(
            decisions=run.decisions, updated_at=timezone.now()
        ):
            return list(waiting)  # the run stopped: nothing more is decided here
        ToolDecision.objects.bulk_create(
            decided(run, p.call, v.decision, digest, reason=v.reason, by_rule=True)
            for p in waiting
            if (v := verdicts.get(p.call.id)) is not None
        )
    return [p for p in waiting if p.call.id not in verdicts]


def _output_message(call_id: str, value: Any) -> ChatMessage:
    if isinstance(value, Mapping) and set(value) <= {"output", "is_error"} and "output" in value:
        return tool_result_message(call_id, value["output"], is_error=bool(value.get("is_error")))
    return tool_result_message(call_id, value)
