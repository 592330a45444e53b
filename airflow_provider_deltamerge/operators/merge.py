"""DeltaMergeOperator and DeltaScd2Operator: one load into a Delta table per task.

DAG files import this module, so it imports neither pyspark nor the loading core at module level.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import AirflowFailException, AssetAlias, BaseOperator

from ..errors import CatalogError, ConfigError
from ..hooks.deltamerge import DeltaMergeHook, check_submit_options
from ..hooks.storage import storage_options_for
from ..model.arguments import ARGUMENT_CHECKS
from ..model.cdc import DEFAULT_TOMBSTONE_RETENTION
from ..model.contract import tightened
from ..model.expectations import tightened as tightened_expectations
from ..model.request import LoadRequest
from ..model.sources import names_change_feed
from .assets import is_templated, table_asset, table_outlet
from .context import check_overridable, data_interval_of, openlineage_spark_conf, run_context_of, split_conf
from .lineage import DeltaLineageMixin

if TYPE_CHECKING:
    from airflow.sdk import Context


def check_window(window: Any) -> dict[str, Any] | None:
    """An explicit (start, end) window argument as the {"start", "end"} conf the window rules take."""
    if window is None:
        return None
    if isinstance(window, Mapping):
        window = (window.get("start"), window.get("end"))
    if not isinstance(window, (list, tuple)) or len(window) != 2 or window[0] is None:
        raise ConfigError("window", f"{window!r} must be a (start, end) pair")
    return {"start": _as_text(window[0]), "end": _as_text(window[1])}


def _as_text(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else value


class DeltaMergeOperator(DeltaLineageMixin, BaseOperator):
    """Load a source into a Delta table with dlt's write dispositions, keys, hints and windows.

    :param source: reader spec ``{"format", "path", "options"}``, ``{"table": ...}``, ``{"sql": ...}``,
        ``{"callable": "module:function"}`` (called as ``fn(spark, window)``), or a string form.
    :param dataset: base location (absolute path or URI); the table is ``<dataset>/<table_name>``.
        For a table named through a catalog: optional, the folder a new table is created under (else
        its schema's location); see docs/CATALOGS.md.
    :param table_name: target table name: ``table`` (under dataset), ``schema.table`` or
        ``catalog.schema.table`` (through the Spark session's catalog, or AWS Glue's: ``catalog``).
    :param write_disposition: "append", "replace", "merge" or the dict form with a strategy.
    :param primary_key: column or columns of the primary key.
    :param merge_key: column or columns of the merge key.
    :param sequence_by: for an upsert of change events, the column (or columns, compared in order) that
        orders them: the newest event per key wins, an event older than the row is skipped; for scd2,
        every event is a version of its merge key, valid until the next event's (several columns: the
        validity bounds are a struct of them) (docs/CDC.md).
    :param column_list: with sequence_by, the event columns that become table columns, or
    :param except_column_list: the event columns that do not (an op code, a log position).
    :param apply_as_deletes: with sequence_by, a SQL condition marking delete events (``"op = 'D'"``):
        the newest event of its key deletes the row and is remembered (a tombstone), so an older event
        arriving later does not bring the key back; for scd2, a delete closes the version it falls
        into, and every delete is remembered at its place (docs/CDC.md).
    :param apply_as_truncates: with sequence_by (upsert only), a SQL condition marking truncate events
        (``"op = 'T'"``, key columns may be null): it removes every row older than it, and events older
        than it, arriving in its batch or later, are skipped (docs/CDC.md).
    :param tombstone_retention: how long a deleted key (or a truncate) is remembered, in seconds or a
        timedelta (default 7 days); not for scd2, whose deletes are kept as long as its history.
    :param ignore_null_updates: with sequence_by, a null in an event keeps the stored value (partial
        updates): each column holds the newest value an event carried for it; for scd2, a version's
        null keeps the value of the version before it (docs/CDC.md).
    :param ignore_null_updates_column_list: ... in these columns only, or
    :param ignore_null_updates_except_column_list: ... in all non-key columns but these.
    :param track_history_column_list: with scd2 and sequence_by, only a change of these columns opens a
        version; an event changing only others updates the current version in place (docs/CDC.md).
    :param track_history_except_column_list: ... of all stored columns but these.
    :param columns: dlt's column schema: hints and data types per column, e.g.
        ``{"deleted": {"hard_delete": True}, "amount": {"data_type": "decimal", "scale": 2}}``.
    :param schema_contract: how the table's schema may change: "evolve" (default), "freeze",
        "discard_row", "discard_value", or a dict over ``tables``, ``columns``, ``data_type``.
    :param expectations: data quality checks, ``{action: {name: condition}}`` with actions "warn",
        "drop", "quarantine", "fail", e.g. ``{"drop": {"positive_amount": "amount > 0"}}`` (see
        docs/EXPECTATIONS.md); dag_run.conf may only make them stricter.
    :param incremental: an ``Incremental`` or its dict form (cursor column, initial value, ...).
    :param pipeline_name: pipeline name in the state tables.
    :param backend: "auto", "delta-rs" or "delta-spark".
    :param naming: "snake_case" or "direct".
    :param window_overwrite: for append with a window, replace that window's rows (safe re-runs).
    :param table_properties: Delta table properties, e.g. ``{"delta.enableChangeDataFeed": True}``: set
        when the load creates the table, and by a metadata commit before the load when they differ.
    :param max_table_nesting: depth of child tables made from array columns (None: no limit; 0: none,
        arrays kept as JSON text).
    :param nested_layout: how the dicts of Python rows are stored: "flatten" (dlt's ``<field>__<sub>``
        columns) or "struct" (Spark struct columns); None: flattened in a new table, as they are in an
        existing one.
    :param root_key: give child rows ``_dlt_root_id`` whatever the disposition (merges always do).
    :param window: explicit ``(start, end)`` to load, stateless (used by mapped backfills).
    :param conn_id: none (local Spark), a ``deltamerge``, ``spark`` or ``spark_connect`` connection.
    :param storage_conn_id: an ``aws`` or Azure (``wasb``, ``adls``) connection holding the credentials
        of a dataset on S3 or Azure (see docs/STORAGE.md); none: the environment's credentials.
    :param spark_conf: Spark properties for the session or spark-submit.
    :param submit_options: extra SparkSubmitHook arguments (``driver_memory``, ``jars``, ...).
    :param delta_jars: Delta's jars for the delta-spark writer (local and spark-submit runs).
    :param conf_overridable: options dag_run.conf may set for this task (window bounds always may).
    :param emit_asset: declare the target table as an outlet Asset with the metrics as event extra.
    :param catalog: who names a ``schema.table``: "spark" (the session's catalog) or "glue".
    :param create_schema: a catalog table's missing schema is created instead of refused.
    """

    template_fields: Sequence[str] = (
        "source",
        "dataset",
        "table_name",
        "catalog",
        "write_disposition",
        "primary_key",
        "merge_key",
        "sequence_by",
        "column_list",
        "except_column_list",
        "apply_as_deletes",
        "apply_as_truncates",
        "ignore_null_updates_column_list",
        "ignore_null_updates_except_column_list",
        "track_history_column_list",
        "track_history_except_column_list",
        "columns",
        "schema_contract",
        "expectations",
        "incremental",
        "window",
        "pipeline_name",
        "table_properties",
    )
    template_fields_renderers = {
        "source": "json",
        "write_disposition": "json",
        "columns": "json",
        "schema_contract": "json",
        "expectations": "json",
        "table_properties": "json",
    }
    ui_color = "#00add4"

    def __init__(
        self,
        *,
        source: str | dict[str, Any],
        table_name: str,
        dataset: str | None = None,
        write_disposition: str | dict[str, Any] = "append",
        primary_key: str | list[str] | None = None,
        merge_key: str | list[str] | None = None,
        sequence_by: str | list[str] | None = None,
        column_list: str | list[str] | None = None,
        except_column_list: str | list[str] | None = None,
        apply_as_deletes: str | None = None,
        apply_as_truncates: str | None = None,
        tombstone_retention: Any = DEFAULT_TOMBSTONE_RETENTION,
        ignore_null_updates: bool = False,
        ignore_null_updates_column_list: str | list[str] | None = None,
        ignore_null_updates_except_column_list: str | list[str] | None = None,
        track_history_column_list: str | list[str] | None = None,
        track_history_except_column_list: str | list[str] | None = None,
        columns: dict[str, dict[str, Any]] | list[dict[str, Any]] | None = None,
        schema_contract: str | dict[str, str] | None = None,
        expectations: dict[str, dict[str, str]] | None = None,
        incremental: Any = None,
        pipeline_name: str | None = None,
        backend: str = "auto",
        naming: str = "snake_case",
        window_overwrite: bool = True,
        table_properties: dict[str, Any] | None = None,
        max_table_nesting: int | None = None,
        nested_layout: str | None = None,
        root_key: bool = False,
        window: Any = None,
        conn_id: str | None = None,
        storage_conn_id: str | None = None,
        spark_conf: dict[str, Any] | None = None,
        submit_options: dict[str, Any] | None = None,
        delta_jars: Any = None,
        conf_overridable: Sequence[str] = (),
        emit_asset: bool = True,
        catalog: str = "spark",
        create_schema: bool = False,
        **kwargs: Any,
    ) -> None:
        overridable = check_overridable(conf_overridable)
        if emit_asset:
            outlets = list(kwargs.get("outlets") or [])
            outlet = table_outlet(dataset, table_name, naming, catalog)
            kwargs["outlets"] = outlets if outlet in outlets else [*outlets, outlet]
        super().__init__(**kwargs)
        self.conf_overridable = overridable
        self.emit_asset = emit_asset
        self._declared_outlet = table_outlet(dataset, table_name, naming, catalog) if emit_asset else None
        self.source = source
        self.dataset = dataset
        self.table_name = table_name
        self.catalog = catalog
        self.create_schema = create_schema
        self.write_disposition = write_disposition
        self.primary_key = primary_key
        self.merge_key = merge_key
        self.sequence_by = sequence_by
        self.column_list = column_list
        self.except_column_list = except_column_list
        self.apply_as_deletes = apply_as_deletes
        self.apply_as_truncates = apply_as_truncates
        self.tombstone_retention = tombstone_retention
        self.ignore_null_updates = ignore_null_updates
        self.ignore_null_updates_column_list = ignore_null_updates_column_list
        self.ignore_null_updates_except_column_list = ignore_null_updates_except_column_list
        self.track_history_column_list = track_history_column_list
        self.track_history_except_column_list = track_history_except_column_list
        self.columns = columns
        self.schema_contract = schema_contract
        self.expectations = expectations
        self.incremental = incremental.to_dict() if hasattr(incremental, "to_dict") else incremental
        self.pipeline_name = pipeline_name
        self.backend = backend
        self.naming = naming
        self.window_overwrite = window_overwrite
        self.table_properties = table_properties
        self.max_table_nesting = max_table_nesting
        self.nested_layout = nested_layout
        self.root_key = root_key
        self.window = window
        self.conn_id = conn_id
        self.storage_conn_id = storage_conn_id
        self.storage_options = None  # read from storage_conn_id when the task runs, never in the DAG
        self.spark_conf = spark_conf
        self.submit_options = submit_options
        self.delta_jars = delta_jars
        self._hook: DeltaMergeHook | None = None
        self._lineage_conf: dict[str, str] = {}
        self.check_arguments()

    def check_arguments(self) -> None:
        """Validate what is known before rendering, so a bad DAG fails when it is parsed."""
        for name, check in {**ARGUMENT_CHECKS, "window": check_window}.items():
            if name == "dataset" and self.dataset is None:  # a catalog table's is optional
                continue
            if not is_templated(getattr(self, name)):
                check(getattr(self, name))
        if self.window is not None and self.incremental is None and not names_change_feed(self.source):
            raise ConfigError("window", "a window selects rows by the cursor column: set incremental too")
        check_submit_options(self.submit_options)

    def load_arguments(self, overrides: Mapping[str, Any]) -> dict[str, Any]:
        """The rendered load arguments with dag_run.conf overrides applied."""
        arguments = {name: getattr(self, name) for name in ARGUMENT_CHECKS}  # the request's arguments
        arguments.update({k: v for k, v in overrides.items() if k in arguments})
        if "schema_contract" in overrides:  # dag_run.conf may tighten the contract, never loosen it
            arguments["schema_contract"] = tightened(self.schema_contract, overrides["schema_contract"])
        if "expectations" in overrides:  # ... and its expectations only stricter
            arguments["expectations"] = tightened_expectations(self.expectations, overrides["expectations"])
        return arguments

    @contextmanager
    def failing_without_retry(self, errors: tuple[type[Exception], ...] = (ConfigError,)) -> Iterator[None]:
        """A configuration error fails the task at once: a retry cannot mend it (nor, while the request is
        built, a malformed table name)."""
        try:
            yield
        except errors as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}") from exc

    def build_request(self, context: Context, window: Mapping[str, Any] | None = None) -> LoadRequest:
        """The LoadRequest for this task instance (the explicit window wins over dag_run.conf's)."""
        with self.failing_without_retry((ConfigError, CatalogError)):
            conf_window, overrides = split_conf(self._dag_run_conf(context), self.conf_overridable)
            explicit = check_window(self.window) if window is None else window
            arguments = {**self.load_arguments(overrides), "storage_options": self.read_storage_options()}
            return LoadRequest.create(
                **arguments,
                data_interval=data_interval_of(context),
                run_context=run_context_of(context, self._timetable(), conf_window, explicit),
            )

    def read_storage_options(self) -> dict[str, str] | None:
        """The dataset's storage options from `storage_conn_id`, read once per task run, secrets masked."""
        if self.storage_options is None and self.storage_conn_id:
            self.storage_options = storage_options_for(self.storage_conn_id)
        return self.storage_options

    def load(self, request: LoadRequest) -> dict[str, Any]:
        """Run one load with the hook and return its metrics."""
        with self.failing_without_retry():
            metrics = self.hook.run(request)
        self.log.info("Load %s: %s", metrics.get("load_id"), metrics)
        return metrics

    def execute(self, context: Context) -> dict[str, Any]:
        self._lineage_conf = openlineage_spark_conf(context)
        metrics = self.load(self.build_request(context))
        self.publish(context, metrics)
        return metrics

    def publish(self, context: Context, extra: dict[str, Any]) -> None:
        """Put the metrics on the target table's asset event (through its alias where it is templated)."""
        if not self.emit_asset:
            return
        asset = table_asset(self.dataset, self.table_name, self.naming, self.catalog)
        outlet = self._declared_outlet
        if isinstance(outlet, AssetAlias):
            context["outlet_events"][outlet].add(asset, extra=extra)
        else:
            context["outlet_events"][asset].extra = extra

    @property
    def hook(self) -> DeltaMergeHook:
        if self._hook is None:
            self._hook = DeltaMergeHook(
                self.conn_id,
                spark_conf={**self._lineage_conf, **(self.spark_conf or {})},  # the DAG's own settings win
                submit_options=self.submit_options,
                delta_jars=self.delta_jars,
            )
        return self._hook

    def on_kill(self) -> None:
        if self._hook is not None:
            self._hook.kill()

    @staticmethod
    def _dag_run_conf(context: Context) -> dict[str, Any]:
        dag_run = context.get("dag_run")
        return dict(getattr(dag_run, "conf", None) or {})

    def _timetable(self) -> Any:
        return getattr(self.dag, "timetable", None) if self.has_dag() else None


class DeltaScd2Operator(DeltaMergeOperator):
    """Load a dimension with the scd2 merge strategy; its options are named arguments.

    :param validity_column_names: ``[from, to]`` column names (default ``_dlt_valid_from/_to``).
    :param active_record_timestamp: valid_to of active rows (default NULL).
    :param boundary_timestamp: the validity boundary of this load (default: the load's time).
    :param row_version_column_name: a column holding the row version (default: computed hash).
    :param boundary_column: take the boundary from this column of the data instead.
    :param active_column_name: also keep a boolean "is current" column.
    :param merge_key: natural key or partition column limiting what absent rows retire.
    Other arguments as :class:`DeltaMergeOperator` (``write_disposition`` is set by this operator).
    """

    def __init__(
        self,
        *,
        validity_column_names: Sequence[str] | None = None,
        active_record_timestamp: str | None = None,
        boundary_timestamp: str | None = None,
        row_version_column_name: str | None = None,
        boundary_column: str | None = None,
        active_column_name: str | None = None,
        **kwargs: Any,
    ) -> None:
        if "write_disposition" in kwargs:
            raise ConfigError("write_disposition", "DeltaScd2Operator sets it; pass the scd2 options instead")
        options = {
            "validity_column_names": list(validity_column_names) if validity_column_names else None,
            "active_record_timestamp": active_record_timestamp,
            "boundary_timestamp": boundary_timestamp,
            "row_version_column_name": row_version_column_name,
            "boundary_column": boundary_column,
            "active_column_name": active_column_name,
        }
        disposition = {"disposition": "merge", "strategy": "scd2"}
        disposition.update({k: v for k, v in options.items() if v is not None})
        super().__init__(write_disposition=disposition, **kwargs)
