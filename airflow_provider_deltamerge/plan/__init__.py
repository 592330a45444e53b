"""How a request becomes exactly one Delta commit: merge plans, scd2 plans and the expressions they
hold. Pure Python: no Spark, no Delta, no Airflow."""
