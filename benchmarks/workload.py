"""The benchmark's deterministic workload, spelled twice with the same arithmetic: in Spark (for run_load
and the embedded floor) and in pyarrow (for dlt, which runs in its own virtualenv without Spark).

- target, M rows: id = 2*i for i in [0, M); k = id % 1000; s = "s<id % 9973>-<id>"; x = id / 1000;
  ts = 2024-01-01Z + id seconds;
- change set, N rows: 90% existing ids and 10% new odd ids, either spread over the whole id range
  ("uniform": a fixed stride through it) or inside one slice starting at 49% of it ("clustered");
  changed rows get s = "u<id % 9973>-<id>" and x = id / 1000 + 5000.

This file imports neither Spark nor the provider: the dlt side imports it as is.
"""

from __future__ import annotations

from dataclasses import dataclass

EPOCH_SECONDS = 1_704_067_200  # 2024-01-01T00:00:00Z
UPDATE_SHARE = 0.9
SLICE_START = 0.49


@dataclass(frozen=True)
class Size:
    target_rows: int
    changed_rows: int
    kind: str  # "uniform" | "clustered"

    @property
    def label(self) -> str:
        return f"{_short(self.target_rows)}/{_short(self.changed_rows)} {self.kind}"

    @classmethod
    def parse(cls, text: str) -> Size:
        """ "1000000:100000:uniform" (kind defaults to uniform)."""
        parts = text.split(":")
        kind = parts[2] if len(parts) > 2 else "uniform"
        if kind not in ("uniform", "clustered"):
            raise ValueError(f"size {text!r}: kind must be uniform or clustered")
        return cls(int(parts[0]), int(parts[1]), kind)


def _short(n: int) -> str:
    for unit, div in (("M", 1_000_000), ("k", 1_000)):
        if n >= div and n % (div // 10) == 0:
            return f"{n / div:g}{unit}"
    return str(n)


def updates(size: Size) -> int:
    return int(size.changed_rows * UPDATE_SHARE)


def stride(size: Size) -> int:
    """A step through [0, M) that visits `updates` distinct rows spread over the whole range."""
    return max(1, size.target_rows // max(updates(size), 1))


def slice_start(size: Size) -> int:
    return int(size.target_rows * SLICE_START)


def existing_id(size: Size, j: int) -> int:
    """The j-th updated id (j < updates)."""
    if size.kind == "uniform":
        return (j * stride(size)) % size.target_rows * 2
    return (slice_start(size) + j) * 2


def new_id(size: Size, j: int) -> int:
    """The j-th inserted id (odd, so never in the target)."""
    if size.kind == "uniform":
        inserted = max(size.changed_rows - updates(size), 1)
        return j * max(1, size.target_rows // inserted) * 2 + 1
    return (slice_start(size) + j * 9) * 2 + 1


def expected_rows(size: Size) -> int:
    return size.target_rows + (size.changed_rows - updates(size))


# ---- pyarrow spelling (the dlt side) ----


def arrow_target(size: Size):
    import pyarrow as pa

    return arrow_rows(pa.array(range(0, 2 * size.target_rows, 2), pa.int64()), changed=False)


def arrow_changes(size: Size):
    import pyarrow as pa

    n_updates = updates(size)
    ids = [existing_id(size, j) for j in range(n_updates)]
    ids += [new_id(size, j) for j in range(size.changed_rows - n_updates)]
    return arrow_rows(pa.array(ids, pa.int64()), changed=True)


def arrow_rows(ids, changed: bool):
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pc.binary_join_element_wise(
        "u" if changed else "s",
        pc.cast(pc.remainder(ids, 9973), pa.string()),
        "-",
        pc.cast(ids, pa.string()),
        "",
    )
    x = pc.divide(pc.cast(ids, pa.float64()), 1000.0)
    if changed:
        x = pc.add(x, 5000.0)
    seconds = pc.add(ids, EPOCH_SECONDS)
    ts = pc.cast(pc.multiply(seconds, 1_000_000), pa.timestamp("us", tz="UTC"))
    return pa.table({"id": ids, "k": pc.remainder(ids, 1000), "s": text, "x": x, "ts": ts})
