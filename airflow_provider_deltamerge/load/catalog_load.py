"""A load of a table named through a catalog, around the load of its folder: the request placed at the
folder the catalog keeps the table in, the load's tables registered before the load (those an earlier
load left unregistered) and after it (load/catalog_target.py).

A load is finished once its tables are registered. An attempt that recorded its load but stopped before
the registration (killed, or the catalog unreachable) is finished by the next attempt of its run: that
registers the tables and returns the recorded load, committing nothing more, as a retry returns the load
of an attempt that stopped after its commit (plan/reruns.py's `load_to_finish`).
"""

from __future__ import annotations

from ..delta import store
from ..model.request import LoadRequest
from ..plan import reruns
from . import catalog_target, earlier_loads
from .load_info import LoadInfo


def load_by_name(spark, request: LoadRequest, writer_name: str, load, checkpoint) -> LoadInfo:
    """`load(request)` (the load of a folder) on the folder the catalog names, its tables registered;
    `checkpoint(step)`: the load's fault point (see load.checkpoint)."""
    placed = catalog_target.place(spark, request, writer_name)
    registered = catalog_target.register_tables(placed)
    finished = unregistered_attempt(placed.request) if registered else None
    if finished is not None:
        return catalog_target.reported(finished, placed)
    info = load(placed.request)
    checkpoint("after_record")
    catalog_target.register_tables(placed)
    return catalog_target.reported(info, placed)


def unregistered_attempt(request: LoadRequest) -> LoadInfo | None:
    """The load an earlier attempt of this run recorded, where this attempt has just registered tables
    that attempt left unregistered: it stopped between its record and its registration, and its load is
    finished now. None where no earlier attempt of the run recorded a load of the table."""
    stored = store.StoreSnapshot.read(request.dataset, request.store_options)
    earlier = reruns.earlier_loads_of_run(request.run, stored.loads_of(request.pipeline, request.table))
    interrupted = reruns.first_of_latest_attempt(earlier)  # a task of several batches: its first
    if interrupted is None:
        return None
    return earlier_loads.finish_earlier_attempt(request, stored, interrupted)
