"""Column metrics of nested schemas as Iceberg Java computes them from Parquet footers.

pyiceberg's ``compute_statistics_plan`` keeps only counts for every field whose name has a dot, so a
primitive field of a struct would lose its bounds. Iceberg Java's ``ParquetUtil.footerMetrics``
keeps bounds for primitive leaves reached through structs only ("we allow struct nesting, but not
maps or arrays", ``shouldStoreBounds``); leaves inside a list or a map get counts (and sizes) only.
This module gives struct leaves their configured mode back; everything else is pyiceberg's plan.

>>> from pyiceberg.types import IntegerType, ListType, NestedField, StructType
>>> schema = Schema(NestedField(1, "k", IntegerType()),
...                 NestedField(2, "s", StructType(NestedField(3, "c", IntegerType()))),
...                 NestedField(4, "a", ListType(5, IntegerType())))
>>> plan = statistics_plan(schema, {})
>>> [(i, plan[i].mode.type.value) for i in sorted(plan)]
[(1, 'full'), (3, 'full'), (5, 'counts')]
"""

from __future__ import annotations

import dataclasses

from pyiceberg.io.pyarrow import (
    MetricModeTypes,
    MetricsMode,
    StatisticsCollector,
    compute_statistics_plan,
    match_metrics_mode,
)
from pyiceberg.schema import Schema
from pyiceberg.types import BinaryType, IcebergType, ListType, MapType, StringType, StructType

DEFAULT_MODE_PROPERTY = "write.metadata.metrics.default"
COLUMN_MODE_PREFIX = "write.metadata.metrics.column."
DEFAULT_MODE = "truncate(16)"


def _under_lists_or_maps(t: IcebergType, inside: bool, out: set[int]) -> None:
    """Add to ``out`` the ids of every field of ``t`` that sits inside a list or a map."""
    if isinstance(t, StructType):
        for f in t.fields:
            if inside:
                out.add(f.field_id)
            _under_lists_or_maps(f.field_type, inside, out)
    elif isinstance(t, ListType):
        out.add(t.element_id)
        _under_lists_or_maps(t.element_type, True, out)
    elif isinstance(t, MapType):
        out.update((t.key_id, t.value_id))
        _under_lists_or_maps(t.key_type, True, out)
        _under_lists_or_maps(t.value_type, True, out)


def _configured(collector: StatisticsCollector, properties: dict[str, str]) -> MetricsMode:
    """The column's metrics mode as configured, for a primitive not inside a list or map."""
    mode = match_metrics_mode(
        properties.get(
            COLUMN_MODE_PREFIX + collector.column_name, properties.get(DEFAULT_MODE_PROPERTY, DEFAULT_MODE)
        )
    )
    if mode.type == MetricModeTypes.TRUNCATE and not isinstance(
        collector.iceberg_type, StringType | BinaryType
    ):
        return MetricsMode(MetricModeTypes.FULL)
    return mode


def statistics_plan(schema: Schema, properties: dict[str, str]) -> dict[int, StatisticsCollector]:
    """pyiceberg's statistics plan with bounds for primitive leaves of (nested) structs, as Iceberg."""
    plan = compute_statistics_plan(schema, properties)
    excluded: set[int] = set()
    _under_lists_or_maps(schema.as_struct(), False, excluded)
    return {
        field_id: collector
        if field_id in excluded or "." not in collector.column_name
        else dataclasses.replace(collector, mode=_configured(collector, properties))
        for field_id, collector in plan.items()
    }
