"""Operators without Spark: errors at DAG parse, templating, Airflow context -> LoadRequest, the
schedule period of zero-width runs, and the dag_run.conf safety rules."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest
from airflow.sdk import (
    DAG,
    Asset,
    AssetAlias,
    CronDataIntervalTimetable,
    CronTriggerTimetable,
    DeltaTriggerTimetable,
    MultipleCronTriggerTimetable,
)
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_deltamerge.errors import ConfigError
from airflow_provider_deltamerge.operators import DeltaBackfillOperator, DeltaMergeOperator, DeltaScd2Operator
from airflow_provider_deltamerge.operators.backfill import backfill_range
from airflow_provider_deltamerge.operators.context import (
    openlineage_spark_conf,
    schedule_period_start,
    split_conf,
)

UTC = timezone.utc
BASE = {
    "source": {"format": "parquet", "path": "/landing/flights"},
    "dataset": "/lake/demo",
    "table_name": "flights",
}


def merge_op(**overrides):
    return DeltaMergeOperator(task_id="load", **{**BASE, **overrides})


def context(conf=None, start=None, end=None, run_type="scheduled", try_number=1, map_index=-1):
    ti = SimpleNamespace(dag_id="d", task_id="load", run_id="r1", try_number=try_number, map_index=map_index)
    dag_run = SimpleNamespace(run_type=SimpleNamespace(value=run_type), conf=conf or {})
    return {
        "ti": ti,
        "dag_run": dag_run,
        "data_interval_start": start,
        "data_interval_end": end,
        "logical_date": end,
        "params": {},
    }


@pytest.mark.parametrize(
    ("overrides", "argument"),
    [
        ({"write_disposition": "upsert"}, "write_disposition"),
        ({"write_disposition": {"disposition": "merge", "strategy": "sdc2"}}, "write_disposition.strategy"),
        ({"dataset": "lake/relative"}, "dataset"),
        ({"source": {"format": "parquet", "paht": "/x"}}, "source"),
        ({"source": {"callable": "not a callable"}}, "source.callable"),
        ({"columns": {"deleted": {"hard_delete": "yes"}}}, "columns['deleted'].hard_delete"),
        ({"conf_overridable": ["source"]}, "conf_overridable"),
        ({"submit_options": {"application": "x.py"}}, "submit_options"),
        ({"window": ["2024-01-01"]}, "window"),
        ({"window": ["2024-01-01", "2024-01-02"]}, "window"),
        ({"incremental": {"cursor_path": "t", "range_start": "half"}}, "range_start"),
        ({"backend": "duckdb"}, "backend"),
        ({"primary_key": ["id", "id"]}, "primary_key"),
        ({"table_properties": {"delta.appendOnly": "maybe"}}, "table_properties"),
        ({"table_properties": {"delta.enableDeletionVectors": True}}, "table_properties"),
        ({"max_table_nesting": -1}, "max_table_nesting"),
        ({"max_table_nesting": "2"}, "max_table_nesting"),
        ({"root_key": "yes"}, "root_key"),
    ],
)
def test_bad_arguments_fail_at_parse_naming_the_argument(overrides, argument):
    with pytest.raises(ConfigError) as error:
        merge_op(**overrides)
    assert error.value.argument == argument


def test_scd2_and_backfill_operators_check_their_own_arguments():
    with pytest.raises(ConfigError, match="write_disposition"):
        DeltaScd2Operator(task_id="dim", write_disposition="merge", **BASE)
    with pytest.raises(ConfigError, match="validity_column_names"):
        DeltaScd2Operator(task_id="dim", validity_column_names=["a", "a"], **BASE)
    with pytest.raises(ConfigError, match="incremental"):
        DeltaBackfillOperator(task_id="bf", start="2024-01-01", end="2024-02-01", **BASE)
    incremental = {"cursor_path": "time_hour"}
    with pytest.raises(ConfigError, match="every"):
        DeltaBackfillOperator(task_id="bf", every="fortnightly", incremental=incremental, **BASE)
    with pytest.raises(ConfigError, match="end"):
        DeltaBackfillOperator(
            task_id="bf", start="2024-02-01", end="2024-01-01", incremental=incremental, **BASE
        )


def test_a_change_feed_source_needs_no_incremental_for_windows_and_backfills():
    feed = {**BASE, "source": {"delta_changes": "/lake/bronze/flights"}}
    backfill = DeltaBackfillOperator(task_id="bf", start="2024-01-01", end="2024-02-01", **feed)
    assert backfill.incremental is None  # the request takes the upstream's commit version as cursor
    merge = DeltaMergeOperator(task_id="load", window={"start": "2024-01-01", "end": "2024-01-08"}, **feed)
    assert merge.window is not None
    with pytest.raises(ConfigError, match="set incremental too"):
        merge_op(window={"start": "2024-01-01", "end": "2024-01-08"})


def test_scd2_options_become_the_write_disposition():
    op = DeltaScd2Operator(
        task_id="dim", validity_column_names=["valid_from", "valid_to"], boundary_column="updated_at", **BASE
    )
    assert op.write_disposition == {
        "disposition": "merge",
        "strategy": "scd2",
        "validity_column_names": ["valid_from", "valid_to"],
        "boundary_column": "updated_at",
    }


def test_the_scd2_operator_takes_a_change_feed_and_refuses_what_bounds_versions_otherwise():
    op = DeltaScd2Operator(
        task_id="dim", merge_key="id", sequence_by="lsn", except_column_list=["op"], **BASE
    )
    request = op.build_request(context())
    assert (request.disposition.strategy, request.hints.merge_key) == ("scd2", ("id",))
    assert (request.hints.sequence_by, request.hints.except_column_list) == (("lsn",), ("op",))
    feed = DeltaScd2Operator(task_id="dim", merge_key="id", sequence_by="lsn", boundary_column="at", **BASE)
    with pytest.raises(AirflowFailException, match="boundary_column: cannot be combined with sequence_by"):
        feed.build_request(context())


def test_the_scd2_operator_takes_the_tracked_columns_of_a_change_feed():
    op = DeltaScd2Operator(
        task_id="dim", merge_key="id", sequence_by="lsn", track_history_except_column_list=["note"], **BASE
    )
    assert op.build_request(context()).hints.track_history_except_column_list == ("note",)
    both = DeltaScd2Operator(
        task_id="dim",
        merge_key="id",
        sequence_by="lsn",
        track_history_column_list=["name"],
        track_history_except_column_list=["note"],
        **BASE,
    )
    with pytest.raises(AirflowFailException, match="track_history_except_column_list: give"):
        both.build_request(context())


def test_target_is_declared_as_outlet_asset():
    op = merge_op(table_name="FlightLegs")
    assert op.outlets == [Asset(uri="file:///lake/demo/flight_legs")]
    assert merge_op(dataset="s3://bucket/lake").outlets == [Asset(uri="s3://bucket/lake/flights")]
    templated = merge_op(dataset="{{ var.value.lake }}").outlets
    assert templated == [AssetAlias(name="deltamerge:{{ var.value.lake }}/flights")]


def test_templated_arguments_are_rendered_then_validated():
    op = merge_op(
        source={"format": "parquet", "path": "/landing/{{ ds }}"},
        write_disposition="{{ params.disposition }}",
    )
    ctx = {
        **context(start=datetime(2024, 1, 1, tzinfo=UTC), end=datetime(2024, 1, 8, tzinfo=UTC)),
        "ds": "2024-01-08",
        "params": {"disposition": "upsert"},
    }
    op.render_template_fields(ctx)
    assert op.source["path"] == "/landing/2024-01-08"
    with pytest.raises(AirflowFailException, match="load: write_disposition: 'upsert' is not valid"):
        op.build_request(ctx)


def test_request_carries_interval_run_and_conf_window():
    op = merge_op(write_disposition="merge", primary_key="id", conf_overridable=["write_disposition"])
    start, end = datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 8, tzinfo=UTC)
    conf = {"start": "2024-01-03T00:00:00Z", "write_disposition": "append", "notify": "ops"}
    request = op.build_request(context(conf=conf, start=start, end=end, run_type="manual", try_number=2))
    assert request.data_interval == (start.isoformat(), end.isoformat())
    assert request.write_disposition == {"disposition": "append"}
    assert request.run_context == {
        "dag_id": "d",
        "task_id": "load",
        "run_id": "r1",
        "try_number": 2,
        "map_index": None,
        "run_type": "manual",
        "logical_date": end.isoformat(),
        "period_start": None,
        "conf": {"start": "2024-01-03T00:00:00Z"},
        "window": {},
    }


def test_max_table_nesting_reaches_the_request_of_every_operator():
    assert merge_op().build_request(context()).max_table_nesting is None
    assert merge_op(max_table_nesting=2).build_request(context()).max_table_nesting == 2
    assert merge_op(root_key=True).build_request(context()).root_key is True
    scd2 = DeltaScd2Operator(task_id="dim", max_table_nesting=0, **BASE)
    assert scd2.build_request(context()).max_table_nesting == 0
    backfill = DeltaBackfillOperator(
        task_id="bf",
        start="2024-01-01",
        end="2024-01-15",
        incremental={"cursor_path": "t"},
        **BASE,
        max_table_nesting=1,
    )
    assert backfill.max_table_nesting == 1
    with pytest.raises(AirflowFailException, match="max_table_nesting"):
        merge_op().build_request(context(conf={"max_table_nesting": 0}))


def test_explicit_window_wins_over_conf_window():
    op = merge_op(window=("2024-02-01", datetime(2024, 2, 8, tzinfo=UTC)), incremental={"cursor_path": "t"})
    request = op.build_request(context(conf={"start": "2023-01-01"}))
    assert request.run_context["window"] == {"start": "2024-02-01", "end": "2024-02-08T00:00:00+00:00"}
    assert request.run_context["conf"] == {"start": "2023-01-01"}


@pytest.mark.parametrize(
    "key", ["source", "dataset", "table_name", "callable", "sql", "pipeline_name", "conn_id"]
)
def test_conf_can_never_name_code_or_target(key):
    op = merge_op(conf_overridable=list(("write_disposition", "primary_key")))
    with pytest.raises(AirflowFailException, match=rf"dag_run.conf\['{key}'\]: this task does not let"):
        op.build_request(context(conf={key: "elsewhere"}))


def test_conf_override_not_listed_is_refused_with_a_hint():
    with pytest.raises(ConfigError, match="conf_overridable"):
        split_conf({"write_disposition": "replace"}, overridable=())
    assert split_conf({"start": "2024-01-01", "end": None, "other_task_option": 1}, ()) == (
        {"start": "2024-01-01"},
        {},
    )


def test_conf_window_bound_must_be_a_timestamp():
    with pytest.raises(ConfigError, match=r"dag_run.conf\['start'\]"):
        split_conf({"start": {"$gt": 1}}, ())


WEEK_END = datetime(2024, 1, 14, tzinfo=UTC)  # a Sunday, midnight UTC


BERLIN_SUNDAY = datetime(2024, 1, 13, 23, tzinfo=UTC)  # Sunday midnight in Berlin


@pytest.mark.parametrize(
    ("timetable", "at", "expected"),
    [
        (CronTriggerTimetable("@weekly", timezone="UTC"), WEEK_END, datetime(2024, 1, 7, tzinfo=UTC)),
        (
            CronTriggerTimetable("0 0 * * 0", timezone="Europe/Berlin"),
            BERLIN_SUNDAY,
            BERLIN_SUNDAY - timedelta(7),
        ),
        (DeltaTriggerTimetable(timedelta(days=7)), WEEK_END, datetime(2024, 1, 7, tzinfo=UTC)),
        (CronDataIntervalTimetable("@daily", timezone="UTC"), WEEK_END, datetime(2024, 1, 13, tzinfo=UTC)),
        (
            MultipleCronTriggerTimetable("0 0 * * 0", "0 0 * * 3", timezone="UTC"),
            WEEK_END,
            datetime(2024, 1, 10, tzinfo=UTC),
        ),
    ],
)
def test_schedule_period_start_comes_from_the_timetable(timetable, at, expected):
    assert schedule_period_start(timetable, at) == expected


def test_zero_width_run_gets_period_start_real_interval_does_not():
    with DAG("weekly", schedule="@weekly", start_date=datetime(2024, 1, 1, tzinfo=UTC)):
        op = merge_op()
    zero = op.build_request(context(start=WEEK_END, end=WEEK_END, run_type="backfill"))
    assert zero.run_context["period_start"] == "2024-01-07T00:00:00+00:00"
    real = op.build_request(context(start=datetime(2024, 1, 7, tzinfo=UTC), end=WEEK_END))
    assert real.run_context["period_start"] is None


def test_backfill_range_conf_may_only_narrow():
    assert backfill_range(None, None, {"start": "2024-01-01", "end": "2024-02-01"}) == (
        "2024-01-01",
        "2024-02-01",
    )
    assert backfill_range("2024-01-01", "2024-03-01", {"start": "2024-02-01"}) == ("2024-02-01", "2024-03-01")
    with pytest.raises(ConfigError, match=r"dag_run.conf\['end'\].*widens"):
        backfill_range("2024-01-01", "2024-03-01", {"end": "2024-04-01"})
    with pytest.raises(ConfigError, match="needs a start and an end"):
        backfill_range(None, "2024-03-01", {})


def test_backfill_plan_is_chunked_from_conf():
    op = DeltaBackfillOperator(task_id="bf", incremental={"cursor_path": "time_hour"}, every="7 days", **BASE)
    windows = op.plan(context(conf={"start": "2013-01-01", "end": "2013-01-20"}, run_type="manual"))
    assert [(a.day, b.day) for a, b in windows] == [(1, 8), (8, 15), (15, 20)]
    with pytest.raises(AirflowFailException, match="bf: start"):
        op.plan(context(run_type="manual"))


def test_openlineage_spark_properties_reach_the_hook_where_airflow_asks_for_them(monkeypatch):
    """As SparkSubmitOperator does: [openlineage] spark_inject_parent_job_info adds the parent job's
    properties to what the job is submitted with; the DAG's own spark_conf wins on a clash."""
    import airflow.providers.common.compat.openlineage.utils.spark as lineage

    seen = {}

    def inject_parent(properties, context):
        seen["context"] = context
        return {**properties, "spark.openlineage.parentJobName": "d.load", "spark.app.name": "from-lineage"}

    monkeypatch.setattr(lineage, "inject_parent_job_information_into_spark_properties", inject_parent)
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__SPARK_INJECT_PARENT_JOB_INFO", "True")
    op = merge_op(spark_conf={"spark.app.name": "mine"})
    ctx = context()
    op._lineage_conf = openlineage_spark_conf(ctx)
    assert seen["context"] is ctx
    assert op.hook.spark_conf == {"spark.openlineage.parentJobName": "d.load", "spark.app.name": "mine"}
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__SPARK_INJECT_PARENT_JOB_INFO", "False")
    assert openlineage_spark_conf(ctx) == {}


