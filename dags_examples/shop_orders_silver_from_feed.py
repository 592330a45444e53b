"""Weekly silver table from a bronze table's change data feed.

The bronze table ``<DELTAMERGE_DEMO_DIR>/lake/shop_bronze/orders`` is loaded by another job (any
writer) with its change data feed on: ``table_properties={"delta.enableChangeDataFeed": True}`` on
its loads. Every Sunday at midnight UTC (``@weekly``) a run reads the changes bronze committed in the
week before it (its versions whose commit timestamp falls in ``[previous Sunday, this Sunday)``) and
upserts them into the silver table by ``order_id``, each key's changes ordered by the bronze version
that made them (``sequence_by="_commit_version"``). With catchup, past weeks are loaded one run per
week, each bronze commit exactly once; a re-run of a week reads the same versions again and changes
nothing.

A key deleted in bronze is deleted in silver (``apply_as_deletes="_change_type = 'delete'"``) and
remembered (a tombstone), so an older change of it loaded later does not bring it back. Silver keeps
``_commit_version`` and ``_commit_timestamp``; the change type is left out (``except_column_list``).

DELTAMERGE_DEMO_DIR sets where the lake is; DELTAMERGE_CONN_ID picks the Spark connection (unset:
Spark inside the task; a ``spark`` connection: spark-submit to a cluster).
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime, timezone

from airflow.sdk import DAG

from airflow_provider_deltamerge.operators import DeltaMergeOperator

DEMO_DIR = os.environ.get("DELTAMERGE_DEMO_DIR") or os.path.join(tempfile.gettempdir(), "deltamerge-demo")
CONN_ID = os.environ.get("DELTAMERGE_CONN_ID") or None

with DAG(
    dag_id="shop_orders_silver_from_feed",
    description="Weekly upsert of a bronze table's change data feed into a silver table",
    schedule="@weekly",
    start_date=datetime(2024, 1, 1, tzinfo=timezone.utc),
    catchup=True,
    max_active_runs=1,
    tags=["deltamerge", "example"],
) as dag:
    DeltaMergeOperator(
        task_id="orders_silver",
        source={"delta_changes": f"{DEMO_DIR}/lake/shop_bronze/orders"},
        dataset=f"{DEMO_DIR}/lake/shop_silver",
        table_name="orders",
        write_disposition={"disposition": "merge", "strategy": "upsert"},
        primary_key="order_id",
        sequence_by="_commit_version",
        apply_as_deletes="_change_type = 'delete'",
        except_column_list=["_change_type"],
        pipeline_name="shop_silver",
        conn_id=CONN_ID,
    )
