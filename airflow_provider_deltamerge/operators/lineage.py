"""OpenLineage for the operators: what a task read, the Delta table it wrote, and how.

`DeltaLineageMixin` gives an operator Airflow's OpenLineage methods. Only
apache-airflow-providers-openlineage calls them, and only they import it (or the openlineage client),
so without that provider they cost nothing. What they report:

- input: the source. A reader path is named by its location (``file`` and the path, or
  ``s3://bucket`` and the key); a table by the Spark catalog; a query by the tables it reads, with the
  query as the job's ``sql`` facet. A callable source is opaque and names no input. Reader options are
  never reported: they may hold secrets.
- output: the Delta table, named from its URI, with the ``storage`` facet; on completion also its
  ``schema`` and ``version`` after the task, ``outputStatistics`` (rows and files the task wrote, and
  the bytes its commits added) and ``columnLineage``: a load copies every column of the table that is
  not one it makes itself (dlt's ``_dlt_*``, scd2's validity columns) from the source column of the same
  stored name, or for a query from the column the SQL parser maps to it; with ``expectations=``, also
  ``dataQualityAssertions``: each expectation, successful where no row failed it (a child table's as
  ``<child table>.<name>``).

The provider calls the completion method in a process it forks from the task's, where delta-rs cannot
run (its runtime does not survive a fork). So what the task returned, and the table's facts, are
recorded when ``execute`` returns, in the task's own process, and only while OpenLineage is enabled.
A fact that cannot be read then (a store the worker cannot reach) is left out.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from ..model.naming import SYSTEM_PREFIX, naming_convention, table_path, table_uri
from ..model.storage import delta_rs_options
from ..model.table_names import TableName, catalog_namespace, parse_table_name

log = logging.getLogger(__name__)

CATALOG_NAMESPACE = "spark_catalog"  # tables of a source spec live in the Spark session's catalog
ROWS_WRITTEN = "numOutputRows"  # rows in the files a load wrote (Delta's name, both writers report it)
FILES_ADDED = "numTargetFilesAdded"  # data files a load's commit added


def location_name(location: str) -> tuple[str, str]:
    """OpenLineage's (namespace, name) of a storage location: ``file`` and the path for a local one,
    ``scheme://authority`` and the path inside it otherwise."""
    parsed = urlparse(location)
    if parsed.scheme == "file":
        return "file", parsed.path
    if parsed.scheme == "" or len(parsed.scheme) == 1:  # a plain path (or a Windows drive letter)
        return "file", location
    return f"{parsed.scheme}://{parsed.netloc}", parsed.path.lstrip("/")


@dataclass
class SourceLineage:
    """What a source spec reads: datasets as (namespace, name), the query, and for a query the input
    column of each output column the SQL parser resolved, as (namespace, name, column)."""

    inputs: list[tuple[str, str]] = field(default_factory=list)
    query: str | None = None
    columns: dict[str, tuple[str, str, str]] = field(default_factory=dict)


def source_lineage(source: Any, normalize: Callable[[str], str]) -> SourceLineage:
    """The lineage of a (rendered) source spec; reader options are never reported, they may hold secrets."""
    if isinstance(source, str):
        from ..model.sources import parse_source

        source = parse_source(source)
    if not isinstance(source, Mapping):
        return SourceLineage()
    if "format" in source:
        path = source.get("path")
        return SourceLineage([location_name(path)] if path else [])
    if "table" in source:
        return SourceLineage([(CATALOG_NAMESPACE, source["table"])])
    if "sql" in source:
        return _query_lineage(source["sql"], normalize)
    if "delta_changes" in source:
        return SourceLineage([location_name(source["delta_changes"])])
    return SourceLineage()