def test_schema_contract_and_column_schema_reach_the_request_and_conf_only_tightens_the_contract():
    columns = [{"name": "price", "data_type": "decimal", "precision": 12, "scale": 2, "nullable": False}]
    op = merge_op(
        columns=columns, schema_contract={"columns": "discard_row"}, conf_overridable=["schema_contract"]
    )
    loosened = op.build_request(context(conf={"schema_contract": "evolve"}))
    assert loosened.schema_contract == {"tables": "evolve", "columns": "discard_row", "data_type": "evolve"}
    assert loosened.columns == {
        "price": {"data_type": "decimal", "precision": 12, "scale": 2, "nullable": False}
    }
    tightened = op.build_request(context(conf={"schema_contract": {"columns": "freeze", "tables": "freeze"}}))
    assert tightened.schema_contract == {"tables": "freeze", "columns": "freeze", "data_type": "evolve"}
    with pytest.raises(ConfigError) as raised:
        merge_op(schema_contract="strict")
    assert raised.value.argument == "schema_contract"


def test_expectations_reach_the_request_and_conf_only_tightens_them():
    task = {"warn": {"has_note": "note IS NOT NULL"}, "drop": {"positive": "amount > 0"}}
    op = merge_op(expectations=task, conf_overridable=["expectations"])
    assert "expectations" in DeltaMergeOperator.template_fields
    assert op.build_request(context()).expectations == task
    looser = {"warn": {"positive": "amount > 0"}, "fail": {"has_id": "id IS NOT NULL"}}
    request = op.build_request(context(conf={"expectations": looser}))
    assert request.expectations == {**task, "fail": {"has_id": "id IS NOT NULL"}}  # drop stays drop
    stricter = op.build_request(
        context(conf={"expectations": {"quarantine": {"has_note": "note IS NOT NULL"}}})
    )
    assert stricter.expectations == {"drop": task["drop"], "quarantine": task["warn"]}
    with pytest.raises(AirflowFailException, match="never change its condition"):
        op.build_request(context(conf={"expectations": {"fail": {"positive": "amount > -1"}}}))
    with pytest.raises(ConfigError) as raised:
        merge_op(expectations={"drop": {"bad": "amount > (SELECT 1)"}})
    assert raised.value.argument == "expectations.drop.bad"


