"""``bulk_create``'s one ``INSERT`` for the rows every stored turn writes, its SQL
composed once per model, row count and database.

A run stores a message and logs events for every turn: with the ORM composing
each ``INSERT`` anew, composing costs ten times what SQLite takes to run it.
The rows are the same as ``bulk_create`` writes (every concrete column, each
value prepared by its field as Django prepares it, ids the database assigns
read back with ``RETURNING``); like ``bulk_create``, no ``save()`` or signal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from django.db import connections, models, router
from django.db.backends.base.base import BaseDatabaseWrapper

__all__ = ["insert_rows"]

_M = TypeVar("_M", bound=models.Model)
if TYPE_CHECKING:
    Field: TypeAlias = models.Field[Any, Any]

# The databases whose INSERT reads ids back with RETURNING; others use bulk_create.
_COMPOSED_FOR = frozenset({"sqlite", "postgresql"})
# (model, vendor, rows, with the primary key) -> the statement and its fields.
_Plan: TypeAlias = "tuple[str, list[Field], Field | None]"
_PLANS: dict[tuple[type[models.Model], str, int, bool], _Plan] = {}
# Statements of more rows (imports) are composed each time, not kept.
_KEPT_ROWS = 16


def insert_rows(rows: Sequence[_M]) -> list[_M]:
    """Insert ``rows`` (unsaved instances of one model) in one statement and mark
    them saved, as ``Model.objects.bulk_create(rows)`` does on SQLite and PostgreSQL."""
    if not rows:
        return []
    model = type(rows[0])
    using = router.db_for_write(model)
    connection = connections[using]
    if connection.vendor not in _COMPOSED_FOR:
        return model._default_manager.using(using).bulk_create(rows)
    with_pk = rows[0].pk is not None
    sql, fields, returned = _plan(model, connection, len(rows), with_pk)
    params = [
        field.get_db_prep_save(field.pre_save(row, True), connection=connection)
        for row in rows
        for field in fields
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        if returned is not None:
            for row, (value,) in zip(rows, cursor.fetchall(), strict=True):
                setattr(row, returned.attname, value)
    for row in rows:
        row._state.adding, row._state.db = False, using
    return list(rows)


def _plan(
    model: type[models.Model], connection: BaseDatabaseWrapper, count: int, with_pk: bool
) -> _Plan:
    key = (model, connection.vendor, count, with_pk)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _compose(model, connection, count, with_pk)
        if count <= _KEPT_ROWS:
            _PLANS[key] = plan
    return plan


def _compose(
    model: type[models.Model], connection: BaseDatabaseWrapper, count: int, with_pk: bool
) -> _Plan:
    quote = connection.ops.quote_name
    meta = model._meta
    pk = meta.pk
    fields = [f for f in meta.concrete_fields if with_pk or f is not pk]
    row = f"({', '.join(['%s'] * len(fields))})"
    sql = (
        f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(_column(f)) for f in fields)}) "
        f"VALUES {', '.join([row] * count)}"
    )
    returned = None if with_pk or pk is None else pk
    if returned is not None:
        sql += f" RETURNING {quote(_column(returned))}"
    return sql, fields, returned


def _column(field: Field) -> str:
    column = field.column
    assert column is not None, field  # concrete fields have columns
    return column
