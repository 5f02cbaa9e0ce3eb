"""JSON Schema validation that neither reaches out nor runs away.

Schemas come from clients (a run's ``response_format``) and from tool
definitions. A schema may reference only its own definitions (``"$ref":
"#/..."``), every reference must point at something and none may loop back
to itself in place (checked when the validator is built, so a schema that
cannot be evaluated is refused before anything runs); no reference is ever
retrieved. ``pattern`` and ``patternProperties`` regexes run on the ``regex``
engine with a time budget, ``uniqueItems`` in one pass, and every keyword of
a validation checks its deadline (:data:`VALIDATION_SECONDS`).

This module imports nothing from Django and nothing from httpx.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.protocols
import jsonschema.validators
import referencing.exceptions
import referencing.jsonschema
import regex
from referencing import Registry, Resource

__all__ = [
    "VALIDATION_SECONDS",
    "SchemaTimeout",
    "errors_within",
    "json_schema_validator",
    "map_subschemas",
    "reference_problem",
]

# Keys whose values map names to schemas, and keys whose values are data, never schemas.
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties"})
_DATA_KEYS = frozenset({"default", "enum", "const", "examples"})


# Seconds one validation may take in all, and so at most one regex search.
VALIDATION_SECONDS = 1.0
# Keywords whose string value is a reference to resolve.
_REFERENCE_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")

_deadline: ContextVar[float | None] = ContextVar("llm_conversations_schema_deadline", default=None)


class SchemaTimeout(TimeoutError):
    """A validation ran past its deadline (a regex search included)."""


def _search(pattern: str, text: str) -> bool:
    deadline = _deadline.get()
    budget = VALIDATION_SECONDS if deadline is None else deadline - time.monotonic()
    if budget <= 0:
        raise SchemaTimeout
    try:
        return regex.search(pattern, text, timeout=budget) is not None
    except TimeoutError:
        raise SchemaTimeout from None


def _check_deadline() -> None:
    deadline = _deadline.get()
    if deadline is not None and time.monotonic() > deadline:
        raise SchemaTimeout


def _on_deadline(check: Any) -> Any:
    """``check``, a keyword's validation, that first stops the validation past its deadline.

    Every keyword is checked under the deadline, not only between errors: a
    schema whose ``anyOf`` branches each descend (``{"anyOf": [{"$ref":
    "#/$defs/n"}, ...]}``) takes time exponential in the answer's depth
    before it yields its first error.
    """

    def checked(
        validator: Any, value: Any, instance: Any, schema: Mapping[str, Any]
    ) -> Iterator[jsonschema.ValidationError]:
        _check_deadline()
        errors: Iterator[jsonschema.ValidationError] | None = check(
            validator, value, instance, schema
        )
        if errors is not None:
            yield from errors

    return checked


def _pattern(
    validator: Any, pattern: str, instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _canonical(value: Any) -> Any:
    """A hashable form of a JSON value, equal for values JSON Schema calls equal.

    ``1`` and ``1.0`` are one number (Python hashes them alike); ``true`` is
    not ``1``; key order does not count.
    """
    if isinstance(value, bool) or value is None:
        return ("const", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", tuple(_canonical(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((key, _canonical(item)) for key, item in value.items()))
    return ("other", repr(value))


def _unique_items(
    validator: Any, unique: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    # jsonschema compares unhashable items pairwise: quadratic, minutes for an
    # answer of a few thousand objects. One pass over hashable forms instead.
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Any] = set()
    for index, item in enumerate(instance):
        key = _canonical(item)
        if key in seen:
            # Named by place, not quoted whole: a long array would hide why.
            yield jsonschema.ValidationError(
                f"has non-unique elements: item {index} repeats an earlier one"
            )
            return
        seen.add(key)


def reference_problem(schema: Any) -> str | None:
    """The first reference of ``schema`` to anything but its own definitions, described."""
    found: list[str] = []

    def check(node: dict[str, Any]) -> dict[str, Any]:
        for key in _REFERENCE_KEYS:
            target = node.get(key)
            if key in node and not (isinstance(target, str) and target.startswith("#")):
                found.append(f"{key} {target!r}")
        return node

    map_subschemas(schema, check)
    return found[0] if found else None


def json_schema_validator(schema: Mapping[str, Any]) -> jsonschema.protocols.Validator:
    """A validator for ``schema`` (its ``$schema``, else Draft 2020-12).

    Raises ``jsonschema.SchemaError`` when the schema itself is invalid,
    references anything but its own definitions, or has a reference that
    points at nothing or loops back in place. Its registry retrieves
    nothing, and its regexes run with a time budget (:func:`errors_within`).
    """
    problem = reference_problem(schema)
    if problem is not None:
        raise jsonschema.SchemaError(
            f"{problem}: only references to the schema's own definitions (#...) are allowed"
        )
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    # types-jsonschema narrows check_schema to dict; jsonschema takes any Mapping.
    cls.check_schema(schema)  # type: ignore[arg-type]
    unresolved = _resolution_problem(schema, cls)
    if unresolved is not None:
        raise jsonschema.SchemaError(unresolved)
    # types-jsonschema leaves extend() untyped; it returns a validator class like cls.
    keywords = {
        **cls.VALIDATORS,
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "uniqueItems": _unique_items,
    }
    bounded = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        cls, {name: _on_deadline(check) for name, check in keywords.items()}
    )
    validator: jsonschema.protocols.Validator = bounded(schema, registry=Registry())
    return validator


def errors_within(
    validator: jsonschema.protocols.Validator,
    instance: Any,
    seconds: float = VALIDATION_SECONDS,
) -> Iterator[jsonschema.ValidationError]:
    """``validator``'s errors for ``instance``; :class:`SchemaTimeout` past ``seconds``.

    The deadline holds at every keyword and inside each regex search.
    """
    deadline = time.monotonic() + seconds
    token = _deadline.set(deadline)
    try:
        for error in validator.iter_errors(instance):
            yield error
            if time.monotonic() > deadline:
                raise SchemaTimeout
    finally:
        _deadline.reset(token)


def map_subschemas(node: Any, change: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    """A copy of a schema with ``change`` applied to it and to every subschema, innermost first.

    Values that are data (``enum``, ``const``, ``default``, ``examples``) are
    copied untouched; the values of ``properties`` and ``$defs`` are schemas.
    """
    if isinstance(node, list):
        return [map_subschemas(item, change) for item in node]
    if not isinstance(node, dict):
        return node
    copied: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DATA_KEYS:
            copied[key] = value
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            copied[key] = {name: map_subschemas(item, change) for name, item in value.items()}
        else:
            copied[key] = map_subschemas(value, change)
    return change(copied)


# Keywords that apply their subschemas to the instance itself, not to a part of it:
# a reference reached through these alone evaluates in place.
_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE_ONE = ("not", "if", "then", "else")
# Schemas one check may enter in place, one through another, before taking a
# part of the instance: beyond it, jsonschema's recursion nears Python's limit.
MAX_IN_PLACE = 64


def _in_place(node: Mapping[str, Any]) -> Iterator[Any]:
    for key in _IN_PLACE_LISTS:
        if isinstance(node.get(key), list):
            yield from node[key]
    for key in _IN_PLACE_ONE:
        if key in node:
            yield node[key]
    if isinstance(node.get("dependentSchemas"), dict):
        yield from node["dependentSchemas"].values()


def _resolution_problem(schema: Mapping[str, Any], cls: Any) -> str | None:
    """The first reference of ``schema`` that points at nothing or loops in place, described.

    jsonschema resolves references only when an answer reaches them, so a
    dangling ``#/$defs/missing`` would end a run as a server error after the
    model was paid for, and ``{"$ref": "#"}`` recurses until Python gives up.
    """
    spec = referencing.jsonschema.specification_with(
        cls.META_SCHEMA.get("$schema", ""), default=referencing.jsonschema.DRAFT202012
    )
    root = Resource.from_contents(schema, default_specification=spec)
    registry: Registry[Any] = Registry()
    problems: list[str] = []
    done: set[int] = set()  # subschemas followed to the end: each is followed once

    # ``resolver``: a referencing Resolver (not exported by referencing), at ``node``'s base.
    def follow(node: Any, resolver: Any, chain: tuple[int, ...]) -> None:
        # ``chain``: the subschemas entered in place since the last part of the
        # instance was taken; meeting one again is a loop.
        if not isinstance(node, dict) or problems or id(node) in done:
            return
        if id(node) in chain:
            problems.append("a reference loops back to itself without a part of the answer")
            return
        if len(chain) > MAX_IN_PLACE:
            problems.append(f"references chain more than {MAX_IN_PLACE} schemas in place")
            return
        chain = (*chain, id(node))
        resolver = resolver.in_subresource(spec.create_resource(node))
        for key in _REFERENCE_KEYS:
            target = node.get(key)
            if not isinstance(target, str):
                continue
            try:
                resolved = resolver.lookup(target)
            except referencing.exceptions.Unresolvable:
                problems.append(f"{key} {target!r} points at nothing")
                return
            follow(resolved.contents, resolved.resolver, chain)
        for sub in _in_place(node):
            follow(sub, resolver, chain)
        done.add(id(node))

    def walk(resource: Resource[Any], resolver: Any) -> None:
        # Every subschema, each followed in place from where it stands.
        if problems:
            return
        follow(resource.contents, resolver, ())
        for sub in resource.subresources():
            walk(sub, resolver.in_subresource(sub))

    walk(root, registry.resolver_with_root(root))
    return problems[0] if problems else None
