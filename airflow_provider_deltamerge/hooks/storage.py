"""Storage options from an Airflow connection: the one place a task reads a dataset's credentials.

The connection's fields map to delta-rs storage options in `model.storage.options_from_connection`; every
credential among them is registered with Airflow's secrets masker before anything can log it.
"""

from __future__ import annotations

from airflow.providers.common.compat.sdk import BaseHook, mask_secret

from ..model.secrets import credential_values
from ..model.storage import options_from_connection


def storage_options_for(conn_id: str | None) -> dict[str, str] | None:
    """The storage options of the named connection (None without one), its secrets masked in logs."""
    if not conn_id:
        return None
    connection = BaseHook.get_connection(conn_id)
    for secret in credential_values({"password": connection.password, "extra": connection.extra_dejson}):
        mask_secret(secret)
    options = options_from_connection(
        conn_id,
        connection.conn_type,
        connection.login,
        connection.password,
        connection.host,
        connection.extra_dejson,
    )
    for secret in credential_values(options):
        mask_secret(secret)
    return options or None
