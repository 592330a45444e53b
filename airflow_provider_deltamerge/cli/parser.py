"""The command line of `deltamerge`: argparse only, so that ``deltamerge --help`` answers at once.

Usage errors never show a secret: the checks of argument values below never quote the value (a
`KEY=VALUE` option given `KEY:VALUE` may hold a secret key), and argparse's own messages (which quote
unrecognized arguments and invalid values) are redacted by `Parser` with the secrets of the command line.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, NoReturn

from ..model.secrets import command_line_secrets, redact_text

DESCRIPTION = """\
Inspect and load the Delta tables of a deltamerge dataset: its load records, pipeline state, table
histories and schemas, and one-off loads on local Spark. Every command takes --json for scripts.
"""
EPILOG = """\
examples:
  deltamerge tables /lake/shop
  deltamerge loads /lake/shop --table orders --last 5
  deltamerge loads sales.orders
  deltamerge state /lake/shop --json
  deltamerge history /lake/shop orders
  deltamerge load /lake/shop orders --format parquet --path /landing/orders \\
      --write-disposition merge --primary-key order_id
"""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors hide the secrets of the arguments it was given (each
    subcommand's parser is one too, and is given the arguments after the command's name)."""

    arguments: tuple[str, ...] = ()

    def parse_known_args(self, args=None, namespace=None):
        self.arguments = tuple(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        super().error(redact_text(message, command_line_secrets(self.arguments)))


def key_value(text: str) -> tuple[str, str]:
    """A KEY=VALUE argument (the text is not repeated in the error: the value may be a secret)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(
            "expected KEY=VALUE, with '=' between the key and the value (the argument is not shown: it may "
            "hold a secret)"
        )
    return key, value


def positive_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        count = -1
    if count < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return count


def json_or_text(text: str) -> Any:
    """A JSON object, or the text itself (a name, or a string form the load validates)."""
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise argparse.ArgumentTypeError(_not_json(exc)) from None
    return text


def json_value(text: str) -> Any:
    """A JSON value (an object or a list)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(_not_json(exc)) from None


def _not_json(error: json.JSONDecodeError) -> str:
    """Where the JSON is broken, without its text (a source spec may hold a password)."""
    where = f"line {error.lineno} column {error.colno}"
    return f"is not valid JSON: {error.msg} at {where} (the text is not shown: it may hold a secret)"


def key_list(text: str) -> list[str]:
    """Comma-separated column names."""
    return [name.strip() for name in text.split(",") if name.strip()]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="deltamerge",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("--json", action="store_true", help="print JSON instead of tables")
    storage = argparse.ArgumentParser(add_help=False)
    storage.add_argument(
        "--storage-option",
        metavar="KEY=VALUE",
        type=key_value,
        action="append",
        default=[],
        help="an object store option for delta-rs (e.g. AWS_REGION=eu-west-1); repeatable. Secrets are "
        "better left in the environment (AWS_*, AZURE_* variables), which delta-rs reads too",
    )
    reading = argparse.ArgumentParser(add_help=False, parents=[output, storage])
    reading.add_argument(
        "dataset",
        metavar="DATASET",
        help="the dataset: a path, or an s3:// or az:// URI; or a catalog table (sales.orders), read "
        "where the Spark session's catalog keeps it",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    loads = commands.add_parser("loads", parents=[reading], help="the load records, newest first")
    loads.add_argument("--table", help="only the loads of this table")
    loads.add_argument(
        "--last", type=positive_count, default=20, metavar="N", help="the N newest loads (default 20, 0: all)"
    )
    commands.add_parser("state", parents=[reading], help="pipeline state per table: cursor and last load")
    history = commands.add_parser(
        "history", parents=[reading], help="a table's Delta commits and the load id each carries"
    )
    history.add_argument("table", metavar="TABLE", help="the table's name as stored")
    history.add_argument(
        "--last", type=positive_count, default=50, metavar="N", help="the N newest commits (default 50)"
    )
    commands.add_parser(
        "tables", parents=[reading], help="the dataset's tables: rows, schema, partitioning, size, files"
    )
    _add_load(commands.add_parser("load", parents=[output, storage], help="load once on local Spark"))
    archive = commands.add_parser(
        "jvm-archive",
        parents=[output],
        help="make the local session's JVM class archive: each fresh task's session starts seconds sooner",
    )
    archive.description = (
        "Make the class-data-sharing archive a new local Spark session of this Java, these Spark jars and "
        "this conf starts from (in $DELTAMERGE_JVM_ARCHIVE, else ~/.cache/airflow-provider-deltamerge). "
        "Run it once per worker image or machine, and again after upgrading Java or pyspark."
    )
    archive.add_argument(
        "--spark-conf",
        metavar="KEY=VALUE",
        type=key_value,
        action="append",
        default=[],
        help="the tasks' Spark conf where it adds jars (spark.jars, spark.driver.extraClassPath); repeatable",
    )
    return parser


def _add_load(load: argparse.ArgumentParser) -> None:
    load.description = "Load a source into <DATASET>/<TABLE> once, on a local Spark session."
    load.add_argument("dataset", metavar="DATASET", help="the dataset: a path, or an s3:// or az:// URI")
    load.add_argument("table_name", metavar="TABLE", help="the target table")
    source = load.add_argument_group("source (--source, or --format with --path and --option)")
    source.add_argument(
        "--source",
        type=json_or_text,
        help="a source spec as JSON, or 'module:function', a catalog table name, or a SQL query",
    )
    source.add_argument("--format", help="a Spark data source, e.g. parquet, csv, json, delta")
    source.add_argument("--path", help="what the data source reads")
    source.add_argument(
        "--option", metavar="KEY=VALUE", type=key_value, action="append", default=[], help="reader option"
    )
    semantics = load.add_argument_group("how rows are written")
    semantics.add_argument(
        "--write-disposition",
        type=json_or_text,
        metavar="DISPOSITION",
        help="append (default), replace, merge, or a JSON object with a strategy",
    )
    semantics.add_argument("--strategy", help="merge strategy: delete-insert, upsert, insert-only, scd2")
    semantics.add_argument("--primary-key", type=key_list, metavar="COLUMNS", help="comma-separated")
    semantics.add_argument("--merge-key", type=key_list, metavar="COLUMNS", help="comma-separated")
    semantics.add_argument(
        "--sequence-by",
        type=key_list,
        metavar="COLUMNS",
        help="upsert or scd2 of change events: what orders them",
    )
    semantics.add_argument("--column-list", type=key_list, metavar="COLUMNS", help="event columns stored")
    semantics.add_argument(
        "--except-column-list", type=key_list, metavar="COLUMNS", help="event columns not stored"
    )
    semantics.add_argument(
        "--apply-as-deletes",
        metavar="CONDITION",
        help="change events: SQL condition of a delete, e.g. \"op = 'D'\"",
    )
    semantics.add_argument(
        "--apply-as-truncates",
        metavar="CONDITION",
        help="change events: SQL condition of a truncate, e.g. \"op = 'T'\"",
    )
    semantics.add_argument(
        "--ignore-null-updates",
        action="store_true",
        help="upsert of change events: a null in an event keeps the stored value (partial updates)",
    )
    semantics.add_argument(
        "--ignore-null-updates-column-list",
        type=key_list,
        metavar="COLUMNS",
        help="... in these columns only",
    )
    semantics.add_argument(
        "--ignore-null-updates-except-column-list",
        type=key_list,
        metavar="COLUMNS",
        help="... in all non-key columns but these",
    )
    semantics.add_argument(
        "--track-history-column-list",
        type=key_list,
        metavar="COLUMNS",
        help="scd2 of change events: only a change of these columns opens a version",
    )
    semantics.add_argument(
        "--track-history-except-column-list",
        type=key_list,
        metavar="COLUMNS",
        help="... of all stored columns but these",
    )
    semantics.add_argument(
        "--tombstone-retention",
        type=int,
        metavar="SECONDS",
        help="how long a deleted key is remembered (default: 7 days)",
    )
    semantics.add_argument(
        "--columns",
        type=json_value,
        metavar="JSON",
        help='the column schema as JSON, e.g. \'{"amount": {"data_type": "decimal", "scale": 2}}\'',
    )
    semantics.add_argument(
        "--schema-contract",
        type=json_or_text,
        metavar="CONTRACT",
        help="evolve (default), freeze, discard_row, discard_value, or a JSON object over "
        "tables, columns, data_type",
    )
    semantics.add_argument(
        "--expectations",
        type=json_value,
        metavar="JSON",
        help="data quality checks as JSON, {action: {name: condition}}, actions warn, drop, quarantine, "
        'fail, e.g. \'{"drop": {"positive_amount": "amount > 0"}}\'',
    )
    semantics.add_argument(
        "--incremental",
        type=json_or_text,
        metavar="CURSOR",
        help="the cursor column, or an Incremental as JSON",
    )
    semantics.add_argument(
        "--initial-value", metavar="VALUE", help="the cursor's initial value (with --incremental CURSOR)"
    )
    semantics.add_argument(
        "--window", nargs=2, metavar=("START", "END"), help="load exactly [START, END) of the cursor"
    )
    semantics.add_argument(
        "--pipeline-name", metavar="NAME", help="the pipeline in the state tables (default deltamerge)"
    )
    semantics.add_argument("--naming", default="snake_case", help="snake_case (default) or direct")
    semantics.add_argument(
        "--max-table-nesting",
        type=int,
        metavar="N",
        help="depth of child tables made from array columns (default: no limit; 0: arrays kept as JSON)",
    )
    semantics.add_argument("--backend", default="auto", help="auto (default), delta-rs or delta-spark")
    semantics.add_argument(
        "--table-property",
        metavar="KEY=VALUE",
        type=key_value,
        action="append",
        default=[],
        help="a Delta table property to set, e.g. delta.enableChangeDataFeed=true (repeatable)",
    )
    spark = load.add_argument_group("Spark")
    spark.add_argument("--master", default="local[*]", help="the local master (default local[*])")
    spark.add_argument(
        "--spark-conf", metavar="KEY=VALUE", type=key_value, action="append", default=[], help="repeatable"
    )
    spark.add_argument(
        "--delta-jars",
        action="append",
        metavar="PATH",
        help="Delta's jar files or folder, for the delta-spark writer (default: $DELTA_SPARK_JARS)",
    )
