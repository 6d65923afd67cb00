"""Table maintenance, the pure parts: which files to compact, bin packing, budgets, which delete files
merge or dangle, which snapshots expire, and the health (debt) report.

Everything here is a function of table metadata (``TableFiles``, ``TableMetadata``): no Spark, no I/O.
The Spark rewrites live in ``rowops/exec/rewriting/maintenance.py``, the commits and file removals in
``rowops/run/maintenance.py`` and ``rowops/catalog/retention.py``; ``Table`` exposes them.
"""
