"""Errors raised by deltamerge: one hierarchy, all of it here.

Every error carries the inputs that caused it as attributes, and its message says what to change.
Every error pickles with its message and attributes (Airflow and multiprocessing pickle exceptions
across processes), whatever its constructor takes.
"""

from __future__ import annotations

from typing import Any


def _rebuild(cls: type, args: tuple, attributes: dict[str, Any]) -> DeltaMergeError:
    """Unpickle an error without calling its constructor, whose arguments differ from its message."""
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(attributes)
    return error


class DeltaMergeError(Exception):
    """Base class of every error this package raises on purpose."""

    def __reduce__(self):
        return _rebuild, (type(self), self.args, dict(self.__dict__))


class ConfigError(DeltaMergeError, ValueError):
    """An argument or option is invalid. Raised before anything is read or written."""

    def __init__(self, argument: str, message: str):
        self.argument = argument
        super().__init__(f"{argument}: {message}")


class ColumnNameError(ConfigError):
    """Two columns of one table whose names are equal but for case (after the naming convention), or
    equal: Spark and Delta take column names case-insensitively, so a table cannot hold both. `names`:
    the two as the source (or the table) spells them; `stored`: as they would be stored."""

    def __init__(self, table: str, names: tuple[str, str], where: str, stored: tuple[str, str] | None = None):
        self.table, self.names, self.where = table, tuple(names), where
        self.stored = tuple(stored) if stored is not None else self.names
        first, second = self.names
        spelled = (
            f"{first!r} and {second!r}"
            if self.stored == self.names
            else f"{first!r} and {second!r} (stored as {self.stored[0]!r} and {self.stored[1]!r})"
        )
        super().__init__(
            "naming",
            f"table {table!r}: columns {spelled} {where} have names equal ignoring case; Spark and Delta "
            "take column names case-insensitively, so one table cannot hold both. Nothing was loaded. "
            "Rename one of them in the source"
            + (
                ", or use naming='direct', which keeps these apart."
                if first.lower() != second.lower()
                else "."
            ),
        )


class InvalidColumnNameError(ConfigError):
    """A column name with a character Delta Lake does not allow in column names of a table without
    column mapping (`characters`): the delta-spark writer could never write the table, so neither
    writer creates such a column."""

    CHARACTERS = " ,;{}()\n\t="

    def __init__(self, table: str, name: str):
        self.table, self.name = table, name
        found = sorted({c for c in name if c in self.CHARACTERS})
        super().__init__(
            "naming",
            f"table {table!r}: column {name!r} holds {''.join(found)!r}; Delta Lake does not allow any of "
            f"{self.CHARACTERS!r} in a column name (without column mapping), so no writer stores it. "
            "Nothing was loaded. Rename the column in the source, or use naming='snake_case', which never "
            "makes them.",
        )


class SourceError(DeltaMergeError):
    """The data to load breaks a rule: a missing or null key, duplicate keys, a bad cursor."""


class MissingKeyColumnError(SourceError):
    def __init__(self, column: str, hint: str, available: list[str], rows: int | None = None):
        self.column, self.hint, self.available, self.rows = column, hint, available, rows
        lacking = f" (all {rows} row(s) lack it)" if rows is not None else ""
        super().__init__(
            f"{hint} column {column!r} is not in the data{lacking}; columns present: {', '.join(available)}. "
            f"Nothing was loaded. Fix the {hint} hint or add the column to the source."
        )


class NullKeyError(SourceError):
    def __init__(self, column: str, hint: str, null_rows: int):
        self.column, self.hint, self.null_rows = column, hint, null_rows
        super().__init__(
            f"{hint} column {column!r} is null in {null_rows} row(s); its values must not be null. "
            "Nothing was loaded. Fill or filter those rows in the source."
        )


class DuplicateKeyError(SourceError):
    def __init__(
        self, key_columns: tuple[str, ...], strategy: str, examples: list[tuple], duplicate_keys: int
    ):
        self.key_columns, self.strategy = key_columns, strategy
        self.examples, self.duplicate_keys = examples, duplicate_keys
        shown = ", ".join(repr(e[0] if len(e) == 1 else e) for e in examples)
        super().__init__(
            f"the batch has {duplicate_keys} primary key value(s) of {list(key_columns)} occurring more than "
            f"once, which merge strategy {strategy!r} cannot take; for example {shown}. Nothing was loaded. "
            "Deduplicate the source, or use strategy 'delete-insert' (which keeps one row per key, "
            "see dedup_sort)."
        )


class SequenceError(SourceError):
    """Change events that `sequence_by` cannot order: two different events of one key at the same
    sequence (`examples`: (key, sequence) pairs). Null sequences raise NullKeyError."""

    def __init__(self, sequence_by: tuple[str, ...], problem: str, examples: list[tuple], count: int):
        self.sequence_by, self.problem, self.examples, self.count = sequence_by, problem, examples, count
        shown = ", ".join(repr(e) for e in examples)
        super().__init__(
            f"sequence_by {list(sequence_by)}: {count} {problem}, e.g. {shown}. Nothing was loaded. "
            "The events of a key must be ordered: add a column that breaks the tie to sequence_by."
        )


