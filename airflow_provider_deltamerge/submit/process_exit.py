"""How the package's own processes end (the spark-submit job, the `deltamerge` command): with the exit
code of their work, without the interpreter's own exit. deltalake can abort a process there (SIGABRT,
"terminate called without an active exception", delta-io/delta-rs#2184) after the work is done; a job
whose load landed must report success, or Airflow retries a finished load, and a command must exit with
the code it chose. Imports nothing heavy."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable


def exit_with(run: Callable[[], int | None]) -> None:
    """Exit with what `run()` returns, or with its SystemExit's code as Python would (None is 0, a
    message is printed and is 1), or 1 and the traceback if it raises. Streams are flushed first; the
    caller has released what it holds (a Spark session is stopped by then)."""
    try:
        code = run()
    except SystemExit as stop:
        code = exit_code(stop.code)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code(code))


def exit_code(value) -> int:
    """The process exit code Python gives `sys.exit(value)`."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    print(value, file=sys.stderr)
    return 1
