"""The calls a paused run waits on: why each waits, what it is decided with, and the
column that keeps them.

``Run.waiting_calls`` is a :class:`WaitingCallsField`: stored as JSON (each
call's stored form plus ``reason``), read and written as :class:`WaitingCall`
values, so nothing else parses the column.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils.translation import gettext_lazy as _

from llm_conversations.core.messages import ToolCall

__all__ = [
    "Decision",
    "WaitReason",
    "WaitingCall",
    "WaitingCallsField",
    "approval_digest",
]


class WaitReason(models.TextChoices):
    """Why a run waits on a call."""

    REQUIRES_APPROVAL = "requires_approval", _("needs approval")
    CLIENT_SIDE = "client_side", _("needs an output from the client")


class Decision(models.TextChoices):
    """An operator's decision on a call that requires approval."""

    APPROVED = "approved", _("approved")
    DENIED = "denied", _("denied")


@dataclass(frozen=True, slots=True)
class WaitingCall:
    """A call a paused run waits on, and why.

    Its stored form is the call's stored form plus ``reason``.
    """

    call: ToolCall
    reason: WaitReason

    def to_stored(self) -> dict[str, Any]:
        """The JSON kept in ``Run.waiting_calls``."""
        return {**self.call.to_stored(), "reason": self.reason.value}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WaitingCall:
        """Read :meth:`to_stored` output."""
        fields = {key: value for key, value in data.items() if key != "reason"}
        return cls(ToolCall.from_dict(fields), WaitReason(data["reason"]))


def approval_digest(waiting: Iterable[WaitingCall]) -> str | None:
    """A digest of the calls waiting for approval (ids, names, arguments), ``None`` when
    none waits: a decision names it to prove which calls it saw."""
    calls = [w.call.to_stored() for w in waiting if w.reason == WaitReason.REQUIRES_APPROVAL]
    if not calls:
        return None
    canonical = json.dumps(calls, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class _StoredForms(DjangoJSONEncoder):
    """Writes each :class:`WaitingCall` as its stored form (saves, updates, validation)."""

    def default(self, o: Any) -> Any:
        if isinstance(o, WaitingCall):
            return o.to_stored()
        return super().default(o)


class WaitingCallsField(models.JSONField):
    """A list of :class:`WaitingCall` values, kept as their stored forms."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["encoder"] = _StoredForms
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        del kwargs["encoder"]
        return name, path, args, kwargs

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> list[WaitingCall]:
        return self.to_python(super().from_db_value(value, expression, connection))

    def to_python(self, value: Any) -> list[WaitingCall]:
        """Stored forms (a row, a fixture) as values; values stay as they are."""
        return [
            item if isinstance(item, WaitingCall) else WaitingCall.from_dict(item)
            for item in value or ()
        ]

    def value_to_string(self, obj: models.Model) -> Any:
        """The stored forms, for serializers (``dumpdata``)."""
        return [waiting.to_stored() for waiting in self.value_from_object(obj)]
