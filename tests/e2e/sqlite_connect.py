"""Connection arguments for the Airflow processes of the end-to-end test, which share one SQLite file:
a writer waits up to a minute for another's lock (SQLite's default is 5 s, and `airflow backfill create`
inserting its runs while the scheduler and dag-processor write failed with "database is locked")."""

CONNECT_ARGS = {"timeout": 60}
