"""A real Hive metastore for tests: Spark's built-in Hive support, its Derby database and warehouse in
a folder of the test's own. Derby takes one JVM at a time: a session (or a spark-submit driver) on a
folder must have exited before the next starts on it."""

from __future__ import annotations

JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def hive_conf(root: str) -> dict[str, str]:
    """The Spark settings of a session whose catalog is the metastore in `root` (warehouse and Derby)."""
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": f"{root}/warehouse",
        "spark.hadoop.javax.jdo.option.ConnectionURL": (
            f"jdbc:derby:;databaseName={root}/metastore_db;create=true"
        ),
        JAVA_OPTIONS: f"-Dderby.system.home={root}",
        "spark.sql.shuffle.partitions": "2",
    }


def with_hive(conf: dict[str, str], root: str) -> dict[str, str]:
    """conf with the metastore in `root`; the driver's Java options of both kept."""
    hive = hive_conf(root)
    java = " ".join(options for options in (conf.get(JAVA_OPTIONS), hive[JAVA_OPTIONS]) if options)
    return {**conf, **hive, JAVA_OPTIONS: java}
