"""Names (pure): naming conventions, dlt's system columns, our helper columns, table locations.

`snake_case` follows dlt's default convention, so a key given in source spelling ("TxId") matches the
stored column (`tx_id`), and tables look the same as when dlt loads them. `direct` keeps names as given.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from urllib.parse import urlparse

from ..errors import ColumnNameError, ConfigError, InvalidColumnNameError
from .checks import choice

NAMINGS = ("snake_case", "direct")
LOAD_ID = "_dlt_load_id"  # the load that wrote the row
ROW_ID = "_dlt_id"  # unique row id; scd2 keeps the row version hash in it
SYSTEM_PREFIX = "_dlt"  # dlt's system columns and tables
HELPER_PREFIX = "__"  # columns that exist only while a load is staged and never reach a table

# What a store can hold. A table is a folder named after it, created under a lock file beside it
# (`.<table>.create-lock`, local disks); both are one path component, which file systems (ext4, xfs,
# btrfs, APFS, NTFS), ADLS Gen2 and HDFS cap at 255 bytes. Below the folder, Delta adds its log and data
# files (`_delta_log/<20 digits>.checkpoint.<uuid>.json`, `part-00001-<uuid>-c000.zstd.parquet`).
NAME_BYTES = 255
LOCK_SUFFIX = ".create-lock"
TABLE_NAME_BYTES = NAME_BYTES - len("." + LOCK_SUFFIX)  # 242
TABLE_FILE_BYTES = 96  # the longest path Delta writes inside a table folder (partition folders aside)
LOCATION_BYTES = {"": 4095, "file": 4095, "s3": 1024, "s3a": 1024, "gs": 1024, "gcs": 1024}
LOCATION_BYTES.update(dict.fromkeys(("az", "abfs", "abfss", "azure", "adl"), 1024))  # object keys, paths
NOT_IN_NAMES = ("/", "\\", "\0")

_REDUCE_ALPHABET = str.maketrans("+-*@|", "x_xal")
_NON_ALPHANUMERIC = re.compile(r"[^a-zA-Z\d_]+")
_BREAK_BEFORE_WORD = re.compile(r"([^_])([A-Z][a-z]+)")
_BREAK_LOWER_UPPER = re.compile(r"([a-z0-9])([A-Z])")
_LEADING_DIGITS = re.compile(r"^\d+")
_UNDERSCORE_RUNS = re.compile(r"__+")


@lru_cache(maxsize=4096)
def snake_case(identifier: str) -> str:
    """dlt's snake_case: 'CamelCase' -> 'camel_case', 'Zip-Code' -> 'zip_code', '1st' -> '_1st'."""
    name = identifier.strip()
    if not name:
        raise ConfigError("name", f"{identifier!r} is empty after stripping white space")
    name = _NON_ALPHANUMERIC.sub("_", name.translate(_REDUCE_ALPHABET))
    name = _BREAK_BEFORE_WORD.sub(r"\1_\2", name)
    name = _BREAK_LOWER_UPPER.sub(r"\1_\2", name).lower()
    if _LEADING_DIGITS.match(name):
        name = "_" + name
    stripped = name.rstrip("_")
    name = stripped + "x" * (len(name) - len(stripped))
    return _UNDERSCORE_RUNS.sub("_", name)


def direct(identifier: str) -> str:
    if not identifier:
        raise ConfigError("name", "an empty name cannot be used as a column or table name")
    return identifier


def naming_convention(name: str) -> Callable[[str], str]:
    """The function that normalises identifiers for the named convention."""
    choice("naming", name, NAMINGS)
    return snake_case if name == "snake_case" else direct


CHILD_SEPARATOR = "__"  # a child table's name: its parent's, this, and the list's field


def table_name_as_stored(normalize: Callable[[str], str], name: str) -> str:
    """A table name a user gives to reach a table (maintenance, URIs): a child table's name
    (`orders__items`) is normalised part by part, as loads name child tables, so snake_case does not
    contract its separator; any other name as a whole."""
    parts = name.split(CHILD_SEPARATOR)
    if len(parts) > 1 and all(part.strip() for part in parts):
        return CHILD_SEPARATOR.join(normalize(part) for part in parts)
    return normalize(name)


def backticked(name: str) -> str:
    """A column name as Spark SQL takes it whatever it holds (dots, spaces, quotes, a reserved word): in
    backticks, a backtick inside doubled. Unquoted, Spark reads `a.b` as field b of struct a."""
    return "`" + name.replace("`", "``") + "`"


