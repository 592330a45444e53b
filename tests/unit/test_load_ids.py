"""Load ids (model/run.py): dlt's form, unique and increasing however fast they are made."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

from airflow_provider_deltamerge.model import run
from airflow_provider_deltamerge.model.run import new_load_id, txn_version


def test_ids_made_back_to_back_in_threads_are_all_different_and_increase_in_each_thread():
    def made(_) -> list[str]:
        return [new_load_id() for _ in range(20_000)]

    with ThreadPoolExecutor(max_workers=4) as pool:
        streams = list(pool.map(made, range(4)))
    every = [load_id for stream in streams for load_id in stream]
    assert len(set(every)) == len(every)
    for stream in streams:
        assert [txn_version(i) for i in stream] == sorted({txn_version(i) for i in stream})
    assert all(re.fullmatch(r"\d{10}\.\d{6}", load_id) for load_id in every)


def test_an_id_follows_the_newest_recorded_one_even_from_the_future(monkeypatch):
    monkeypatch.setattr(run, "_last_micros", run._last_micros)  # later loads in this process stay in 2026
    assert new_load_id(after="9999999999.5") == "9999999999.500001"
    assert txn_version(new_load_id(after="1700000000")) > txn_version("1700000000")
