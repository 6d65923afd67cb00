"""The JVM options of the tests' own Spark drivers: the suites' session, the Java oracle, the Spark
Connect server and the processes some tests start (the concurrency workers, the executors test's
script, Iceberg Java's table writer); not sessions built by rowops' own code, not the benchmarks'.

Tests run many short, different queries on tiny tables, two pytest-xdist workers on two cores: the
JIT's optimizing tier (C2) spends more CPU compiling than its code saves before the query is done.
Measured (``test_reads``, ``test_deletion_vectors``, ``test_optimizations``, ``test_merge_semantics``,
59 tests, ``-n 2``): 257 s by default, 211 s with C1 only, 202 s with C1 only and the serial collector
(no parallel GC threads competing with the other worker).

>>> spark_conf()["spark.driver.extraJavaOptions"]
'-XX:TieredStopAtLevel=1 -XX:+UseSerialGC'
"""

from __future__ import annotations

JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def spark_conf() -> dict[str, str]:
    """The Spark settings that start a local driver JVM with :data:`JAVA_OPTIONS`."""
    return {"spark.driver.extraJavaOptions": JAVA_OPTIONS}