def spark_string(text: str) -> str:
    """A text as a Spark SQL string literal whatever it holds: in single quotes, backslash escapes, which
    Spark reads in every version (3.5 reads '' as two adjacent literals)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def name_key(name: str) -> str:
    """What Spark and Delta compare a column name by: its lower case (Java's, in the root locale, which
    Python's `str.lower` matches for every name a table holds)."""
    return name.lower()


def normalize_columns(columns: list[str], normalize: Callable[[str], str], table: str = "") -> dict[str, str]:
    """Map each source column to its stored name; two source columns may not share a stored name, nor
    stored names equal ignoring case (ColumnNameError naming both)."""
    mapping: dict[str, str] = {}
    seen: dict[str, str] = {}
    for column in columns:
        stored = normalize(column)
        other = seen.get(name_key(stored))
        if other is not None:
            raise ColumnNameError(table, (other, column), "of the batch", (mapping[other], stored))
        seen[name_key(stored)] = column
        mapping[column] = stored
    return mapping


def check_storable_names(table: str, names: Iterable[str]) -> None:
    """Refuse a column name with a character Delta Lake does not allow in column names without column
    mapping (a space, `,;{}()=`, a tab or a newline): the delta-spark writer refuses to write such a
    table, and a table delta-rs wrote with one could never be written by it."""
    for name in names:
        if any(c in InvalidColumnNameError.CHARACTERS for c in name):
            raise InvalidColumnNameError(table, name)


def check_distinct_names(
    table: str, names: Iterable[str], existing: Iterable[str] = (), existing_are: str = "the table's"
) -> None:
    """Refuse, naming both, two of a batch's column names (stored) equal ignoring case, and a name of the
    batch equal to one of `existing` (the table's columns, or those `existing_are`) but for case."""
    held = {name_key(name): name for name in existing}
    batch: dict[str, str] = {}
    for name in names:
        key = name_key(name)
        if key in batch:
            raise ColumnNameError(table, (batch[key], name), "of the batch")
        batch[key] = name
        if held.get(key, name) != name:
            raise ColumnNameError(
                table, (held[key], name), f"(the first {existing_are}, the second the batch's)"
            )


def check_folder_name(argument: str, name: str, given: str | None = None) -> str:
    """A table's name as stored is one folder inside the dataset that every store can hold: no
    separator, not `.` or `..`, at most TABLE_NAME_BYTES in UTF-8. `given` is the name before the
    naming convention, where it differs."""
    spelled = repr(name) if given in (None, name) else f"{given!r} (stored as {name!r})"
    if not name or name in (".", "..") or any(c in name for c in NOT_IN_NAMES):
        raise ConfigError(
            argument,
            f"{spelled} is not one folder inside the dataset; give a plain name (no '/', '\\', '.' or '..')",
        )
    size = len(name.encode("utf-8"))
    if size > TABLE_NAME_BYTES:
        raise ConfigError(
            argument,
            f"{spelled} is {size} bytes long; a table's name may have at most {TABLE_NAME_BYTES} bytes "
            f"(UTF-8), so that its folder and the lock file `.<table>{LOCK_SUFFIX}` beside it fit the "
            f"{NAME_BYTES}-byte limit of a file name. Nothing was read or written: choose a shorter name.",
        )
    return name


def check_table_location(argument: str, dataset: str, name: str) -> str:
    """The files of table `name` fit the store's limit on a whole path or object key (4095 bytes on a
    local disk, 1024 on S3, GCS and Azure), with room for the files Delta writes in the table folder."""
    parsed = urlparse(dataset)
    scheme = "" if "://" not in dataset else parsed.scheme.lower()
    limit = LOCATION_BYTES.get(scheme)
    key = dataset if not scheme else parsed.path.lstrip("/")  # an object key has no leading slash
    size = len(key.rstrip("/").encode("utf-8")) + 1 + len(name.encode("utf-8"))
    if limit is not None and size + TABLE_FILE_BYTES > limit:
        raise ConfigError(
            argument,
            f"table {name!r} in dataset {dataset} makes paths of {size + TABLE_FILE_BYTES} bytes with the "
            f"files Delta writes in it; the store holds paths of at most {limit} bytes. Nothing was read "
            "or written: choose a shorter table name or dataset location.",
        )
    return name


def table_path(dataset: str, name: str) -> str:
    """Where a table (already named by the convention) lives: ``<dataset>/<name>``."""
    return dataset.rstrip("/") + "/" + name


def table_uri(dataset: str, table_name: str, naming: str = "snake_case") -> str:
    """The URI of a table as stored: ``<dataset>/<normalized table_name>``, ``file://`` for local paths."""
    base = dataset.rstrip("/")
    if "://" not in base:
        base = f"file://{base}"
    return f"{base}/{table_name_as_stored(naming_convention(naming), table_name)}"