class RowIdError(SourceError):
    """A `_dlt_id` column given in the data is null or repeated: it is the rows' unique key, and child
    rows name their parent row by it."""

    def __init__(self, column: str, null_rows: int, examples: list, repeated_ids: int):
        self.column, self.null_rows, self.examples, self.repeated_ids = (
            column,
            null_rows,
            examples,
            repeated_ids,
        )
        problems = [f"null in {null_rows} row(s)"] if null_rows else []
        if repeated_ids:
            shown = ", ".join(map(repr, examples))
            problems.append(f"{repeated_ids} value(s) occurring more than once, for example {shown}")
        super().__init__(
            f"column {column!r} of the batch is {' and has '.join(problems)}; a {column} given in the data "
            "is kept as each row's unique id, which child rows name their parent by. Nothing was loaded. "
            f"Give every row its own non-null {column}, or drop the column and the load makes the ids."
        )


class CastError(SourceError):
    """A value cannot be stored as its column's declared type (or, undeclared, as any type Delta has)
    without loss. `problem`, where given, says why in place of the declared type's sentence."""

    def __init__(
        self, column: str, value: Any, declared: str, row_key: dict[str, Any], problem: str | None = None
    ):
        self.column, self.value, self.declared, self.row_key = column, value, declared, row_key
        self.problem = problem
        shown = repr(value) if len(repr(value)) <= _SHOWN_VALUE else repr(value)[:_SHOWN_VALUE] + "..."
        super().__init__(
            f"column {column!r}: "
            + (
                problem
                or f"it is declared {declared}, but the value {shown} of the row {row_key} cannot be "
                "stored as that type without loss"
            )
            + ". Nothing was loaded. Fix the value in the source, or change the column's data_type."
        )


_SHOWN_VALUE = 200  # characters of a value a message shows


class TruncationWarning(UserWarning):
    """Values were stored with less precision than the batch held (Delta stores timestamps in
    microseconds): a warning, where the loss cannot change which rows are which."""


class NullValueError(SourceError):
    """A NULL in a column declared `nullable: False`."""

    def __init__(self, column: str, row_key: dict[str, Any], null_rows: int):
        self.column, self.row_key, self.null_rows = column, row_key, null_rows
        super().__init__(
            f"column {column!r} is declared nullable: False, but it is null (or missing) in {null_rows} "
            f"row(s), for example the row {row_key}. Nothing was loaded. Fill those values in the source, or "
            "declare the column nullable."
        )


class ContractError(SourceError):
    """The schema contract freezes what the batch would add: a table, a column or a variant column."""

    def __init__(self, table: str, entity: str, name: str, detail: str = ""):
        self.table, self.entity, self.name = table, entity, name
        what = {"tables": "the new table", "columns": "the new column", "data_type": "the variant column"}
        super().__init__(
            f"the schema contract of table {table!r} freezes {entity}, and the batch would add "
            f"{what[entity]} {name!r}{detail}. Nothing was loaded. Change the source, or loosen "
            f"schema_contract (e.g. {{{entity!r}: 'evolve'}} or 'discard_row')."
        )


class CursorColumnMissingError(SourceError):
    def __init__(self, cursor_path: str, available: list[str]):
        self.cursor_path, self.available = cursor_path, available
        super().__init__(
            f"incremental cursor {cursor_path!r} is not in the data; columns present: "
            f"{', '.join(available)}. Nothing was loaded. "
            "Fix cursor_path (a dotted path reads struct fields) or add the column."
        )


class CursorValueMissingError(SourceError):
    def __init__(self, cursor_path: str, missing_rows: int, total_rows: int):
        self.cursor_path, self.missing_rows, self.total_rows = cursor_path, missing_rows, total_rows
        super().__init__(
            f"incremental cursor {cursor_path!r} is null or missing in {missing_rows} of {total_rows} "
            "row(s). Nothing was loaded. Fill the cursor in the source, or set "
            "on_cursor_value_missing='include' (load those rows, cursor unchanged) or 'exclude' (skip them)."
        )


class PartitionValueError(SourceError):
    """A value of a partition column makes a folder name longer than a store can hold."""

    def __init__(self, column: str, folder_bytes: int, limit_bytes: int):
        self.column, self.folder_bytes, self.limit_bytes = column, folder_bytes, limit_bytes
        super().__init__(
            f"partition column {column!r} has a value whose partition folder `{column}=<value>` (escaped "
            f"as Delta writes it) is {folder_bytes} bytes long; a file name may have at most {limit_bytes} "
            "bytes. "
            "Nothing was loaded. Shorten or hash those values in the source, or partition by another column."
        )


