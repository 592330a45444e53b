"""One delta-rs OPTIMIZE of a table at a time, on a local disk and on object stores alike.

deltalake 1.6 commits two OPTIMIZEs planned on the same version (and any rewrite committed over an
OPTIMIZE): its conflict check ignores files an OPTIMIZE removed, as their removal changes no data, so the
rows of the files both compacted end up in the table twice. No lock spans processes on an object store,
but Delta's log does: a commit that changes the table's metadata fails every commit planned before it
(delta-rs: "Metadata changed since last commit"; Delta: MetadataChangedException).

So an OPTIMIZE first claims the table: one metadata commit setting the table property CLAIM_PROPERTY to a
value of its own. It then plans on the newest version, and runs only when that version's claim is still
its own; a claim made after its plan fails its commit. Of two OPTIMIZEs, the one whose plan saw the
other's claim waits and claims again, and the other one's commit either landed before that new claim (so
the new plan is made on its result) or fails and plans again. Nothing is compacted twice.

CLAIM_PROPERTY is not a `delta.` property: Delta keeps free-form properties as they are.
"""

from __future__ import annotations

import uuid

from .writer import USER_METADATA, properties_commit_metadata

CLAIM_PROPERTY = "deltamerge.maintenanceClaim"


class ClaimedElsewhere(Exception):
    """Another maintenance run claimed the table after this one: it compacts it now."""


def claim(table) -> None:
    """Claim the deltalake DeltaTable `table` for one OPTIMIZE and bring it to the newest version; raise
    ClaimedElsewhere when that version carries a newer claim of another run, CommitFailedError when a
    concurrent claim won the commit."""
    from deltalake import CommitProperties

    token = uuid.uuid4().hex
    properties = {CLAIM_PROPERTY: token}
    table.update_incremental()
    metadata = {USER_METADATA: properties_commit_metadata(properties)}
    table.alter.set_table_properties(
        properties, raise_if_not_exists=False, commit_properties=CommitProperties(custom_metadata=metadata)
    )
    table.update_incremental()
    holder = (table.metadata().configuration or {}).get(CLAIM_PROPERTY)
    if holder != token:
        raise ClaimedElsewhere(f"another maintenance run claimed {table.table_uri} for its OPTIMIZE")
