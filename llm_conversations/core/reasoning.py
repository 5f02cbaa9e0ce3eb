"""The model's reasoning state: typed parts of an assistant turn.

A reasoning model returns, beside its answer, state the provider wants back on
the next request: Anthropic ``thinking`` blocks with their ``signature`` and
``redacted_thinking`` blocks, Gemini thought parts and the ``thoughtSignature``
of the exact part that carried one, the ``reasoning_content`` of
OpenAI-compatible servers, Ollama's ``thinking``. Each piece is one
:class:`Reasoning` part tagged with the backend that made it, because only
that backend may be sent it back (each adapter decides where; never another
provider, never as visible text).

Stored form, one object per part (absent keys are empty)::

    {"provider": "anthropic", "kind": "thinking", "text": "...", "data": "<signature>"}
    {"provider": "gemini", "kind": "signature", "data": "<thoughtSignature>", "call_id": "call_1"}
    {"provider": "anthropic", "kind": "compaction", "text": "<the provider's summary>"}

A ``compaction`` part is kept in the same place, tagged the same way, because it
obeys the same rule: only the provider that made it may read it back.

This module imports nothing from Django and nothing from httpx.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from llm_conversations.exceptions import InvalidMessage

__all__ = [
    "MAX_REASONING_CHARS",
    "MAX_REASONING_PARTS",
    "Reasoning",
    "ReasoningKind",
    "bounded_reasoning",
    "check_reasoning",
    "compactions",
    "reasoning_from_list",
    "thoughts",
]

# Bounds that keep one turn's reasoning storable and loadable; real replies
# stay far below them (a long thinking block is some 100k characters). A reply
# beyond them is stored with its reasoning bounded (bounded_reasoning()).
MAX_REASONING_PARTS = 256
MAX_REASONING_CHARS = 4_000_000
_MAX_PROVIDER_CHARS = 100


class ReasoningKind(StrEnum):
    """What a reasoning part holds."""

    THINKING = "thinking"
    """Reasoning text the model showed, with the signature that authenticates it if any."""
    REDACTED = "redacted"
    """Reasoning the provider encrypted: only ``data`` travels (Anthropic ``redacted_thinking``)."""
    SUMMARY = "summary"
    """A summary of reasoning the provider keeps hidden."""
    ENCRYPTED = "encrypted"
    """Opaque encrypted reasoning, no text (a Responses API ``encrypted_content``)."""
    SIGNATURE = "signature"
    """Only a signature, for a part of the answer: a call (``call_id``) or the text."""
    COMPACTION = "compaction"
    """The provider's compacted state of the turns before this reply, which it reads in
    their place (Anthropic's ``compaction`` block: readable ``text``; an OpenAI
    ``compaction`` item: opaque ``data``). Not reasoning: never shown as such, never
    taken as the app's own summary, and every stored turn it stands for stays stored."""


_KINDS: dict[object, ReasoningKind] = {kind.value: kind for kind in ReasoningKind}
# Which kinds need text, need data, and may not carry text.
_NEEDS_DATA = frozenset({ReasoningKind.REDACTED, ReasoningKind.ENCRYPTED, ReasoningKind.SIGNATURE})
_NO_TEXT = _NEEDS_DATA
_KEYS = frozenset({"provider", "kind", "text", "data", "call_id"})


@dataclass(frozen=True, slots=True)
class Reasoning:
    """One piece of a turn's reasoning state, made by the backend ``provider``.

    ``text`` is reasoning the model showed (``""`` when none); ``data`` the
    opaque value the provider wants back verbatim (a signature, redacted or
    encrypted reasoning), never shown to anyone. ``call_id`` ties a
    ``signature`` part to the tool call of the same turn whose part carried it;
    a ``signature`` part without ``call_id`` belongs to the turn's text.
    """

    provider: str
    kind: ReasoningKind
    text: str = ""
    data: str | None = None
    call_id: str | None = None

    def __post_init__(self) -> None:
        provider = self.provider
        if not isinstance(provider, str) or not provider or len(provider) > _MAX_PROVIDER_CHARS:
            raise InvalidMessage(
                "invalid_reasoning",
                "a reasoning part needs the non-empty name of the provider that made it.",
                field="provider",
            )
        try:
            kind = _KINDS[self.kind]
        except (KeyError, TypeError):
            allowed = ", ".join(k.value for k in ReasoningKind)
            raise InvalidMessage(
                "invalid_reasoning",
                f"reasoning kind must be one of {allowed}; got {self.kind!r}.",
                field="kind",
            ) from None
        object.__setattr__(self, "kind", kind)
        if not isinstance(self.text, str):
            raise InvalidMessage(
                "invalid_reasoning", "reasoning text must be a string.", field="text"
            )
        if self.data is not None and (not isinstance(self.data, str) or not self.data):
            raise InvalidMessage(
                "invalid_reasoning", "reasoning data must be a non-empty string.", field="data"
            )
        if kind in _NEEDS_DATA and self.data is None:
            raise InvalidMessage(
                "invalid_reasoning", f"a {kind} reasoning part needs its data.", field="data"
            )
        if kind in _NO_TEXT and self.text:
            raise InvalidMessage(
                "invalid_reasoning", f"a {kind} reasoning part has no text.", field="text"
            )
        if kind not in _NEEDS_DATA and not self.text and self.data is None:
            raise InvalidMessage(
                "invalid_reasoning", f"a {kind} reasoning part needs text or data.", field="text"
            )
        if self.call_id is not None:
            if kind is not ReasoningKind.SIGNATURE:
                raise InvalidMessage(
                    "invalid_reasoning",
                    "only a signature reasoning part names a call.",
                    field="call_id",
                )
            if not isinstance(self.call_id, str) or not self.call_id:
                raise InvalidMessage(
                    "invalid_reasoning",
                    "a reasoning part's call_id must be a non-empty string.",
                    field="call_id",
                )

    @property
    def size(self) -> int:
        """The characters its text and data hold."""
        return len(self.text) + len(self.data or "")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reasoning:
        """Read the stored form; unknown keys are refused."""
        if not isinstance(data, Mapping):
            raise InvalidMessage("invalid_reasoning", "a reasoning part must be an object.")
        if not _KEYS.issuperset(data):
            unknown = sorted(set(data) - _KEYS)
            raise InvalidMessage(
                "unknown_field",
                f"unknown reasoning field(s): {', '.join(unknown)}.",
                field=unknown[0],
            )
        return cls(
            provider=data.get("provider"),  # type: ignore[arg-type]
            kind=data.get("kind"),  # type: ignore[arg-type]
            text=data.get("text", ""),
            data=data.get("data"),
            call_id=data.get("call_id"),
        )

    def to_stored(self) -> dict[str, Any]:
        """The stored form: ``provider`` and ``kind``, and the other keys that are set."""
        stored: dict[str, Any] = {"provider": self.provider, "kind": self.kind.value}
        if self.text:
            stored["text"] = self.text
        if self.data is not None:
            stored["data"] = self.data
        if self.call_id is not None:
            stored["call_id"] = self.call_id
        return stored