def _query_lineage(query: str, normalize: Callable[[str], str]) -> SourceLineage:
    from openlineage.common.sql import parse

    try:
        parsed = parse([query], dialect="spark")
    except Exception:  # SQL the parser does not know: the query is still reported
        log.debug("OpenLineage's SQL parser could not parse the source query", exc_info=True)
        parsed = None
    if parsed is None:
        return SourceLineage(query=query)
    tables = [(CATALOG_NAMESPACE, t.qualified_name) for t in parsed.in_tables]
    columns = {}
    for lineage in parsed.column_lineage:
        if len(lineage.lineage) == 1 and lineage.lineage[0].origin is not None:
            origin = lineage.lineage[0]
            columns[normalize(lineage.descendant.name)] = (
                CATALOG_NAMESPACE,
                origin.origin.qualified_name,
                origin.name,
            )
    return SourceLineage(tables, query, columns)


def lineage_enabled() -> bool:
    """Whether apache-airflow-providers-openlineage is installed and configured to emit events."""
    if importlib.util.find_spec("airflow.providers.openlineage") is None:
        return False
    from airflow.providers.openlineage import conf

    return not conf.is_disabled()


def metrics_list(result: Any) -> list[dict[str, Any]]:
    """What a task returned as a list of metrics dicts (a backfill returns one per chunk)."""
    if isinstance(result, Mapping):
        return [dict(result)]
    if isinstance(result, list):
        return [dict(m) for m in result if isinstance(m, Mapping)]
    return []


@dataclass(frozen=True)
class TableFacts:
    """The Delta table after the task: version, schema, and the bytes of the files its commits added."""

    version: int
    schema: list[dict[str, Any]]  # Delta's JSON form of each field
    bytes_added: int


def read_table_facts(
    path: str, versions: list[int], storage_options: dict | None = None
) -> TableFacts | None:
    """The table as of the newest of `versions` (its latest without any), from its log; None when it
    cannot be read from here."""
    try:
        from deltalake import DeltaTable

        version = max(versions) if versions else None
        table = DeltaTable(path, version=version, storage_options=storage_options)
        fields = [json.loads(f.to_json()) for f in table.schema().fields]
        files = functools.cache(
            lambda version: _files(path, version, storage_options)
        )  # a backfill's versions follow on
        added = [files(v).items() - files(v - 1).items() for v in versions]
    except Exception:  # a store this worker cannot reach, a table gone: report names only
        log.debug("could not read Delta table %s for OpenLineage", path, exc_info=True)
        return None
    return TableFacts(table.version(), fields, sum(size for files in added for _, size in files))


def _files(path: str, version: int, storage_options: dict | None = None) -> dict[str, int]:
    """Data files of a version and their sizes (none before the first version)."""
    if version < 0:
        return {}
    from deltalake import DeltaTable

    actions = DeltaTable(path, version=version, storage_options=storage_options).get_add_actions(flatten=True)
    return dict(
        zip(actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist(), strict=True)
    )


def _schema_fields(fields: list[dict[str, Any]]) -> list:
    from openlineage.client.facet_v2 import schema_dataset

    def one(item: dict[str, Any], position: int | None):
        kind = item["type"]
        nested = kind.get("fields", []) if isinstance(kind, dict) and kind.get("type") == "struct" else []
        return schema_dataset.SchemaDatasetFacetFields(
            name=item["name"],
            type=kind if isinstance(kind, str) else kind["type"],
            ordinal_position=position,
            fields=[one(child, None) for child in nested],
        )

    return [one(item, position) for position, item in enumerate(fields, 1)]


@dataclass(frozen=True)
class Recorded:
    """What the task returned, and its table's facts, as read in the task's own process."""

    metrics: list[dict[str, Any]]
    facts: TableFacts | None


@dataclass(frozen=True)
class Written:
    """What a task wrote into its table: rows, files and bytes, each None when unknown."""

    rows: int | None
    files: int | None
    size: int | None


