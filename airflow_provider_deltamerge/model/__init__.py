"""What a load asks for: options, the one validated request, incremental cursors, windows, sources and
names. Pure Python: no Spark, no Delta, no Airflow."""
