"""The `deltamerge` command, run as a user runs it (a subprocess), against datasets the tests load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from importlib import metadata
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_deltamerge import Incremental, run_load
from tests.faults import InjectedFault
from tests.helpers import ordered, read_rows

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("jvm_class_archive")]

T0 = datetime(2024, 3, 1, tzinfo=timezone.utc)
EVENTS = [{"id": i, "ts": T0 + timedelta(hours=6 * i), "v": f"v{i}"} for i in range(8)]
CLI = [sys.executable, "-m", "airflow_provider_deltamerge.cli"]


def deltamerge(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env)


def as_json(*args: str):
    done = deltamerge(*args, "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def shop(spark, tmp_path_factory):
    """A dataset with two loads of `events`, one of `products`, a load of `events` that stopped after its
    commit (unrecorded), a commit to `events` by another writer, and a partitioned table of no load."""
    dataset = str(tmp_path_factory.mktemp("cli") / "shop")

    def load(rows, table_name="events", **arguments):
        return run_load(
            rows, spark=spark, dataset=dataset, table_name=table_name, pipeline_name="shop", **arguments
        )

    merge = {"write_disposition": "merge", "primary_key": "id", "incremental": Incremental("ts")}
    loads = [
        load(EVENTS[:4], **merge),
        load(EVENTS[2:6], **merge),
        load([{"sku": "a", "price": 1.5}], "Products"),
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DELTAMERGE_FAIL_AT", "after_commit")
        with pytest.raises(InjectedFault):
            load(EVENTS[6:], **merge)
    events = f"{dataset}/events"
    write_deltalake(events, DeltaTable(events).to_pyarrow_table().slice(0, 1), mode="append")
    write_deltalake(
        f"{dataset}/regions", pa.table({"region": ["eu", "us"], "n": [1, 2]}), partition_by=["region"]
    )
    return dataset, loads


def test_help_lists_the_commands_and_imports_nothing_heavy():
    code = (
        "import sys\n"
        "from airflow_provider_deltamerge.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print([m for m in ('pyspark', 'deltalake', 'airflow', 'rich') if m in sys.modules], file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stderr.strip() == "[]"
    for command in ("loads", "state", "history", "tables", "load"):
        assert command in done.stdout


def test_loads_newest_first_filtered_by_table_and_limited(shop):
    dataset, (first, second, products) = shop
    records = as_json("loads", dataset)
    assert [r["load_id"] for r in records] == [products.load_id, second.load_id, first.load_id]
    newest = records[1]
    assert (newest["table"], newest["pipeline"], newest["status"]) == ("events", "shop", 0)
    assert (newest["table_version"], newest["metrics"]) == (second.table_version, second.metrics)
    assert (newest["window_start"], newest["window_end"]) == (second.window["start"], second.window["end"])
    assert [r["load_id"] for r in as_json("loads", dataset, "--table", "events", "--last", "1")] == [
        second.load_id
    ]
    shown = deltamerge("loads", dataset)
    assert shown.returncode == 0
    for info in (first, second, products):
        assert info.load_id in shown.stdout
    assert shown.stdout.count("completed") == 3


def test_state_gives_each_tables_cursor_boundary_rows_and_last_load(shop):
    dataset, (_, second, products) = shop
    entries = {e["table"]: e for e in as_json("state", dataset)}
    events = entries["events"]
    assert (events["pipeline"], events["cursor"], events["last_load_id"]) == ("shop", "ts", second.load_id)
    assert events["last_value"] == EVENTS[5]["ts"].isoformat()
    assert events["boundary_rows"] == 1  # one row holds the newest cursor value
    assert (entries["products"]["cursor"], entries["products"]["last_load_id"]) == (None, products.load_id)
    assert "(no cursor)" in deltamerge("state", dataset).stdout


def test_history_marks_the_commits_that_no_load_record_records(shop):
    dataset, (first, second, _) = shop
    commits = as_json("history", dataset, "events")
    assert [c["version"] for c in commits] == [3, 2, 1, 0]
    other_writer, unrecorded, *loads = commits
    assert (other_writer["load_id"], other_writer["recorded"]) == (None, False)
    assert unrecorded["load_id"] not in (None, first.load_id, second.load_id)
    assert unrecorded["recorded"] is False
    assert [(c["load_id"], c["recorded"]) for c in loads] == [(second.load_id, True), (first.load_id, True)]
    assert all(datetime.fromisoformat(c["timestamp"]).year >= 2024 for c in commits)
    shown = deltamerge("history", dataset, "events").stdout
    assert "NO: not in _dlt_loads" in shown and "no: not a load" in shown and unrecorded["load_id"] in shown
    assert [c["version"] for c in as_json("history", dataset, "events", "--last", "2")] == [3, 2]


def test_tables_report_rows_schema_partitioning_size_and_files(shop):
    dataset, _ = shop
    tables = {t["table"]: t for t in as_json("tables", dataset)}
    assert list(tables) == ["events", "products", "regions", "_dlt_loads", "_dlt_pipeline_state"]
    for name, described in tables.items():
        table = DeltaTable(f"{dataset}/{name}")
        files = table.file_uris()
        assert described["version"] == table.version()
        assert described["rows"] == table.to_pyarrow_table().num_rows
        assert (described["files"], described["size_bytes"]) == (len(files), sum(map(os.path.getsize, files)))
        assert described["system"] == name.startswith("_dlt")
    assert [(c["name"], c["type"], c["nullable"]) for c in tables["events"]["columns"]] == [
        ("id", "long", True),
        ("ts", "timestamp", True),
        ("v", "string", True),
        ("_dlt_load_id", "string", True),
        ("_dlt_id", "string", True),
    ]
    assert tables["regions"]["partition_columns"] == ["region"]
    assert [c["name"] for c in tables["regions"]["columns"] if c["partition"]] == ["region"]
    shown = deltamerge("tables", dataset).stdout
    assert "events: schema" in shown and "regions: schema" in shown and "timestamp" in shown


def test_a_location_that_is_no_dataset_is_refused_with_what_it_is(shop, tmp_path):
    dataset, _ = shop
    cases = [
        (("loads", str(tmp_path / "missing")), "does not exist"),
        (
            ("state", f"{dataset}/events"),
            f"is a Delta table, not a dataset; its dataset is the folder that holds it and _dlt_loads, "
            f"e.g. {dataset}",
        ),
        (("tables", str(tmp_path)), "is not a deltamerge dataset: it has no _dlt_loads"),
        (("history", dataset, "orders"), "there is no Delta table 'orders'"),
        (("loads", dataset, "--table", "orders"), "its tables: events, products, regions"),
    ]
    for args, message in cases:
        done = deltamerge(*args)
        assert done.returncode == 1, args
        assert done.stderr.startswith(f"deltamerge {args[0]}: error: ") and message in done.stderr, (
            done.stderr
        )
        assert done.stdout == ""


def test_a_relative_dataset_path_is_read_from_the_working_directory(shop):
    dataset, (first, second, products) = shop
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [*CLI, "loads", Path(dataset).name, "--json"],
        cwd=Path(dataset).parent,
        capture_output=True,
        text=True,
        env=env,
    )
    assert [r["load_id"] for r in json.loads(done.stdout)] == [
        products.load_id,
        second.load_id,
        first.load_id,
    ]


@pytest.mark.parametrize(
    "args",
    [("loads",), ("loads", "/lake", "--last", "-1"), ("tables", "/lake", "--storage-option", "x"), ("drop",)],
)
def test_usage_errors_exit_with_2(args):
    done = deltamerge(*args)
    assert done.returncode == 2 and "usage: deltamerge" in done.stderr


def test_storage_options_reach_the_object_store_and_secrets_stay_out_of_errors():
    options = {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",  # nothing listens: refused at once, nothing leaves the host
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "secret-that-must-not-show",
        "max_retries": "0",
    }
    args = [arg for key, value in options.items() for arg in ("--storage-option", f"{key}={value}")]
    done = deltamerge("loads", "s3://shop/lake", *args)
    assert done.returncode == 1
    assert "127.0.0.1:9/shop/lake/_dlt_loads" in done.stderr  # the endpoint option was used
    assert "secret-that-must-not-show" not in done.stderr + done.stdout


SECRET = "s3cr3t-that-must-not-show"


@pytest.mark.parametrize(
    "args",
    [
        ("loads", "/lake", "--storage-option", f"AWS_SECRET_ACCESS_KEY:{SECRET}"),
        ("loads", "/lake", f"--storage-option=AWS_SECRET_ACCESS_KEY:{SECRET}"),
        ("tables", "/lake", f"AWS_SECRET_ACCESS_KEY={SECRET}"),
        ("state", "/lake", "--last", "2", "AWS_SECRET_ACCESS_KEY", SECRET),
        ("history", "/lake", "t", "extra", f"s3://user:{SECRET}@host/lake"),
        ("load", "/lake", "t", "--option", f"password:{SECRET}"),
        ("load", "/lake", "t", "--spark-conf", f"spark.hadoop.fs.s3a.secret.key:{SECRET}"),
        ("load", "/lake", "t", "--source", '{"format": "jdbc", "options": {"password": "' + SECRET + '"'),
        ("load", "/lake", "t", "--columns", '{"password": "' + SECRET),
        ("load", "/lake", "t", "--max-table-nesting", f"AWS_SECRET_ACCESS_KEY={SECRET}"),
    ],
)
def test_usage_errors_never_show_a_secret(args):
    done = deltamerge(*args, timeout=30)
    assert done.returncode == 2 and "usage: deltamerge" in done.stderr, done.stderr
    assert SECRET not in done.stderr + done.stdout, done.stderr


def test_errors_of_a_command_never_show_a_secret_of_its_command_line(tmp_path):
    missing = tmp_path / "missing"
    done = deltamerge("loads", f"file://user:{SECRET}@{missing}")
    assert done.returncode == 1 and "deltamerge loads: error:" in done.stderr, done.stderr
    assert SECRET not in done.stderr + done.stdout, done.stderr


def test_any_failure_of_a_command_is_shown_without_the_secrets_of_its_command_line(monkeypatch, capsys):
    from airflow_provider_deltamerge.cli import commands
    from airflow_provider_deltamerge.cli.main import main

    def fails(args):
        raise RuntimeError(f"the store said: bad key {SECRET} for {args.dataset}")

    monkeypatch.setitem(commands.COMMANDS, "loads", fails)
    assert main(["loads", "/lake", "--storage-option", f"AWS_SECRET_ACCESS_KEY={SECRET}"]) == 1
    stderr = capsys.readouterr().err
    assert "RuntimeError: the store said: bad key *** for /lake" in stderr and SECRET not in stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("history", "{dataset}", "../outside"), "TABLE: '../outside' is not one folder inside the dataset"),
        (("history", "{dataset}", ".."), "TABLE: '..' is not one folder inside the dataset"),
        (("history", "{dataset}", "{outside}"), "is not one folder inside the dataset"),
        (("history", "{dataset}", "file://{outside}"), "is not one folder inside the dataset"),
        (("history", "{dataset}", "events/../../outside"), "is not one folder inside the dataset"),
        (("loads", "{dataset}", "--table", "../outside"), "--table: '../outside' is not one folder inside"),
        (("history", "{dataset}", "x" * 300), "TABLE: '" + "x" * 300 + "' is 300 bytes long"),
    ],
)
def test_table_arguments_stay_inside_the_dataset(shop, args, message):
    dataset, _ = shop
    outside = Path(dataset).parent / "outside"  # a Delta table beside the dataset
    if not outside.exists():
        write_deltalake(str(outside), pa.table({"id": [1]}))
    args = [a.format(dataset=dataset, outside=outside) for a in args]
    done = deltamerge(*args)
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith(f"deltamerge {args[0]}: error: ") and message in done.stderr, done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "--source: is required"),
        (("--path", "/landing"), "--format: is required with --path"),
        (("--source", "shop.orders", "--format", "parquet"), "--source: give --source, or --format"),
        (("--source", "shop.orders", "--strategy", "upsert", "--write-disposition", "append"), "--strategy"),
        (
            ("--source", "shop.orders", "--window", "2024-01-01", "2024-01-02"),
            "--window: a window selects rows",
        ),
        (("--source", "shop.orders", "--initial-value", "2024-01-01"), "--initial-value"),
        (("--source", "shop.orders", "--naming", "camel"), "naming: 'camel' is not valid"),
        (("--source", "shop.orders", "--expectations", '{"reject": {}}'), "expectations: unknown action"),
        (
            ("--source", "shop.orders", "--table-property", "delta.nope=1"),
            "table_properties: 'delta.nope' is not a Delta table property",
        ),
    ],
)
def test_load_refuses_bad_arguments_before_spark_starts(tmp_path, args, message):
    done = deltamerge("load", str(tmp_path / "lake"), "orders", *args, timeout=30)
    assert done.returncode == 1 and message in done.stderr, done.stderr
    assert not (tmp_path / "lake").exists()


def test_load_from_the_shell_loads_a_window_and_prints_its_metrics(tmp_path):
    landing, dataset = tmp_path / "landing", str(tmp_path / "lake")
    landing.mkdir()
    pq.write_table(pa.Table.from_pylist(EVENTS), landing / "events.parquet")
    common = [
        "--format",
        "parquet",
        "--path",
        str(landing),
        "--write-disposition",
        "merge",
        "--primary-key",
        "id",
    ]
    day_one = ["--incremental", "ts", "--window", "2024-03-01T00:00:00Z", "2024-03-02T00:00:00Z"]
    metrics = as_json("load", dataset, "Events", *common, *day_one, "--pipeline-name", "shell")
    assert (metrics["rows_extracted"], metrics["numTargetRowsInserted"]) == (4, 4)
    assert (metrics["window_start"], metrics["window_end"]) == (
        "2024-03-01T00:00:00+00:00",
        "2024-03-02T00:00:00+00:00",
    )
    assert read_rows(f"{dataset}/events") == ordered(EVENTS[:4])
    [record] = as_json("loads", dataset)
    assert (record["load_id"], record["metrics"], record["pipeline"]) == (
        metrics["load_id"],
        metrics,
        "shell",
    )

    day_two = ["--incremental", "ts", "--window", "2024-03-02T00:00:00Z", "2024-03-03T00:00:00Z"]
    shown = deltamerge("load", dataset, "Events", *common, *day_two, "--pipeline-name", "shell", timeout=300)
    assert shown.returncode == 0, shown.stderr[-3000:]
    newest = as_json("loads", dataset, "--last", "1")[0]
    assert newest["load_id"] in shown.stdout and "load into events" in shown.stdout
    assert "rows in" in shown.stdout and newest["metrics"]["numTargetRowsInserted"] == 4
    assert len(read_rows(f"{dataset}/events")) == len(EVENTS)


def _console_script_installed() -> bool:
    return any(e.name == "deltamerge" for e in metadata.entry_points(group="console_scripts"))


@pytest.mark.skipif(
    not _console_script_installed(), reason="the distribution is not installed (pip install -e .)"
)
def test_the_console_script_runs_the_command(shop):
    dataset, loads = shop
    script = Path(sys.executable).with_name("deltamerge")
    done = subprocess.run(
        [str(script), "loads", dataset, "--json"], capture_output=True, text=True, timeout=60
    )
    assert [r["load_id"] for r in json.loads(done.stdout)] == [i.load_id for i in reversed(loads)]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), {"write_disposition": "append", "primary_key": None, "incremental": None}),
        (("--strategy", "upsert"), {"write_disposition": {"disposition": "merge", "strategy": "upsert"}}),
        (
            ("--write-disposition", '{"disposition": "merge", "strategy": "scd2"}'),
            {"write_disposition": {"disposition": "merge", "strategy": "scd2"}},
        ),
        (("--primary-key", "a, b", "--merge-key", "day"), {"primary_key": ["a", "b"], "merge_key": ["day"]}),
        (
            ("--incremental", "ts", "--initial-value", "2024-01-01"),
            {"incremental": {"cursor_path": "ts", "initial_value": "2024-01-01"}},
        ),
        (
            ("--incremental", '{"cursor_path": "ts", "lag": 3600}'),
            {"incremental": {"cursor_path": "ts", "lag": 3600}},
        ),
        (
            ("--columns", '[{"name": "day", "data_type": "date"}]', "--schema-contract", "freeze"),
            {"columns": [{"name": "day", "data_type": "date"}], "schema_contract": "freeze"},
        ),
        (
            ("--schema-contract", '{"columns": "discard_row"}'),
            {"schema_contract": {"columns": "discard_row"}, "columns": None},
        ),
        (
            ("--incremental", "ts", "--window", "a", "b"),
            {"run_context": {"window": {"start": "a", "end": "b"}}},
        ),
        ((), {"table_properties": None}),
        (
            ("--table-property", "delta.appendOnly=true", "--table-property", "delta.checkpointInterval=5"),
            {"table_properties": {"delta.appendOnly": "true", "delta.checkpointInterval": "5"}},
        ),
        ((), {"max_table_nesting": None, "expectations": None}),
        (
            ("--expectations", '{"drop": {"positive": "amount > 0"}}'),
            {"expectations": {"drop": {"positive": "amount > 0"}}},
        ),
        (("--max-table-nesting", "0"), {"max_table_nesting": 0}),
        (
            ("--strategy", "scd2", "--merge-key", "id", "--sequence-by", "lsn", "--except-column-list", "op"),
            {
                "write_disposition": {"disposition": "merge", "strategy": "scd2"},
                "sequence_by": ["lsn"],
                "except_column_list": ["op"],
            },
        ),
        (
            ("--track-history-column-list", "name,city", "--track-history-except-column-list", "note"),
            {"track_history_column_list": ["name", "city"], "track_history_except_column_list": ["note"]},
        ),
    ],
)
def test_load_options_become_the_requests_arguments(args, expected):
    from airflow_provider_deltamerge.cli.commands import load_arguments
    from airflow_provider_deltamerge.cli.parser import build_parser

    parsed = build_parser().parse_args(
        ["load", "lake", "orders", "--format", "parquet", "--path", "/in", *args]
    )
    arguments = load_arguments(parsed)
    assert arguments["dataset"] == os.path.abspath("lake") and arguments["table_name"] == "orders"
    assert arguments["source"] == {"format": "parquet", "path": "/in", "options": {}}
    assert {key: arguments.get(key) for key in expected} == expected


@pytest.mark.parametrize(
    ("outcome", "code", "stderr"),
    [
        ("return 3", 3, ""),
        ("return None", 0, ""),
        ("sys.exit()", 0, ""),
        ("sys.exit(2)", 2, ""),
        ("sys.exit('no such table')", 1, "no such table"),
        ("raise ValueError('bad value')", 1, "ValueError: bad value"),
    ],
)
def test_the_package_processes_exit_with_the_code_of_their_work(outcome, code, stderr):
    """What the job and the command exit with (submit/process_exit.py), output flushed before the exit."""
    script = (
        "import sys\n"
        "from airflow_provider_deltamerge.submit.process_exit import exit_with\n"
        f"def work():\n    print('done', end='')\n    {outcome}\n"
        "exit_with(work)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (code, "done")
    assert stderr in done.stderr and (stderr or done.stderr == "")


def test_loads_show_the_rows_expectations_set_aside():
    from rich.console import Console

    from airflow_provider_deltamerge.cli.render import render_loads

    console = Console(record=True, width=240)
    checked = {"expectations": {"p": {"action": "drop", "passed": 5, "failed": 1}}}
    metrics = {**checked, "rows_dropped": 1, "rows_quarantined": 2}
    record = {"load_id": "1.5", "table": "orders", "window_start": None, "window_end": None}
    record |= {"table_version": 3, "status": 0, "inserted_at": "now"}
    render_loads(console, [{**record, "metrics": metrics}, {**record, "load_id": "1.4", "metrics": {}}])
    shown = console.export_text()
    assert "set aside" in shown and "1 dropped, 2 quarantined" in shown and shown.count("quarantined") == 1
