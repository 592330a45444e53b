"""Loads of catalog tables by DeltaMergeHook over Spark Connect, in a process of its own (pyspark's
Connect mode is process-wide, as in an Airflow task's process): each request of the JSON list on stdin
run with the `spark_remote` connection (AIRFLOW_CONN_SPARK_REMOTE), then the server's catalog read
through a Connect session of its own.

    python tests/catalog_connect_job.py < requests.json

Prints one line `RESULT <json>`: per request, its metrics or its error, and what the catalog held after
it (the schemas, each schema's tables, and the rows of `sales.orders` read by name where it is listed).
"""

from __future__ import annotations

import json
import os
import sys

# The repository, not this folder, on the path: tests/airflow would shadow Airflow's own package.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
sys.path.insert(0, os.path.dirname(_HERE))

CONN_ID = "spark_remote"


def run(request_json: str) -> dict:
    from airflow_provider_deltamerge.hooks import DeltaMergeHook
    from airflow_provider_deltamerge.model.request import LoadRequest

    try:
        return {"metrics": DeltaMergeHook(CONN_ID).run(LoadRequest.from_json(request_json))}
    except Exception as error:  # what the test asserts on: the project's error, by type and message
        return {"error": {"type": type(error).__name__, "message": str(error)}}


def catalog_seen() -> dict:
    """The server's catalog as a new Connect session sees it."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(SparkConnectHook(conn_id=CONN_ID).get_connection_url()).create()
    try:
        schemas = sorted(r[0] for r in spark.sql("SHOW NAMESPACES").collect())
        tables = {s: sorted(r.tableName for r in spark.sql(f"SHOW TABLES IN {s}").collect()) for s in schemas}
        seen: dict = {"schemas": schemas, "tables": tables}
        if "orders" in tables.get("sales", []):
            rows = spark.table("sales.orders").collect()
            seen["rows"] = sorted(
                ({k: v for k, v in r.asDict().items() if not k.startswith("_dlt")} for r in rows),
                key=lambda r: r["id"],
            )
            described = spark.sql("DESCRIBE TABLE EXTENDED sales.orders").collect()
            seen["entry"] = {r[0]: r[1] for r in described if r[0] in ("Provider", "Location")}
            seen["loads"] = spark.table("sales._dlt_loads").count()
        return seen
    finally:
        spark.stop()


def main() -> None:
    results = [{**run(request), "catalog": catalog_seen()} for request in json.loads(sys.stdin.read())]
    print("RESULT " + json.dumps(results, default=str))


if __name__ == "__main__":
    main()