def test_backfill_plan_of_zoned_bounds_is_calendar_days_in_their_zone():
    import pendulum

    op = DeltaBackfillOperator(
        task_id="bf",
        incremental={"cursor_path": "ts"},
        start=pendulum.datetime(2024, 10, 26, tz="Europe/Amsterdam"),
        end=pendulum.datetime(2024, 10, 28, tz="Europe/Amsterdam"),
        every="1 day",
        **BASE,
    )
    windows = op.plan(context(conf={"start": "2024-10-27T00:00:00+02:00"}, run_type="manual"))
    # conf's bound narrows the range; its fixed offset is the zone its days are counted in
    assert windows == [
        (datetime(2024, 10, 26, 22, tzinfo=UTC), datetime(2024, 10, 27, 22, tzinfo=UTC)),
        (datetime(2024, 10, 27, 22, tzinfo=UTC), datetime(2024, 10, 27, 23, tzinfo=UTC)),
    ]
    whole = op.plan(context(run_type="manual"))
    assert [b - a for a, b in whole] == [timedelta(hours=24), timedelta(hours=25)]  # Oct 27 has 25 hours


def test_a_catalog_table_needs_no_dataset_and_is_its_own_asset():
    op = DeltaMergeOperator(task_id="load", source=BASE["source"], table_name="Sales.OrderLines")
    assert op.outlets == [Asset(uri="catalog://spark_catalog/Sales/order_lines")]
    glue = merge_op(table_name="main.sales.orders", catalog="glue")
    assert glue.outlets == [Asset(uri="catalog://glue/sales/orders")]
    request = op.build_request(context())
    assert (request.dataset, request.table, request.target.schema, request.catalog) == (
        None,
        "order_lines",
        "Sales",
        "spark",
    )
    assert merge_op(table_name="sales.orders", create_schema=True).build_request(context()).create_schema


def test_a_malformed_catalog_name_fails_at_parse_and_when_rendered_fails_without_retry():
    from airflow_provider_deltamerge.errors import CatalogError

    with pytest.raises(CatalogError, match="has 4 parts"):
        merge_op(table_name="a.b.c.d")
    op = merge_op(table_name="{{ params.table }}")
    op.render_template_fields({**context(), "params": {"table": "sales."}})
    with pytest.raises(AirflowFailException, match="sales.'.*empty part"):
        op.build_request(context())
    with pytest.raises(ConfigError, match="dataset"):
        DeltaMergeOperator(task_id="load", source=BASE["source"], table_name="orders")


@pytest.mark.parametrize("key", ["catalog", "create_schema"])
def test_conf_can_never_name_the_catalog(key):
    op = merge_op(table_name="sales.orders")
    with pytest.raises(AirflowFailException, match=rf"dag_run.conf\['{key}'\]: this task does not let"):
        op.build_request(context(conf={key: "glue"}))
