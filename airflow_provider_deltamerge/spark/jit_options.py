"""The local session's JIT compilers: C2 starts on a method after ten times Java's usual count.

HotSpot first runs a method interpreted, then compiles it with C1, and a method that stays hot again with
C2, whose compiles cost the most CPU. A local session's executors are threads of the driver's JVM, so on
a small Airflow worker the C2 compiler threads take the cores of the first jobs a fresh task runs, which
are short. With C2 deferred, those jobs run on C1's code; a long job still reaches C2 within its first
seconds. Measured in fresh processes on 2 cores (benchmarks/, the cold regime): a session started and
ran its first upsert of 40k rows into a 2M-row table about 0.7 s sooner, and a 5M-row collection took
no longer.

C1 alone (`-XX:TieredStopAtLevel=1`) is faster still for short jobs, as its code keeps no profile for C2,
and slower for long ones, which never reach C2: in fresh processes, that upsert 2.12 -> 1.69 s and the
session's start 2.69 -> 2.30 s, but a first load of 5M rows 23.9 -> 39.2 s. It is not the default; a DAG
whose tasks load small batches can set it in its spark_conf, and it stands (benchmarks/ report run_load
both ways: the `C1 only` sides).

Added to a new local session's `spark.driver.extraJavaOptions` unless the caller's options choose a
compilation policy of their own (any option in CALLERS_OWN): to keep Java's defaults, set one, e.g.
`-XX:Tier4InvocationThreshold=5000`.
"""

from __future__ import annotations

from .class_archive import JAVA_OPTIONS

# Java 17's defaults (5000, 600, 15000, 40000), each ten times.
LATE_C2 = (
    "-XX:Tier4InvocationThreshold=50000",
    "-XX:Tier4MinInvocationThreshold=6000",
    "-XX:Tier4CompileThreshold=150000",
    "-XX:Tier4BackEdgeThreshold=400000",
)
# Options by which a caller chose how the JVM compiles: theirs stand, ours are not added.
CALLERS_OWN = ("Tier", "CompileThreshold", "CompilationMode", "-Xint", "-Xcomp", "JVMCI")


def session_java_options(conf: dict[str, str]) -> dict[str, str]:
    """The driver's Java options with C2 deferred after the caller's; {} where they chose their own."""
    theirs = conf.get(JAVA_OPTIONS, "")
    if chose_their_own(theirs):
        return {}
    return {JAVA_OPTIONS: " ".join((theirs, *LATE_C2)).strip()}


def chose_their_own(options: str) -> bool:
    return any(option in options for option in CALLERS_OWN)


def describe(conf: dict[str, str]) -> str:
    """What the new session's JVM compiles with, for the task log."""
    options = conf.get(JAVA_OPTIONS, "")
    if LATE_C2[0] in options:
        return "C2 compiles deferred to ten times Java's usual call counts (-XX:Tier4*)"
    if chose_their_own(options):
        return "the compilation options set in spark.driver.extraJavaOptions, kept as set"
    return "Java's default compilation (spark.driver.extraJavaOptions set elsewhere, kept as set)"
