"""DeltaMaintenanceOperator: OPTIMIZE, Z-order, VACUUM and checkpoints of a Delta table, as a task.

DAG files import this module, so it imports neither pyspark nor deltalake at module level.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import AirflowFailException, BaseOperator

from ..delta.maintenance import MaintenanceOptions
from ..errors import ConfigError
from ..hooks.storage import storage_options_for
from ..model.arguments import check_dataset, check_table_name
from ..model.checks import choice
from ..model.naming import NAMINGS
from ..model.options import BACKENDS
from ..model.table_names import parse_table_name
from .assets import is_templated
from .lineage import DeltaLineageMixin, TableFacts, Written

if TYPE_CHECKING:
    from airflow.sdk import Context


class DeltaMaintenanceOperator(DeltaLineageMixin, BaseOperator):
    """Maintain ``<dataset>/<table_name>``: compaction (OPTIMIZE), Z-order, VACUUM and a checkpoint.

    A load of the same table may run meanwhile: when both rewrite the same files, the one that commits
    second plans again, so neither commit is lost. Run it after the loads of its DAG to keep it simple.

    :param dataset: base location (absolute path or URI), as the loads have it (none for a table named
        through a catalog).
    :param table_name: the table, named as the loads name it (``schema.table``: the catalog's table).
    :param catalog: who names a ``schema.table``: "spark" (the session's catalog, with ``spark_conf``) or
        "glue".
    :param optimize: compact small files.
    :param z_order_by: column or columns to Z-order by while optimizing.
    :param vacuum: delete files that no version within the retention needs.
    :param retention_hours: VACUUM's retention; default the table's ``delta.deletedFileRetentionDuration``
        (one week unless set). Below it only with ``force=True``: a shorter retention can delete files
        that readers of older versions, or a load still writing, need.
    :param force: allow ``retention_hours`` below the table's configured retention.
    :param checkpoint: write a checkpoint of the table's log at its latest version.
    :param naming: "snake_case" or "direct", as the loads use.
    :param backend: "delta-rs" (in the task, no Spark), "delta-spark" (Delta's commands in a local
        Spark session with ``delta_jars``), or "auto": delta-spark when ``delta_jars`` is given (or
        DELTA_SPARK_JARS names jars).
    :param spark_conf: Spark properties of that session.
    :param delta_jars: Delta's jars for it (see ``model.delta_jars``).
    :param storage_conn_id: the connection holding the credentials of a table on S3 or Azure, as the
        loads have it (see docs/STORAGE.md); none: the environment's credentials.
    Returns the metrics of ``maintain_table`` (files and bytes added and removed, files deleted,
    the checkpoint and table versions), pushed to XCom.
    """

    template_fields: Sequence[str] = ("dataset", "table_name", "catalog", "z_order_by")
    ui_color = "#7fd3e6"

    def __init__(
        self,
        *,
        table_name: str,
        dataset: str | None = None,
        optimize: bool = True,
        z_order_by: str | list[str] | None = None,
        vacuum: bool = False,
        retention_hours: float | None = None,
        force: bool = False,
        checkpoint: bool = False,
        naming: str = "snake_case",
        backend: str = "auto",
        spark_conf: dict[str, Any] | None = None,
        delta_jars: Any = None,
        storage_conn_id: str | None = None,
        catalog: str = "spark",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.storage_conn_id = storage_conn_id
        self.storage_options: dict[str, str] | None = None  # read from storage_conn_id when the task runs
        self.dataset = dataset
        self.table_name = table_name
        self.catalog = catalog
        self.optimize = optimize
        self.z_order_by = z_order_by
        self.vacuum = vacuum
        self.retention_hours = retention_hours
        self.force = force
        self.checkpoint = checkpoint
        self.naming = choice("naming", naming, NAMINGS)
        self.backend = choice("backend", backend, BACKENDS)
        self.spark_conf = spark_conf
        self.delta_jars = delta_jars
        if not is_templated(table_name):
            check_table_name(table_name)
        if not is_templated([dataset, table_name]) and not (
            dataset is None and parse_table_name(table_name).in_catalog
        ):
            check_dataset(dataset)
        if not is_templated(z_order_by):
            self.options()

    def options(self) -> MaintenanceOptions:
        return MaintenanceOptions(
            self.optimize, self.z_order_by, self.vacuum, self.retention_hours, self.force, self.checkpoint
        )

    def execute(self, context: Context) -> dict[str, Any]:
        from ..load.catalog_maintenance import maintain_table

        try:
            options = self.options()
            self.storage_options = storage_options_for(self.storage_conn_id)
            metrics = maintain_table(
                self.dataset,
                self.table_name,
                optimize=options.optimize,
                z_order_by=options.z_order_by,
                vacuum=options.vacuum,
                retention_hours=options.retention_hours,
                force=options.force,
                checkpoint=options.checkpoint,
                naming=self.naming,
                backend=self.backend,
                spark=self._spark_session(),
                storage_options=self.storage_options,
                catalog=self.catalog,
            )
        except ConfigError as exc:  # a retry cannot mend it
            raise AirflowFailException(f"{self.task_id}: {exc}") from exc
        self.log.info("Maintenance of %s: %s", self.table_name, metrics)
        return metrics

    def _spark_session(self) -> Any:
        """A local Spark session for the delta-spark backend, or for a table named through the session's
        catalog (its lookup); None for delta-rs on a path, which needs none."""
        from ..model.delta_jars import given_or_env_jars

        jars = given_or_env_jars(self.delta_jars)
        in_catalog = parse_table_name(self.table_name).in_catalog and self.catalog == "spark"
        if not in_catalog and (self.backend == "delta-rs" or (self.backend == "auto" and jars is None)):
            return None
        from ..spark.session import default_session

        conf = {k: str(v) for k, v in (self.spark_conf or {}).items()}
        return default_session("local[*]", conf, delta_jars=jars)

    # OpenLineage: the return value is one maintenance run's metrics, not a load's.

    def committed_versions(self, metrics: list[dict[str, Any]]) -> list[int]:
        return []  # the facets describe the table as it is after the maintenance

    def written(self, metrics: list[dict[str, Any]], facts: TableFacts | None) -> Written | None:
        optimized = [m for m in metrics if "numAddedFiles" in m]
        if not optimized:
            return None
        return Written(None, optimized[0]["numAddedFiles"], optimized[0].get("numAddedBytes"))