def _recording(execute: Callable) -> Callable:
    """`execute`, then `record_lineage` with what it returned."""

    @functools.wraps(execute)
    def execute_and_record(self, *args: Any, **kwargs: Any) -> Any:
        self._lineage_recorded = None  # nothing of an earlier run is reported for this one
        result = execute(self, *args, **kwargs)
        self.record_lineage(result)
        return result

    execute_and_record.records_lineage = True
    return execute_and_record


class DeltaLineageMixin:
    """Airflow's OpenLineage methods for an operator that writes one Delta table.

    The operator has ``dataset``, ``table_name`` and ``naming``, and ``source`` when it reads one
    (rendered before these methods run). Each subclass's ``execute`` is wrapped, once, so that what it
    returns is recorded (see the module docstring). An operator whose return value is not a
    load's metrics (or a list of them) overrides `committed_versions` and `written`.
    """

    _lineage_recorded: Recorded | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        execute = getattr(cls, "execute", None)  # its own, or one it inherits from a class without the mixin
        if callable(execute) and not getattr(execute, "records_lineage", False):
            cls.execute = _recording(execute)

    def record_lineage(self, result: Any) -> None:
        """Keep what the task returned and its table's facts, while OpenLineage is enabled."""
        try:
            if not lineage_enabled():
                return
            metrics = metrics_list(result)
            path = self._table_location(metrics)
            options = delta_rs_options(path, getattr(self, "storage_options", None))
            facts = read_table_facts(path, self.committed_versions(metrics), options)
        except Exception:  # lineage never fails a task
            log.warning("could not record OpenLineage facts of %s", self.table_name, exc_info=True)
            return
        self._lineage_recorded = Recorded(metrics, facts)

    def _table_location(self, metrics: list[dict[str, Any]]) -> str:
        """Where the table lives: a catalog table where its loads found it (`table_location`)."""
        located = [m["table_location"] for m in metrics if m.get("table_location")]
        if located:
            return located[-1]
        return table_path(self.dataset, naming_convention(self.naming)(self.table_name))

    def _output_name(self) -> tuple[str, str]:
        """OpenLineage's (namespace, name) of the table: a catalog table by its catalog's name
        (`spark_catalog` and `schema.table`, as source tables are named), else by its location."""
        target = parse_table_name(self.table_name)
        if not target.in_catalog:
            return location_name(table_uri(self.dataset, self.table_name, self.naming))
        catalog = getattr(self, "catalog", "spark")
        table = naming_convention(self.naming)(target.table)
        return catalog_namespace(target, catalog), TableName(table, target.schema).display()

    def get_openlineage_facets_on_start(self) -> Any:
        return self._operator_lineage(None)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        return self._operator_lineage(self._lineage_recorded or Recorded([], None))

    def committed_versions(self, metrics: list[dict[str, Any]]) -> list[int]:
        """The table versions the task committed: one per load that loaded (that has a load id)."""
        return [m["table_version"] for m in metrics if m.get("load_id") is not None]

    def written(self, metrics: list[dict[str, Any]], facts: TableFacts | None) -> Written | None:
        """Rows and files from the loads' metrics (Delta's names), bytes from their commits."""
        loads = [m for m in metrics if m.get("load_id") is not None]
        if not loads:
            return None
        rows = [m[ROWS_WRITTEN] for m in loads if ROWS_WRITTEN in m]
        files = [m[FILES_ADDED] for m in loads if FILES_ADDED in m]
        return Written(
            sum(rows) if len(rows) == len(loads) else None,
            sum(files) if len(files) == len(loads) else None,
            facts.bytes_added if facts is not None else None,
        )

    def _operator_lineage(self, recorded: Recorded | None) -> Any:
        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.event_v2 import InputDataset, OutputDataset
        from openlineage.client.facet_v2 import output_statistics_output_dataset as statistics
        from openlineage.client.facet_v2 import sql_job, storage_dataset

        normalize = naming_convention(self.naming)
        source = source_lineage(getattr(self, "source", None), normalize)
        namespace, name = self._output_name()
        facets: dict[str, Any] = {"storage": storage_dataset.StorageDatasetFacet("delta", "parquet")}
        output_facets: dict[str, Any] = {}
        if recorded is not None:  # the task completed
            facets.update(self._table_facets(recorded.facts, source))
            quality = _quality_assertions(recorded.metrics)
            if quality is not None:
                facets["dataQualityAssertions"] = quality
            written = self.written(recorded.metrics, recorded.facts)
            if written is not None:
                output_facets["outputStatistics"] = statistics.OutputStatisticsOutputDatasetFacet(
                    rowCount=written.rows, size=written.size, fileCount=written.files
                )
        return OperatorLineage(
            inputs=[InputDataset(ns, n) for ns, n in source.inputs],
            outputs=[OutputDataset(namespace, name, facets=facets, outputFacets=output_facets)],
            job_facets={"sql": sql_job.SQLJobFacet(source.query, dialect="spark")} if source.query else {},
        )

    def _table_facets(self, facts: TableFacts | None, source: SourceLineage) -> dict[str, Any]:
        from openlineage.client.facet_v2 import dataset_version_dataset, schema_dataset

        if facts is None:
            return {}
        facets: dict[str, Any] = {
            "schema": schema_dataset.SchemaDatasetFacet(fields=_schema_fields(facts.schema)),
            "version": dataset_version_dataset.DatasetVersionDatasetFacet(str(facts.version)),
        }
        added = {naming_convention(self.naming)(name) for name in self._added_columns()}
        copied = [
            f["name"]
            for f in facts.schema
            if not f["name"].startswith(SYSTEM_PREFIX) and f["name"] not in added
        ]
        lineage = _column_lineage(copied, source)
        if lineage is not None:
            facets["columnLineage"] = lineage
        return facets

    def _added_columns(self) -> set[str]:
        """Columns the load makes rather than copies, besides dlt's own: those an scd2 disposition names
        (as given; stored by the naming convention)."""
        disposition = getattr(self, "write_disposition", None)
        if not isinstance(disposition, Mapping):
            return set()
        named = [*(disposition.get("validity_column_names") or ()), disposition.get("active_column_name")]
        return {n for n in named if n}


