"""Database expressions the models' constraints need on SQLite and PostgreSQL alike."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.sql.compiler import SQLCompiler


class JSONTypeOf(models.Func):
    """The JSON type name of a value: ``'array'``, ``'object'``, ``'null'``, ...

    SQLite's ``json_type`` and PostgreSQL's ``jsonb_typeof`` agree on
    ``'array'`` and ``'object'``, the names the constraints compare with.
    """

    function = "JSON_TYPE"
    output_field = models.CharField()

    def as_postgresql(
        self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: Any
    ) -> tuple[str, list[Any]]:
        return self.as_sql(compiler, connection, function="JSONB_TYPEOF", **extra)  # type: ignore[return-value]
