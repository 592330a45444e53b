"""Loads into tables named through a real Hive metastore, run in a process of its own: the metastore's
Derby database takes one JVM at a time, and the test session of a pytest process has no Hive support.

    python tests/catalog_job.py SCENARIO ROOT WRITER

ROOT holds the warehouse and the Derby folder; DELTA_SPARK_JARS gives Delta's jars (none: a session
without them). Prints one JSON object of what the scenario observed; tests/spark/test_catalog_tables.py
asserts on it.
"""

from __future__ import annotations

import json
import os
import sys
import threading

# The repository, not this folder, on the path: tests/airflow would shadow Airflow's own package.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
sys.path.insert(0, os.path.dirname(_HERE))


def hive_session(root: str):
    from airflow_provider_deltamerge.model.delta_jars import delta_jars_from_env
    from airflow_provider_deltamerge.spark.session import default_session
    from tests.hive_metastore import hive_conf

    return default_session("local[2]", hive_conf(root), delta_jars=delta_jars_from_env())


def error_of(call) -> dict | None:
    try:
        call()
    except Exception as error:  # what the scenario reports: its type and message
        return {"type": type(error).__name__, "message": str(error)}
    return None


def rows(spark, name: str) -> list[dict]:
    return sorted(
        (
            {k: v for k, v in r.asDict().items() if not k.startswith("_dlt")}
            for r in spark.table(name).collect()
        ),
        key=lambda r: r["id"],
    )


def tables(spark, schema: str) -> list[str]:
    return sorted(r.tableName for r in spark.sql(f"SHOW TABLES IN {schema}").collect())


def entry(spark, name: str) -> dict:
    """The catalog's entry of a table: its provider, type and location."""
    return {
        r[0]: r[1]
        for r in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()
        if r[0] in ("Provider", "Type", "Location")
    }


def load(spark, writer: str, data, **arguments):
    from airflow_provider_deltamerge import run_load

    return run_load(data, spark=spark, backend=writer, **arguments).metrics


