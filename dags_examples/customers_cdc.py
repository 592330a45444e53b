"""A Debezium change feed applied as a `customers` table (SCD type 1), once a day, in any order.

Each run reads the events landed for its day (`customers_cdc_landing.py` writes them): Debezium's
envelope (`before`, `after`, `op`, `ts_ms`, `source.lsn`), mapped onto the load's arguments:
- the row is `after`, or `before` for a delete (whose `after` is null);
- `sequence_by="lsn"`, the log position: an event applies only where it is newer than what the table
  holds for its key, so late and repeated deliveries, and runs in any order, give the same table;
- `apply_as_deletes="op = 'd'"`: a delete removes the row, and its key is remembered (a tombstone) so
  a late, older update does not bring it back;
- `except_column_list`: the op code and the event time are not stored.
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime, timezone

from airflow.sdk import DAG

from airflow_provider_deltamerge.operators import DeltaMergeOperator

DEMO_DIR = os.environ.get("DELTAMERGE_DEMO_DIR") or os.path.join(tempfile.gettempdir(), "deltamerge-demo")
CONN_ID = os.environ.get("DELTAMERGE_CONN_ID") or None
ENVELOPE = (
    "STRUCT<before: STRUCT<id: BIGINT, name: STRING, city: STRING>, "
    "after: STRUCT<id: BIGINT, name: STRING, city: STRING>, op: STRING, ts_ms: BIGINT, "
    "source: STRUCT<lsn: BIGINT>>"
)
EVENTS = f"""
SELECT COALESCE(e.after.id, e.before.id) AS id, e.after.name AS name, e.after.city AS city,
       e.op AS op, e.ts_ms AS ts_ms, e.source.lsn AS lsn
FROM (SELECT from_json(value, '{ENVELOPE}') AS e
      FROM text.`{DEMO_DIR}/landing/customers_cdc/{{{{ ds }}}}`)
"""

with DAG(
    dag_id="customers_cdc",
    description="Debezium change events applied to a customers table, exactly once, in any order",
    schedule="@daily",
    start_date=datetime(2024, 3, 1, tzinfo=timezone.utc),
    end_date=datetime(2024, 3, 7, tzinfo=timezone.utc),
    catchup=True,
    max_active_runs=1,
    tags=["deltamerge", "example", "cdc"],
) as dag:
    DeltaMergeOperator(
        task_id="apply_changes",
        source={"sql": EVENTS},
        dataset=f"{DEMO_DIR}/lake/crm",
        table_name="customers",
        write_disposition={"disposition": "merge", "strategy": "upsert"},
        primary_key="id",
        sequence_by="lsn",
        apply_as_deletes="op = 'd'",
        except_column_list=["op", "ts_ms"],
        pipeline_name="crm",
        conn_id=CONN_ID,
    )
