"""Table properties under the delta-spark writer, against the recording stand-in taught what real Delta
does with them: `ALTER TABLE ... SET TBLPROPERTIES` and a creating write refuse a `delta.` key that is not
among Delta's table configurations (DeltaConfigs) with DELTA_UNKNOWN_CONFIGURATION; keys outside `delta.`
are kept as given; properties the table has already are not checked again."""

from __future__ import annotations

import re

import pytest

from airflow_provider_deltamerge import ConfigError
from airflow_provider_deltamerge.delta.delta_spark import DeltaSparkWriter
from airflow_provider_deltamerge.delta.optimize_claim import CLAIM_PROPERTY
from airflow_provider_deltamerge.model.table_properties import SUPPORTED, check_table_properties, differing
from tests.unit.test_delta_spark_translation import DeltaStandIn, Frame, Session

# The `delta.` table configurations of open-source Delta's DeltaConfigs (DeltaConfig.scala), as Delta
# compares them: lower-cased. Databricks' own (delta.targetFileSize, delta.tuneFileSizesForRewrites) are
# not among them.
DELTA_CONFIGS = {
    f"delta.{key}".lower()
    for key in (
        "minReaderVersion minWriterVersion ignoreProtocolDefaults logRetentionDuration "
        "sampleRetentionDuration checkpointRetentionDuration checkpointInterval enableExpiredLogCleanup "
        "enableFullRetentionRollback dropFeatureTruncateHistory.retentionDuration "
        "deletedFileRetentionDuration randomizeFilePrefixes randomPrefixLength appendOnly "
        "enableDeletionVectors autoOptimize dataSkippingNumIndexedCols dataSkippingStatsColumns "
        "compatibility.symlinkFormatManifest.enabled checkpoint.writeStatsAsJson "
        "checkpoint.writeStatsAsStruct enableChangeDataCapture enableChangeDataFeed columnMapping.mode "
        "setTransactionRetentionDuration isolationLevel checkpointPolicy enableRowTracking "
        "universalFormat.enabledFormats enableIcebergCompatV1 autoOptimize.optimizeWrite"
    ).split()
}


class UnknownConfiguration(Exception):
    """What Delta raises for an unknown `delta.` property."""


def refuse_unknown(keys) -> None:
    for key in keys:
        if key.lower().startswith("delta.") and key.lower() not in DELTA_CONFIGS:
            raise UnknownConfiguration(
                f"[DELTA_UNKNOWN_CONFIGURATION] Unknown configuration was specified: {key.lower()}"
            )


class DeltaSession(Session):
    """A session whose SQL is Delta's: SET TBLPROPERTIES refuses unknown `delta.` keys, else is kept."""

    def __init__(self, table_properties):
        super().__init__()
        self.table_properties, self.statements = dict(table_properties), []

    def sql(self, statement):
        pairs = dict(re.findall(r"'((?:[^']|'')*)' = '((?:[^']|'')*)'", statement))
        refuse_unknown(pairs)
        self.statements.append(statement)
        self.table_properties.update(pairs)


class TableWithProperties(DeltaStandIn):
    """The stand-in's table, whose detail() gives the session's table properties."""

    def _detail(self):
        return Frame([{"properties": dict(self.session.table_properties), "numFiles": 1}], self.calls)


@pytest.fixture
def delta(monkeypatch):
    def stand_in(table_properties):
        import delta.tables

        table = TableWithProperties(DeltaSession(table_properties), [])
        monkeypatch.setattr(delta.tables, "DeltaTable", table)
        return table.session

    return stand_in


@pytest.mark.parametrize("name", sorted(SUPPORTED))
def test_every_property_loads_accept_is_one_delta_sets(delta, name):
    """Relies on: ALTER TABLE SET TBLPROPERTIES refusing unknown `delta.` keys."""
    value = {"boolean": "true", "duration": "interval 14 days", "text": "id"}.get(SUPPORTED[name], "20")
    properties = check_table_properties({name: value})
    session = delta({})
    DeltaSparkWriter(session).set_table_properties(session, "/lake/items", properties)
    assert session.table_properties == properties


def test_a_table_carrying_a_databricks_property_is_altered_without_setting_it_again(delta):
    """Relies on: Delta checking only the keys an ALTER sets, not those the table has (a table the
    delta-rs writer created with delta.targetFileSize, or a claim of a maintenance run)."""
    current = {"delta.targetFileSize": "16777216", CLAIM_PROPERTY: "a1b2"}
    session = delta(current)
    changes = differing(check_table_properties({"delta.checkpointInterval": 20}), current)
    DeltaSparkWriter(session).set_table_properties(session, "/lake/items", changes)
    assert session.table_properties == {**current, "delta.checkpointInterval": "20"}
    assert "targetFileSize" not in " ".join(session.statements)


@pytest.mark.parametrize("name", ["delta.targetFileSize", "delta.tuneFileSizesForRewrites"])
def test_databricks_properties_are_refused_before_delta_sees_them(name):
    with pytest.raises(ConfigError, match="open-source Delta Lake refuses") as refused:
        check_table_properties({name: "true" if "tune" in name else 1_000_000})
    assert refused.value.argument == "table_properties"
    with pytest.raises(UnknownConfiguration):
        refuse_unknown([name])