def compactions(parts: Sequence[Reasoning] | None, provider: str) -> list[Reasoning]:
    """The ``compaction`` parts of a turn that ``provider`` made, in order."""
    return [
        part
        for part in parts or ()
        if part.kind is ReasoningKind.COMPACTION and part.provider == provider
    ]


def thoughts(parts: Sequence[Reasoning] | None) -> list[Reasoning]:
    """A turn's reasoning proper: every part but the compacted state."""
    return [part for part in parts or () if part.kind is not ReasoningKind.COMPACTION]


def reasoning_from_list(raw: object) -> tuple[Reasoning, ...]:
    """Parts given as a list of :class:`Reasoning` or stored forms; errors name the index."""
    if isinstance(raw, str | bytes | Mapping) or not isinstance(raw, Iterable):
        raise InvalidMessage("invalid_reasoning", "reasoning must be a list.", field="reasoning")
    parts: list[Reasoning] = []
    for index, item in enumerate(raw):
        try:
            parts.append(item if isinstance(item, Reasoning) else Reasoning.from_dict(item))
        except InvalidMessage as exc:
            raise exc.within(f"reasoning[{index}]") from None
    return tuple(parts)


def check_reasoning(parts: Sequence[Reasoning], call_ids: Iterable[str]) -> None:
    """The rules for one turn's reasoning: not empty, within the bounds, and each
    ``call_id`` naming a call of the same turn (``call_ids``)."""
    if not parts:
        raise InvalidMessage(
            "empty_reasoning",
            "reasoning must not be empty; omit it for a turn without reasoning.",
            field="reasoning",
        )
    if len(parts) > MAX_REASONING_PARTS:
        raise InvalidMessage(
            "reasoning_too_large",
            f"a turn holds at most {MAX_REASONING_PARTS} reasoning parts.",
            field="reasoning",
        )
    known = set(call_ids)
    total = 0
    for index, part in enumerate(parts):
        if not isinstance(part, Reasoning):
            raise InvalidMessage(
                "invalid_reasoning",
                f"reasoning[{index}] must be a Reasoning.",
                field=f"reasoning[{index}]",
            )
        if part.call_id is not None and part.call_id not in known:
            raise InvalidMessage(
                "invalid_reasoning",
                f"reasoning[{index}] names call {part.call_id!r}, which this turn does not make.",
                field=f"reasoning[{index}].call_id",
            )
        total += part.size
    if total > MAX_REASONING_CHARS:
        raise InvalidMessage(
            "reasoning_too_large",
            f"a turn's reasoning holds at most {MAX_REASONING_CHARS} characters.",
            field="reasoning",
        )


def bounded_reasoning(parts: Sequence[Reasoning]) -> tuple[tuple[Reasoning, ...], int]:
    """A reply's reasoning as a turn can hold it, and how many parts were left out.

    Within ``MAX_REASONING_PARTS`` and ``MAX_REASONING_CHARS`` the parts are
    kept as they are (``0`` left out). Beyond either, the provider's state
    cannot be kept whole, and a provider refuses a changed sequence of signed
    parts, so none of it is kept: the text the model showed stays readable as
    one ``thinking`` part without data (which no adapter sends back), cut at
    ``MAX_REASONING_CHARS``, and every part the provider sent counts as left out.
    The next request then continues the turn as one without reasoning state.
    """
    if len(parts) <= MAX_REASONING_PARTS and sum(p.size for p in parts) <= MAX_REASONING_CHARS:
        return tuple(parts), 0
    text = "\n\n".join(part.text for part in thoughts(parts) if part.text)[:MAX_REASONING_CHARS]
    kept = (Reasoning(parts[0].provider, ReasoningKind.THINKING, text),) if text else ()
    return kept, len(parts)
