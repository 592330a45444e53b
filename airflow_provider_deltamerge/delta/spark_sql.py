"""The delta-spark writer's translation (pure: no Spark needed, any DeltaTable look-alike will do).

A MergePlan becomes Delta's DeltaMergeBuilder calls, write options and session confs. What Delta
reports back (history rows) is read by `writer.logged_commit`, the reader both writers share.
Expressions render as Spark SQL.
"""

from __future__ import annotations

from datetime import date, datetime

from ..model.naming import backticked, spark_string
from ..plan.expressions import SOURCE, TARGET, Expr, render
from ..plan.merge import Clause, MergePlan, Operation, SourceShape
from .writer import USER_METADATA, CommitRequest

USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
TXN_APP_ID_CONF = "spark.databricks.delta.write.txnAppId"
TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"
# Spark writes timestamps as INT96 by default, which pyarrow and delta-rs read as nanoseconds: a table
# holding a timestamp past 2262 (scd2's 9999-12-31 marker) could no longer be read by them.
PARQUET_TIMESTAMP_CONF = "spark.sql.parquet.outputTimestampType"
TIMESTAMP_MICROS = "TIMESTAMP_MICROS"
# Delta copies a MERGE's source before reading it twice, unless the source is only Delta scans. A
# source made of the staged batch alone is a local checkpoint already (spark/stage.py): the same rows at
# each read, so a second copy would only cost a pass over the batch.
MATERIALIZE_SOURCE_CONF = "spark.databricks.delta.merge.materializeSource"
STAGED_ONLY = (SourceShape.ROWS, SourceShape.ROWS_WITH_FLAG, SourceShape.DELETE_KEYS_AND_ROWS)
# A MERGE into a partitioned table bins each partition's rows into files by size (Delta's optimized
# write), rather than Delta's repartitioning by the partition columns, which misreads a partition column
# whose name holds a dot (`re.gion` as column `gion` of `re`). An unpartitioned table's MERGE writes as
# the session's shuffle leaves its rows: binning them would shuffle every rewritten row once more.
OPTIMIZE_WRITE_CONF = "spark.databricks.delta.optimizeWrite.enabled"


class SparkSqlDialect:
    """Spark SQL as Delta's builder parses it: backtick identifiers, TIMESTAMP literals with an offset."""

    quote = staticmethod(backticked)

    @staticmethod
    def timestamp(value: datetime) -> str:
        # With its offset the literal is one instant, whatever the session time zone or timestampType.
        return f"TIMESTAMP '{value.isoformat()}'"

    @staticmethod
    def timestamp_ntz(value: datetime) -> str:
        return f"TIMESTAMP_NTZ '{value.isoformat()}'"

    @staticmethod
    def date(value: date) -> str:
        return f"DATE '{value.isoformat()}'"

    string = staticmethod(spark_string)


SPARK_SQL = SparkSqlDialect()


def render_spark(expr: Expr) -> str:
    """SQL text of expr for Spark."""
    return render(expr, SPARK_SQL)


# ---- the plan as DeltaMergeBuilder calls (no Spark needed: `target` may be any DeltaTable look-alike) ----


def merge_builder(target, source, plan: MergePlan):
    """The plan's DeltaMergeBuilder, not executed. `target`: a delta.tables.DeltaTable; `source`: shaped rows.

    Helper columns never reach the table: with helpers in the source, "update all" and "insert all"
    become explicit column maps of the other source columns (schema evolution adds only assigned columns);
    so they do where a column's name holds a backtick, which Delta's own `*` does not quote.
    """
    helpers = set(plan.helper_columns) & set(source.columns)
    spelled = helpers or any("`" in c for c in source.columns)
    copied = [c for c in source.columns if c not in helpers] if spelled else None
    builder = target.alias(TARGET).merge(source.alias(SOURCE), render_spark(plan.on)).withSchemaEvolution()
    for clause in plan.clauses:
        builder = add_clause(builder, clause, copied)
    return builder


