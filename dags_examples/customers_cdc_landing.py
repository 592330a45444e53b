"""Debezium-style change events of a `customers` table, landed one folder per day, for the
`customers_cdc` DAG (not a DAG itself: `.airflowignore` lists it).

Each event is Debezium's envelope as JSON lines: `before` and `after` (the row; `after` is null for a
delete, `before` for a create), `op` (`c` create, `u` update, `d` delete), `ts_ms`, and `source.lsn`, the
log position that orders the events. The feed is delivered as feeds are: some events land a day late,
some twice. `customers_now` applies the events one by one in log order: what the table must hold.

    python dags_examples/customers_cdc_landing.py   # lands 2024-03-01 .. 2024-03-07
"""

from __future__ import annotations

import json
import os
import random
import tempfile
from datetime import date, timedelta

FIRST_DAY, DAYS, EVENTS_PER_DAY, CUSTOMERS = date(2024, 3, 1), 7, 40, 25
CITIES = ("Paris", "Lyon", "Oslo", "Porto", "Turin")


def day_folder(demo_dir: str, day: date) -> str:
    return os.path.join(demo_dir, "landing", "customers_cdc", day.isoformat())


def feed(seed: int = 7) -> list[tuple[date, dict]]:
    """Every event with the day it happened, in log order."""
    rng, rows, events = random.Random(seed), {}, []
    for offset in range(DAYS):
        day = FIRST_DAY + timedelta(days=offset)
        for i in range(EVENTS_PER_DAY):
            lsn = (offset + 1) * 10_000 + i * 7
            key = rng.randrange(CUSTOMERS)
            before = rows.get(key)
            if before is None:
                op, after = "c", {"id": key, "name": f"customer {key}", "city": rng.choice(CITIES)}
            elif rng.random() < 0.2:
                op, after = "d", None
            else:
                op, after = "u", {**before, "city": rng.choice(CITIES)}
            if after is None:
                rows.pop(key)
            else:
                rows[key] = after
            envelope = {
                "before": before,
                "after": after,
                "op": op,
                "ts_ms": lsn * 1000,
                "source": {"lsn": lsn},
            }
            events.append((day, envelope))
    return events


def land(demo_dir: str, seed: int = 7) -> None:
    """Each day's folder: its events, less those delivered a day late, plus yesterday's late ones and
    some repeated, shuffled."""
    rng, delivered = random.Random(seed + 1), {}
    for day, event in feed(seed):
        late = rng.random() < 0.15 and day < FIRST_DAY + timedelta(days=DAYS - 1)
        arrival = day + timedelta(days=1) if late else day
        delivered.setdefault(arrival, []).append(event)
        if rng.random() < 0.05:
            delivered.setdefault(day + timedelta(days=1), []).append(event)  # at least once, so twice
    for day, events in delivered.items():
        rng.shuffle(events)
        os.makedirs(day_folder(demo_dir, day), exist_ok=True)
        with open(os.path.join(day_folder(demo_dir, day), "events.json"), "w", encoding="utf-8") as out:
            out.writelines(json.dumps(event) + "\n" for event in events)


def customers_now(seed: int = 7, through: date | None = None) -> dict[int, dict]:
    """The customers after every event (of days up to `through`), applied in log order."""
    rows: dict[int, dict] = {}
    for day, event in feed(seed):
        if through is not None and day > through:
            break
        key = (event["after"] or event["before"])["id"]
        if event["op"] == "d":
            rows.pop(key, None)
        else:
            rows[key] = {**event["after"], "lsn": event["source"]["lsn"]}
    return rows


if __name__ == "__main__":
    land(os.environ.get("DELTAMERGE_DEMO_DIR") or os.path.join(tempfile.gettempdir(), "deltamerge-demo"))