def scenario_dispositions(spark, root: str, writer: str) -> dict:
    """A new table created and registered, then loaded with each disposition; read back with SQL."""
    seen: dict = {}
    first = [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
    load(spark, writer, first, table_name="sales.Orders", create_schema=True)
    seen["tables"] = tables(spark, "sales")
    seen["after_append"] = rows(spark, "sales.orders")
    seen["entry"] = entry(spark, "sales.orders")
    update = [{"id": 2, "v": "B", "extra": 7}, {"id": 3, "v": "c", "extra": 8}]
    load(spark, writer, update, table_name="sales.orders", write_disposition="merge", primary_key="id")
    seen["after_merge"] = rows(spark, "sales.orders")
    load(
        spark,
        writer,
        [{"id": 9, "v": "z", "extra": 0}],
        table_name="sales.orders",
        write_disposition="replace",
    )
    seen["after_replace"] = rows(spark, "sales.orders")
    seen["loads"] = spark.table("sales._dlt_loads").count()
    seen["children"] = None
    load(spark, writer, [{"id": 1, "items": [{"sku": "x"}, {"sku": "y"}]}], table_name="sales.baskets")
    seen["tables_with_child"] = tables(spark, "sales")
    seen["child_rows"] = spark.table("sales.baskets__items").count()
    return seen


def scenario_read_again(spark, root: str, writer: str) -> dict:
    """A second process: the registrations survived, and a load by name finds the table; then the hook
    (as operators run it, in process) loads a source into it by name, without a dataset."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from airflow_provider_deltamerge.hooks import DeltaMergeHook
    from airflow_provider_deltamerge.model.request import LoadRequest

    load(spark, writer, [{"id": 10, "v": "y", "extra": 1}], table_name="sales.orders")
    before = rows(spark, "sales.orders")
    os.makedirs(f"{root}/landing")
    pq.write_table(
        pa.table({"id": [10, 11], "v": ["Y", "w"], "extra": [2, 3]}), f"{root}/landing/part.parquet"
    )
    request = LoadRequest.create(
        source={"format": "parquet", "path": f"{root}/landing"},
        table_name="sales.orders",
        write_disposition="merge",
        primary_key="id",
        backend=writer,
    )
    metrics = DeltaMergeHook(None).run(request)
    return {
        "tables": tables(spark, "sales"),
        "rows": before,
        "after_hook": rows(spark, "sales.orders"),
        "hook_metrics": metrics,
    }


def scenario_edges(spark, root: str, writer: str) -> dict:
    """The CLI, maintenance and a recreated table, by the table's catalog name."""
    import contextlib
    import io

    from airflow_provider_deltamerge import maintain_table
    from airflow_provider_deltamerge.cli.main import main

    for day in (1, 2):
        load(
            spark,
            writer,
            [{"id": day, "n": day}],
            table_name="sales.orders",
            create_schema=True,
            incremental={"cursor_path": "n", "initial_value": 0},
        )
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["loads", "sales.orders", "--json"])
    maintained = maintain_table(None, "sales.orders", spark=spark, backend=writer)
    spark.sql("DROP TABLE sales.orders")
    import shutil

    shutil.rmtree(f"{root}/warehouse/sales.db/orders")
    spark.sql("CREATE TABLE sales.orders (id BIGINT, n BIGINT) USING delta")
    spark.sql("INSERT INTO sales.orders VALUES (7, 7), (8, 8)")  # versions 0 and 1, as the old table's

    def incremental_load():
        cursor = {"cursor_path": "n", "initial_value": 0}
        return load(spark, writer, [{"id": 1, "n": 1}], table_name="sales.orders", incremental=cursor)

    recreated = error_of(incremental_load)
    version_after_refusal = spark.sql("DESCRIBE HISTORY sales.orders").count() - 1
    ours = "table_name = 'orders'"  # the way on the refusal names
    spark.sql(f"DELETE FROM sales._dlt_pipeline_state WHERE pipeline_name = 'deltamerge' AND {ours}")
    spark.sql(f"DELETE FROM sales._dlt_loads WHERE schema_name = 'deltamerge' AND {ours}")
    started_again = incremental_load()["rows_staged"]  # from initial_value, as the refusal says
    events = [{"id": 1, "seq": 1, "op": "u"}, {"id": 2, "seq": 2, "op": "d"}]
    load(
        spark,
        writer,
        events,
        table_name="sales.customers",
        write_disposition={"disposition": "merge", "strategy": "upsert"},
        primary_key="id",
        sequence_by="seq",
        apply_as_deletes="op = 'd'",
    )
    return {
        "cdc_tables": tables(spark, "sales"),
        "tombstones": spark.table("sales._dlt_tombstones_customers").count(),
        "cli_code": code,
        "cli": json.loads(printed.getvalue()),
        "maintained": maintained,
        "recreated": recreated,
        "version_after_refusal": version_after_refusal,
        "started_again": started_again,
        "rows_after": rows(spark, "sales.orders"),
    }


def scenario_without_jars(spark, root: str, writer: str) -> dict:
    """A session without Delta's jars: delta-rs loads a table the catalog holds, by name."""
    from deltalake import DeltaTable

    info = load(spark, writer, [{"id": 12, "v": "q", "extra": 5}], table_name="sales.orders")
    table = DeltaTable(info["table_location"]).to_pyarrow_table(columns=["id"]).column("id").to_pylist()
    return {"ids": sorted(table), "location": info["table_location"], "tables": tables(spark, "sales")}


def scenario_refusals(spark, root: str, writer: str) -> dict:
    """A view, a Parquet table, a Hive-format table, a missing schema, four parts: refused, nothing
    written; a new table where the session has no Delta catalog to register it: refused up front."""
    spark.sql("CREATE DATABASE IF NOT EXISTS crm")
    spark.sql("CREATE VIEW IF NOT EXISTS crm.v AS SELECT 1 AS id")
    spark.sql("CREATE TABLE IF NOT EXISTS crm.pq (id INT) USING parquet")
    spark.sql("CREATE TABLE IF NOT EXISTS crm.hv (id INT) STORED AS PARQUET")
    data = [{"id": 1}]
    seen = {
        name: error_of(lambda name=name: load(spark, writer, data, table_name=name))
        for name in ("crm.v", "crm.pq", "crm.hv", "nowhere.orders", "a.b.c.d")
    }
    seen["tables"] = tables(spark, "crm")
    seen["crm_folder"] = sorted(os.listdir(f"{root}/warehouse/crm.db"))
    spark.sql("CREATE DATABASE IF NOT EXISTS sales")
    seen["no_delta_catalog"] = error_of(lambda: load(spark, writer, data, table_name="sales.orders"))
    seen["sales_folder"] = sorted(os.listdir(f"{root}/warehouse/sales.db"))
    return seen