def add_clause(builder, clause: Clause, copied_columns: list[str] | None):
    """One WHEN clause; `copied_columns` (or None for Delta's own `*`) is what update/insert-all copy."""
    condition = render_spark(clause.condition) if clause.condition is not None else None
    kind = (clause.when, clause.action)
    if kind == ("matched", "delete"):
        return builder.whenMatchedDelete(condition=condition)
    if kind == ("matched", "update_all"):
        if copied_columns is None:
            return builder.whenMatchedUpdateAll(condition=condition)
        return builder.whenMatchedUpdate(condition=condition, set=column_copies(copied_columns))
    if kind == ("not_matched", "insert_all"):
        if copied_columns is None:
            return builder.whenNotMatchedInsertAll(condition=condition)
        return builder.whenNotMatchedInsert(condition=condition, values=column_copies(copied_columns))
    if kind == ("matched", "update"):
        return builder.whenMatchedUpdate(condition=condition, set=assignments(clause))
    if kind == ("not_matched_by_source", "update"):
        return builder.whenNotMatchedBySourceUpdate(condition=condition, set=assignments(clause))
    if kind == ("not_matched_by_source", "delete"):
        return builder.whenNotMatchedBySourceDelete(condition=condition)
    raise ValueError(f"the delta-spark writer has no translation for clause {clause}")


def column_copies(columns: list[str]) -> dict[str, str]:
    """{target column: the source column of the same name}, quoted for Delta's builder."""
    return {SPARK_SQL.quote(c): f"{SOURCE}.{SPARK_SQL.quote(c)}" for c in columns}


def assignments(clause: Clause) -> dict[str, str]:
    return {SPARK_SQL.quote(column): render_spark(value) for column, value in clause.assignments}


def write_mode(plan: MergePlan) -> str:
    return "overwrite" if plan.operation is Operation.OVERWRITE else "append"


def write_options(plan: MergePlan, request: CommitRequest, creating: bool = False) -> dict[str, str]:
    """DataFrameWriter options of a WRITE / OVERWRITE: schema merge, commit metadata, txn, replaceWhere,
    and for the write that creates the table its properties (Delta takes `delta.*` options as the new
    table's configuration)."""
    options = {"mergeSchema": "true", USER_METADATA: request.user_metadata(), **txn_options(request)}
    if creating:
        options.update(request.table_properties)
    if plan.replace_where is not None:
        options["replaceWhere"] = render_spark(plan.replace_where)
    return options


def txn_options(request: CommitRequest) -> dict[str, str]:
    return {"txnAppId": request.app_id, "txnVersion": str(request.txn_version)}


def commit_session_conf(plan: MergePlan, request: CommitRequest, partitioned: bool = False) -> dict[str, str]:
    """Session confs for the duration of one commit: timestamps as INT64 microseconds always; for a MERGE
    also the load's commit metadata and txn, which a MERGE takes only from the session (no options),
    where its source is the staged batch alone, no second copy of it (MATERIALIZE_SOURCE_CONF), and into a
    `partitioned` table, the optimized write (OPTIMIZE_WRITE_CONF)."""
    conf = {PARQUET_TIMESTAMP_CONF: TIMESTAMP_MICROS}
    if plan.operation is Operation.MERGE:
        if partitioned:
            conf[OPTIMIZE_WRITE_CONF] = "true"
        if plan.source in STAGED_ONLY and not plan.on_snapshot:
            conf[MATERIALIZE_SOURCE_CONF] = "none"
        conf[USER_METADATA_CONF] = request.user_metadata()
        conf[TXN_APP_ID_CONF] = request.app_id
        conf[TXN_VERSION_CONF] = str(request.txn_version)
    return conf


def set_properties_sql(target: str, properties: dict[str, str]) -> str:
    """ALTER TABLE ... SET TBLPROPERTIES for `target` (a quoted name, or delta.`path`)."""
    pairs = ", ".join(f"{SPARK_SQL.string(k)} = {SPARK_SQL.string(v)}" for k, v in sorted(properties.items()))
    return f"ALTER TABLE {target} SET TBLPROPERTIES ({pairs})"