def _quality_assertions(metrics: list[dict[str, Any]]) -> Any:
    """The loads' expectations (`expectations=`) as OpenLineage's data quality assertions: each one
    successful where no row of any load failed it, a child table's named `<child table>.<name>`; None
    without expectations."""
    from openlineage.client.facet_v2 import data_quality_assertions_dataset as quality

    failed: dict[str, int] = {}
    for load in metrics:
        checked = [("", load.get("expectations"))]
        children = (load.get("child_expectations") or {}).items()
        checked += [(f"{child}.", counts.get("expectations")) for child, counts in children]
        for prefix, expectations in checked:
            for name, counts in (expectations or {}).items():
                failed[prefix + name] = failed.get(prefix + name, 0) + counts["failed"]
    if not failed:
        return None
    assertions = [quality.Assertion(assertion=name, success=rows == 0) for name, rows in failed.items()]
    return quality.DataQualityAssertionsDatasetFacet(assertions=assertions)


def _column_lineage(columns: list[str], source: SourceLineage) -> Any:
    """Each copied column from the source column the query maps to it, else from the one input's column
    of the same name; None when the source names no input."""
    from openlineage.client.facet_v2 import column_lineage_dataset as lineage

    fields = {}
    for column in columns:
        if column in source.columns:
            namespace, name, origin = source.columns[column]
        elif len(source.inputs) == 1:
            (namespace, name), origin = source.inputs[0], column
        else:
            continue
        how = lineage.Transformation(type="DIRECT", subtype="IDENTITY" if origin == column else None)
        fields[column] = lineage.Fields(
            inputFields=[lineage.InputField(namespace, name, origin, transformations=[how])]
        )
    return lineage.ColumnLineageDatasetFacet(fields=fields) if fields else None
