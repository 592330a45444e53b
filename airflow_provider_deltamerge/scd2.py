"""scd2 (slowly changing dimension type 2): options and the one MERGE of a load (pure).

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

Nothing here touches Spark or Delta: Spark preparation is in `scd2_stage`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

from .errors import ConfigError
from .expressions import SOURCE, TARGET, Col, Expr, IsNull, Lit, all_of, eq
from .planning import ACTION, Clause, MergePlan, Operation, SourceShape
from .specs import Scd2Options, TableHints, WriteDisposition

ROW_ID = "_dlt_id"  # holds the row version hash unless row_version_column_name is set
RETIRE_AT = "__retire_at"  # helper column of 'retire' rows: the valid_to they set
HELPER_PREFIX = "__"
TIMESTAMP_EXAMPLES = "e.g. '9999-12-31' or '2024-04-09T18:27:53Z'"


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
        """Settings of options already checked by `validate_options` (names stored as given)."""
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


def parse_timestamp(option: str, value: str | datetime | date | None) -> datetime | None:
    """A date or ISO 8601 timestamp as an aware UTC datetime; naive values and dates are UTC."""
    if value is None:
        return None
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, date):
        parsed = datetime(value.year, value.month, value.day)
    else:
        text = str(value).strip()
        text = text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text  # Python 3.10 lacks "Z"
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise ConfigError(
                option, f"{value!r} is not a date or an ISO 8601 timestamp; give one, {TIMESTAMP_EXAMPLES}"
            ) from None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=timezone.utc)
    try:
        return parsed.astimezone(timezone.utc)
    except OverflowError:
        raise ConfigError(option, f"{value!r} is out of range once converted to UTC") from None


def load_time(load_id: str) -> datetime:
    """The time a load id stands for (epoch seconds with microseconds), exactly, as UTC."""
    seconds, _, fraction = load_id.partition(".")
    try:
        micros = int((fraction + "000000")[:6]) if fraction else 0
        return datetime.fromtimestamp(int(seconds), timezone.utc) + timedelta(microseconds=micros)
    except ValueError:
        raise ConfigError(
            "load_id", f"{load_id!r} is not epoch seconds; scd2 needs it as the load time"
        ) from None


def validate_disposition(
    disposition: WriteDisposition, hints: TableHints, normalize: Callable[[str], str]
) -> WriteDisposition:
    """The disposition with its scd2 options checked and names normalised; other dispositions as given."""
    if disposition.scd2 is None:
        return disposition
    return dataclasses.replace(
        disposition, scd2=validate_options(disposition.scd2, hints.merge_key, normalize)
    )


def validate_options(
    options: Scd2Options, merge_key: tuple[str, ...], normalize: Callable[[str], str]
) -> Scd2Options:
    """Check every scd2 option up front (ConfigError naming the option); names go through `normalize`.

    Timestamps come back as ISO 8601 UTC strings, so the options stay JSON-serialisable.
    """
    names = {
        option: _column_name(option, getattr(options, option), normalize)
        for option in ("row_version_column_name", "boundary_column", "active_column_name")
    }
    valid_from, valid_to = (
        _column_name("validity_column_names", n, normalize) for n in options.validity_column_names
    )
    if valid_from == valid_to:
        raise ConfigError(
            "validity_column_names",
            f"{list(options.validity_column_names)} both become {valid_from!r}; give two different names",
        )
    _check_no_clashes(valid_from, valid_to, names, merge_key)
    marker = parse_timestamp("active_record_timestamp", options.active_record_timestamp)
    boundary = parse_timestamp("boundary_timestamp", options.boundary_timestamp)
    if boundary is not None and names["boundary_column"]:
        raise ConfigError(
            "boundary_column",
            "cannot be combined with boundary_timestamp: the boundary comes either from a fixed time or from "
            "a column of the data; remove one of them",
        )
    if boundary is not None and boundary == marker:
        raise ConfigError(
            "boundary_timestamp",
            f"equals active_record_timestamp ({marker.isoformat()}), so retired rows would look active; "
            "use a boundary before the active marker",
        )
    if names["boundary_column"] and not merge_key:
        raise ConfigError(
            "boundary_column",
            "needs a merge_key: the merge key links a new version to the version it replaces, which is "
            "retired at the new version's boundary value. Set merge_key to the natural key "
            "(or a partition column)",
        )
    return Scd2Options(
        validity_column_names=(valid_from, valid_to),
        active_record_timestamp=marker.isoformat() if marker else None,
        boundary_timestamp=boundary.isoformat() if boundary else None,
        **names,
    )


def _column_name(option: str, value, normalize: Callable[[str], str]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(option, f"{value!r} must be a column name")
    name = normalize(value)
    if name.startswith(HELPER_PREFIX):
        raise ConfigError(
            option, f"{name!r} starts with {HELPER_PREFIX!r}, which is reserved for helper columns"
        )
    return name


def _check_no_clashes(
    valid_from: str, valid_to: str, names: dict[str, str | None], merge_key: tuple[str, ...]
) -> None:
    """A validity column or the active flag may not double as another column scd2 reads or writes."""
    written = {valid_from: "validity_column_names", valid_to: "validity_column_names"}
    if names["active_column_name"]:
        if names["active_column_name"] in written:
            raise ConfigError(
                "active_column_name", f"{names['active_column_name']!r} is also a validity column"
            )
        written[names["active_column_name"]] = "active_column_name"
    read = [
        ("row_version_column_name", names["row_version_column_name"]),
        ("boundary_column", names["boundary_column"]),
    ]
    read += [("merge_key", column) for column in merge_key]
    for option, column in read:
        if column in written:
            raise ConfigError(
                option,
                f"{column!r} is also the {written[column]} column, which scd2 writes; choose another column",
            )
    if names["row_version_column_name"] == "_dlt_load_id":
        raise ConfigError("row_version_column_name", "'_dlt_load_id' is the load id, not a row version")


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