def scenario_concurrent(spark, root: str, writer: str) -> dict:
    """Two loads creating one table at once: both land, one entry."""
    errors: list = []

    def one(i: int) -> None:
        error = error_of(
            lambda: load(spark, writer, [{"id": i}], table_name="sales.orders", create_schema=True)
        )
        errors.append(error)

    threads = [threading.Thread(target=one, args=(i,)) for i in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"errors": errors, "tables": tables(spark, "sales"), "rows": rows(spark, "sales.orders")}


def scenario_registration_lost(spark, root: str, writer: str) -> dict:
    """A load whose registration failed after its commit: the next load registers the table."""
    from airflow_provider_deltamerge.spark import catalog

    real = catalog.SparkCatalog.register

    def refused(self, schema, name, location):
        raise RuntimeError("metastore unreachable")

    catalog.SparkCatalog.register = refused
    failed = error_of(lambda: load(spark, writer, [{"id": 1}], table_name="sales.orders", create_schema=True))
    catalog.SparkCatalog.register = real
    before = tables(spark, "sales")
    load(spark, writer, [{"id": 2}], table_name="sales.orders")
    return {
        "failed": failed,
        "before": before,
        "after": tables(spark, "sales"),
        "rows": rows(spark, "sales.orders"),
    }


def scenario_read_back(spark, root: str, writer: str) -> dict:
    """What loads made elsewhere (spark-submit jobs) left in the metastore, read with SQL: the schema's
    tables, the table's entry and rows, the loads recorded."""
    return {
        "tables": tables(spark, "sales"),
        "entry": entry(spark, "sales.orders"),
        "rows": rows(spark, "sales.orders"),
        "loads": spark.table("sales._dlt_loads").count(),
    }


KILLED_RUN = {"dag_id": "sales", "task_id": "load_orders", "run_id": "manual__1", "run_type": "manual"}


def load_killed_orders(spark, writer: str, try_number: int) -> dict:
    """The load a killed task runs, and its retry: one run, so one load id; an append, which applied
    twice would hold its rows twice."""
    rows_in = [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
    run = {**KILLED_RUN, "try_number": try_number}
    return load(spark, writer, rows_in, table_name="sales.orders", create_schema=True, run_context=run)


def scenario_killed(spark, root: str, writer: str) -> dict:
    """The load, its process ended abruptly at the step DELTAMERGE_FAIL_AT names (as a killed task's)."""
    from tests.faults import install

    install()
    load_killed_orders(spark, writer, try_number=1)
    return {"survived": True}  # the kill did not happen: the test fails on this


def scenario_retried(spark, root: str, writer: str) -> dict:
    """The killed load's retry: what the kill left, and what the retry leaves."""
    from deltalake import DeltaTable

    from airflow_provider_deltamerge.delta import store

    folder = f"{root}/warehouse/sales.db"
    left = {"tables": tables(spark, "sales"), "loads": len(store.read_loads(folder))}
    left["version"] = DeltaTable(f"{folder}/orders").version()
    info = load_killed_orders(spark, writer, try_number=2)
    recorded = store.read_loads(folder)
    return {
        "left": left,
        "load_id": info["load_id"],
        "committed_by": store.read_commits(f"{folder}/orders", 1)[0].load_id,
        "version": DeltaTable(f"{folder}/orders").version(),
        "tables": tables(spark, "sales"),
        "rows": rows(spark, "sales.orders"),
        "loads": [(r["load_id"], r["try_number"]) for r in recorded],
    }


if __name__ == "__main__":
    name, root, writer = sys.argv[1:4]
    session = hive_session(root)
    result = globals()[f"scenario_{name}"](session, root, writer)
    print("RESULT " + json.dumps(result, default=str), flush=True)
    session.stop()
    os._exit(0)
