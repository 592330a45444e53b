"""What a load asks of Spark, counted in a way the machine's load cannot change: the Spark jobs it runs
and the SQL executions (query plans run) it starts, read from the session's own status store.

    with SparkWork(spark) as work:
        run_load(...)
    work.jobs, work.sql_executions, work.job_names

A classic session only (the status store lives in the driver's JVM); on Spark Connect both are None.
"""

from __future__ import annotations


class SparkWork:
    def __init__(self, spark):
        self.spark = spark
        self.jobs: int | None = None
        self.sql_executions: int | None = None
        self.job_names: list[str] = []
        self.plans: list[str] = []  # the physical plan of each SQL execution
        self._jobs_before: set[int] = set()
        self._sql_before: set[int] = set()

    @property
    def counted(self) -> bool:
        return hasattr(self.spark, "_jsparkSession")

    def __enter__(self):
        if self.counted:
            self._wait_for_listeners()
            self._jobs_before = set(self._jobs())
            self._sql_before = set(self._sql_executions())
        return self

    def __exit__(self, *exc):
        if not self.counted:
            return
        self._wait_for_listeners()
        names = self._jobs()
        new = sorted(set(names) - self._jobs_before)
        executions = self._sql_executions()
        started = sorted(set(executions) - self._sql_before)
        self.jobs, self.sql_executions = len(new), len(started)
        self.plans = [str(executions[i].physicalPlanDescription()) for i in started]  # the new ones only
        self.job_names = [names[job] for job in new]

    def _jobs(self) -> dict[int, str]:
        """Every job the status store holds (of every job group), by id: its name."""
        jobs = self.spark.sparkContext._jsc.sc().statusStore().jobsList(None)  # a Scala Seq
        listed = [jobs.apply(i) for i in range(jobs.size())]
        return {int(job.jobId()): str(job.name()) for job in listed}

    def _sql_executions(self) -> dict:
        """The SQL executions the store still holds, by id (the JVM's objects: a plan is read only where
        asked). Ids, not a count: the store keeps only the newest spark.sql.ui.retainedExecutions (1000),
        so a long-lived session's count stops growing."""
        executions = self.spark._jsparkSession.sharedState().statusStore().executionsList()  # a Scala Seq
        listed = [executions.apply(i) for i in range(executions.size())]
        return {int(e.executionId()): e for e in listed}

    def _wait_for_listeners(self) -> None:
        """The stores are filled by listeners on Spark's event bus, after the job itself returns."""
        self.spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(10_000)

    def as_dict(self) -> dict:
        return {"jobs": self.jobs, "sql_executions": self.sql_executions, "job_names": self.job_names}
