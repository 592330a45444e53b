#!/usr/bin/env bash
# The oldest supported set (constraints/oldest.txt: Airflow 3.0, PySpark 3.5, delta-spark 3.3, the
# oldest deltalake allowed), in .venv-oldest. It checks that the code runs on those versions, so it runs
# the tests that cross each library boundary, not every semantic case again: the tested set runs those,
# and they make the same library calls.
# - the unit tests: pure planning, and the delta-spark translation through its recording stand-in;
# - from tests/spark: the Spark to Arrow transfer, the staging pass and the Arrow counts (PySpark 3.5's
#   collection and observed metrics, pyarrow 16's compute functions); each write disposition and merge
#   strategy through the oldest deltalake's write and MERGE; change events, with truncates (their
#   untyped keys and their Spark path); partial updates (CASE assignments, NOT MATCHED BY SOURCE
#   updates, a sequence of two columns compared as Spark structs); an scd2 history with tracked columns;
#   the change data feed source (load_cdf, and what it refuses); maintenance, and the conflicts
#   deltalake must detect or our checks catch; the commit format, table properties and schema
#   evolution; recovery from the table's history; key errors;
# - one example DAG with dag.test(): Airflow 3.0's operators, assets and XCom.
# Left to the tested set: the property tests (marker `property`), the benchmark's smoke test, and the
# other modules' semantic cases. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-oldest CONSTRAINTS=constraints/oldest.txt bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv-oldest/bin/python"
spark=tests/spark
tests=(
  tests/unit
  $spark/test_transfer.py $spark/test_staging_pass.py $spark/test_cold_load.py
  "$spark/test_arrow_profile.py::test_arrow_counts_and_bounds_equal_sparks[delta-rs-Pacific/Kiritimati]"
  $spark/test_append_replace.py $spark/test_upsert_insert_only.py $spark/test_delete_insert.py
  $spark/test_scd2.py $spark/test_cdc.py
  $spark/test_cdc_truncates.py::test_a_truncate_removes_the_older_rows_keeps_the_newer_and_later_older_events_are_skipped
  $spark/test_cdc_truncates.py::test_a_truncate_with_a_null_key_alone_in_its_batch_and_one_with_a_key
  $spark/test_cdc_truncates.py::test_a_batch_of_truncates_only_takes_its_keys_type_from_the_tombstones_or_is_refused
  $spark/test_cdc_truncates.py::test_events_that_do_not_fit_on_the_driver_are_filtered_in_spark
  $spark/test_cdf_source.py::test_silver_follows_bronze_load_by_load
  $spark/test_cdf_source.py::test_a_table_without_its_feed_is_refused
  $spark/test_cdf_source.py::test_versions_that_log_cleanup_removed_are_refused
  $spark/test_cdc_null_updates.py::test_a_late_truncate_empties_the_values_older_than_it_in_the_rows_that_outlive_it
  $spark/test_cdc_null_updates.py::test_a_sequence_of_two_columns_orders_values_deletes_and_truncates_column_by_column
  $spark/test_cdc_scd2_track_history.py::test_a_late_event_splits_a_version_that_absorbed_events_at_their_place
  $spark/test_maintenance.py $spark/test_maintenance_races.py
  $spark/test_concurrency.py::test_twelve_upserts_at_once_are_planned_again_until_all_land
  $spark/test_concurrency.py::test_a_load_planned_before_an_optimize_commits_on_the_optimized_table
  $spark/test_concurrency.py::test_an_optimize_between_the_read_check_and_the_commit_fails_the_delta_rs_commit
  $spark/test_concurrency.py::test_a_conflict_reported_after_the_commit_landed_returns_that_commit
  $spark/test_concurrency.py::test_loads_recording_themselves_while_the_state_tables_are_compacted_are_each_recorded_once
  $spark/test_commit_format.py $spark/test_table_properties.py $spark/test_schema_evolution.py
  $spark/test_lost_state.py $spark/test_keys_and_errors.py
  tests/airflow/test_example_dags.py::test_weekly_flights_merge_week_by_week_and_rerun
)
exec .venv-oldest/bin/python -m pytest "${tests[@]}" -m "not property" "$@"