class ExpectationError(SourceError):
    """Rows of the batch fail an expectation whose action is `fail` (`expectations=`): nothing was
    committed. `failed`: each such expectation's name -> how many rows fail it; `examples`: a few of those
    rows, credentials masked."""

    def __init__(self, table: str, failed: dict[str, int], examples: list[dict]):
        self.table, self.failed, self.examples = table, dict(failed), list(examples)
        counted = ", ".join(f"{name!r} ({rows} row(s))" for name, rows in self.failed.items())
        shown = "; ".join(repr(row) for row in self.examples)
        super().__init__(
            f"table {table!r}: rows fail the expectation(s) {counted} whose action is 'fail'; for example "
            f"{shown}. Nothing was loaded. Fix those rows in the source, or give the expectation another "
            "action ('quarantine' keeps them aside, with their reasons)."
        )


class SchemaError(DeltaMergeError):
    """The batch cannot be stored in the existing table."""

    def __init__(self, table: str, column: str, table_type: str, batch_type: str, reason: str | None = None):
        self.table, self.column = table, column
        self.table_type, self.batch_type = table_type, batch_type
        super().__init__(
            reason
            or f"column {column!r} of table {table!r} is {table_type} but the batch has {batch_type}; "
            "the value cannot be stored without loss. Nothing was loaded. Cast the column in the source "
            "or load into a new table."
        )


class BatchTooLargeError(DeltaMergeError):
    """The batch is too big to pass through the Spark driver to the delta-rs writer."""

    def __init__(self, table: str, batch_bytes: int, limit_bytes: int, driver_memory: str, detail: str = ""):
        self.table, self.batch_bytes, self.limit_bytes = table, batch_bytes, limit_bytes
        self.driver_memory = driver_memory
        super().__init__(
            f"the batch for {table} is about {batch_bytes / 2**20:,.0f} MiB as Arrow, more than the "
            f"{limit_bytes / 2**20:,.0f} MiB the Spark driver can pass to delta-rs with "
            f"spark.driver.memory={driver_memory}{detail}. Nothing was loaded. Raise spark.driver.memory "
            "(and spark.driver.maxResultSize), load smaller windows, or use the delta-spark writer."
        )


class ConflictError(DeltaMergeError):
    """Another writer changed the table while this load was being committed."""


class ChangeFeedError(SourceError):
    """An upstream Delta table's change data feed cannot give the versions a load reads: not a Delta
    table, its feed off at some of them, or its log cleaned up past them. Nothing was loaded."""

    def __init__(self, table: str, start: int | None, end: int | None, problem: str):
        self.table, self.start, self.end, self.problem = table, start, end, problem
        versions = f" versions {start} to {end - 1}" if start is not None and end is not None else ""
        super().__init__(f"change data feed of {table}{versions}: {problem}. Nothing was loaded.")


class StoreError(DeltaMergeError):
    """The dataset's own tables (`_dlt_loads`, `_dlt_pipeline_state`) cannot be read or written."""

    def __init__(self, path: str, problem: str):
        self.path, self.problem = path, problem
        super().__init__(f"{path}: {problem}")


class LoadNotRecordedError(StoreError):
    """The batch was committed, but its load record could not be written; a retry finishes it."""

    def __init__(self, path: str, load_id: str, table: str, table_version: int, problem: str):
        self.load_id, self.table, self.table_version = load_id, table, table_version
        super().__init__(
            path,
            f"the batch was committed to {table} as load {load_id} at version {table_version}, but its "
            f"record could not be written ({problem}). Nothing is lost: fix the problem and retry the same "
            "run (or run the next load of the table), which records this load from its commit without "
            "loading it twice.",
        )


class TableRecreatedError(StoreError):
    """The table is not the one its recorded loads wrote (dropped and recreated, or deleted), and the
    load would go on from the cursor state they stored. Raised before anything is written."""

    def __init__(self, path: str, table: str, pipeline: str, reason: str):
        self.table, self.pipeline, self.reason = table, pipeline, reason
        super().__init__(
            path,
            f"table {table!r} is not the table the recorded loads of pipeline {pipeline!r} wrote ({reason}): "
            "it was dropped and recreated, or deleted. Its cursor state belongs to the old table, so this "
            "incremental load was refused and nothing was written. To load the new table from "
            "initial_value, delete the old table's records: DELETE FROM _dlt_pipeline_state WHERE "
            f"pipeline_name = '{pipeline}' AND table_name = '{table}', and DELETE FROM _dlt_loads WHERE "
            f"schema_name = '{pipeline}' AND table_name = '{table}' (both beside the table); or load it "
            "under another pipeline_name.",
        )


class CatalogError(DeltaMergeError):
    """A table named through a catalog (`schema.table`, `catalog.schema.table`) cannot be loaded as
    named: the name is malformed, the catalog holds something that is not a Delta table under it, its
    schema is missing, or the catalog refused a lookup or a registration. `name`: the table's name as
    given; `problem`: what is wrong and what to do."""

    def __init__(self, name: str, problem: str):
        self.name, self.problem = name, problem
        super().__init__(f"table {name!r}: {problem}")


class JobFailedError(DeltaMergeError):
    """A load job running outside this process (spark-submit, Spark Connect) failed."""

    def __init__(self, message: str, log_tail: str = ""):
        self.log_tail = log_tail
        super().__init__(
            message + (f"\n--- last lines of the driver log ---\n{log_tail}" if log_tail else "")
        )
