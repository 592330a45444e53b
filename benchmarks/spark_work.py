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
        self._jobs_before: set[int] = set()
        self._sql_before = 0

    @property
    def counted(self) -> bool:
        return hasattr(self.spark, "_jsparkSession")

    def __enter__(self):
        if self.counted:
            self._jobs_before = set(self._job_ids())
            self._sql_before = self._sql_count()
        return self

    def __exit__(self, *exc):
        if not self.counted:
            return
        new = sorted(set(self._job_ids()) - self._jobs_before)
        self.jobs, self.sql_executions = len(new), self._sql_count() - self._sql_before
        names = self._jobs()
        self.job_names = [names[job] for job in new]

    def _jobs(self) -> dict[int, str]:
        """Every job the status store holds (of every job group), by id: its name."""
        jobs = self.spark.sparkContext._jsc.sc().statusStore().jobsList(None)  # a Scala Seq
        listed = [jobs.apply(i) for i in range(jobs.size())]
        return {int(job.jobId()): str(job.name()) for job in listed}

    def _job_ids(self) -> list[int]:
        return list(self._jobs())

    def _sql_count(self) -> int:
        return int(self.spark._jsparkSession.sharedState().statusStore().executionsCount())

    def as_dict(self) -> dict:
        return {"jobs": self.jobs, "sql_executions": self.sql_executions, "job_names": self.job_names}
