"""Spark execution: the only package of rowops that imports pyspark (``tests/unit/test_layers.py``).

One sub-package per concern: ``reading`` (a table's rows with deletes applied: the MERGE target scan),
``changes`` (the row changes of MERGE / UPDATE / DELETE), ``checks`` (validation before and during a
run), ``writing`` (data files, position deletes, deletion vectors, equality deletes), ``rewriting``
(copy-on-write in Arrow and by key, maintenance rewrites) and ``spark`` (the adapter: session, compat,
types, transforms, stats, listing, job errors, and ``frames``, the pyspark names other layers use).
"""
