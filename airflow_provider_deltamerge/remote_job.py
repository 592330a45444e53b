"""Deprecated path of the spark-submit job: it moved to ``airflow_provider_deltamerge/submit/remote_job.py``.

A job submitted with this file (``spark-submit .../airflow_provider_deltamerge/remote_job.py``) still runs,
with a DeprecationWarning on stderr; ``DeltaMergeHook`` submits the new path. Importing this module gives
the new module's names, with the same warning.
"""

import sys
import warnings

_MOVED = "airflow_provider_deltamerge.remote_job moved to airflow_provider_deltamerge.submit.remote_job"

if __name__ == "__main__":
    import os
    import runpy

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]  # not the package as top level
    warnings.warn(_MOVED + "; submit that file instead", DeprecationWarning, stacklevel=1)
    runpy.run_path(os.path.join(here, "submit", "remote_job.py"), run_name="__main__")
else:
    warnings.warn(_MOVED, DeprecationWarning, stacklevel=2)
    from .submit.remote_job import *  # noqa: F403
    from .submit.remote_job import main, parse_args  # noqa: F401
