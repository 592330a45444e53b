"""scd2 (slowly changing dimension type 2): settings and the one MERGE of a load (pure).

A table row is a version of a record, valid from `valid_from` until `valid_to`; the active version
has `valid_to` = the active marker (NULL by default). A load inserts the batch's versions that are not
active yet and retires (sets `valid_to` on) the active versions it replaces:
- no merge key (full extract): every active version absent from the batch is retired;
- with a merge key (natural key or "partition"): only active versions whose merge-key value occurs in
  the batch can be retired, so absent keys stay active. Compound keys compare column by column.

The version of a row is a hash of its stored values, or the user's `row_version_column_name` column.
The validity boundary is `boundary_timestamp`, else the load's time (its load id), else, per row, the
value of `boundary_column`: the new version is valid from it and the version it replaces is valid
until it (the latest such value of the batch rows with the same merge-key value).

Options and their validation are in `model.scd2`; Spark preparation is in `spark.scd2`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..model.naming import HELPER_PREFIX, ROW_ID
from ..model.scd2 import Scd2Options, parse_timestamp
from .expressions import SOURCE, TARGET, Col, Expr, IsNull, Lit, all_of, eq
from .merge import ACTION, Clause, MergePlan, Operation, SourceShape

RETIRE_AT = HELPER_PREFIX + "retire_at"  # helper column of 'retire' rows: the valid_to they set


@dataclass(frozen=True)
class Scd2Settings:
    """Resolved scd2 options: stored column names and parsed timestamps."""

    valid_from: str = "_dlt_valid_from"
    valid_to: str = "_dlt_valid_to"
    active_marker: datetime | None = None  # valid_to of active rows; None means NULL
    boundary: datetime | None = None  # boundary_timestamp; None: the load's time or boundary_column
    version_column: str = ROW_ID
    boundary_column: str | None = None
    active_column: str | None = None

    @property
    def hashed_version(self) -> bool:
        """True when the version is our hash of the row (stored in _dlt_id)."""
        return self.version_column == ROW_ID

    @property
    def system_columns(self) -> tuple[str, ...]:
        """Columns scd2 writes itself; they are never part of the row version."""
        return (self.valid_from, self.valid_to) + ((self.active_column,) if self.active_column else ())

    @classmethod
    def from_options(cls, options: Scd2Options) -> Scd2Settings:
        """Settings of options already checked by `model.scd2.validate_options` (names stored as given)."""
        valid_from, valid_to = options.validity_column_names
        return cls(
            valid_from=valid_from,
            valid_to=valid_to,
            active_marker=parse_timestamp("active_record_timestamp", options.active_record_timestamp),
            boundary=parse_timestamp("boundary_timestamp", options.boundary_timestamp),
            version_column=options.row_version_column_name or ROW_ID,
            boundary_column=options.boundary_column,
            active_column=options.active_column_name,
        )


def active_condition(settings: Scd2Settings, side: str = TARGET) -> Expr:
    """True for active rows: valid_to is the active marker (IS NULL by default)."""
    valid_to = Col(settings.valid_to, side)
    return IsNull(valid_to) if settings.active_marker is None else eq(valid_to, Lit(settings.active_marker))


def retire_assignments(settings: Scd2Settings, valid_to: Expr) -> tuple[tuple[str, Expr], ...]:
    """The columns a retire sets: valid_to, and the active flag to false."""
    flag = ((settings.active_column, Lit(False)),) if settings.active_column else ()
    return ((settings.valid_to, valid_to), *flag)


@dataclass(frozen=True)
class RetireScope:
    """For SCD2_ROWS_AND_RETIRES: which active target versions a batch retires (computed in Spark).

    An active target row is retired when its merge-key value occurs in the batch and its
    (merge key, version) does not; it gets valid_to = the latest valid_from of the batch rows with
    that merge-key value (the boundary, or the boundary_column value).
    """

    merge_key: tuple[str, ...]
    version_column: str
    valid_from: str
    valid_to: str
    active_marker: datetime | None

    @property
    def target_columns(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*self.merge_key, self.version_column, self.valid_to)))


def plan_scd2(
    settings: Scd2Settings,
    merge_key: tuple[str, ...],
    *,
    table_exists: bool,
    batch_empty: bool,
    boundary: datetime | None,
) -> MergePlan:
    """The one commit of an scd2 load. `boundary` is the fixed boundary, None with a boundary_column.

    The staged rows the plan expects carry their version, valid_from (boundary or boundary_column
    value), valid_to (active marker) and the active flag.
    """
    if boundary is None and settings.boundary_column is None:
        raise ValueError("plan_scd2 needs a boundary when no boundary_column is set")
    if batch_empty:
        return MergePlan(
            Operation.NOTHING, reason="scd2 of an empty batch retires nothing and inserts nothing"
        )
    if not table_exists:
        return MergePlan(Operation.WRITE, reason="scd2 into a new table: every row is an active version")
    active = active_condition(settings)
    if not merge_key:
        return MergePlan(
            Operation.MERGE,
            on=all_of(eq(Col(settings.version_column, TARGET), Col(settings.version_column, SOURCE)), active),
            clauses=(
                Clause("not_matched", "insert_all"),
                Clause(
                    "not_matched_by_source", "update", active, retire_assignments(settings, Lit(boundary))
                ),
            ),
            reason="scd2 full extract: insert new versions, retire active versions absent from the batch",
        )
    matched = (
        eq(Col(c, TARGET), Col(c, SOURCE)) for c in dict.fromkeys((*merge_key, settings.version_column))
    )
    scope = RetireScope(
        merge_key, settings.version_column, settings.valid_from, settings.valid_to, settings.active_marker
    )
    return MergePlan(
        Operation.MERGE,
        SourceShape.SCD2_ROWS_AND_RETIRES,
        delete_keys=scope.target_columns,
        on=all_of(*matched, active),
        clauses=(
            Clause(
                "matched",
                "update",
                eq(Col(ACTION, SOURCE), Lit("retire")),
                retire_assignments(settings, Col(RETIRE_AT, SOURCE)),
            ),
            Clause("not_matched", "insert_all", eq(Col(ACTION, SOURCE), Lit("insert"))),
        ),
        helper_columns=(ACTION, RETIRE_AT),
        retire=scope,
        reason=f"scd2 with merge key {list(merge_key)}: insert new versions, retire replaced versions of the "
        "batch's merge-key values",
    )
