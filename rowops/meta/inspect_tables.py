"""pyiceberg's ``InspectTable`` with what Iceberg Java's metadata tables have and pyiceberg 0.12 lacks.

An isolated layer on the library (docs/ARCHITECTURE.md): the ``files`` tables (``files``,
``data_files``, ``delete_files``, ``all_*``) and ``entries``' ``data_file`` gain the format v3 columns
``first_row_id``, ``referenced_data_file``, ``content_offset`` and ``content_size_in_bytes`` (read with
rowops' v3 manifest reader, ``meta/v3.py``, which also inherits first row ids), ``entries``' ``data_file``
its ``spec_id``, ``content`` / ``status`` are ``int`` as in Iceberg Java, and ``all_manifests`` has no
``key_metadata`` (Java's has none). Everything else is pyiceberg's.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import pyarrow as pa
from pyiceberg.manifest import DataFile, DataFileContent, ManifestEntryStatus, ManifestFile
from pyiceberg.table.inspect import InspectTable, _readable_bound
from pyiceberg.types import IcebergType, PrimitiveType

from rowops.meta.v3 import (
    content_range,
    first_row_id,
    read_manifest,
    read_manifest_list,
    referenced_data_file,
)

V3_FILE_FIELDS = (
    pa.field("first_row_id", pa.int64()),
    pa.field("referenced_data_file", pa.string()),
    pa.field("content_offset", pa.int64()),
    pa.field("content_size_in_bytes", pa.int64()),
)


def _bound(kind: IcebergType, value: bytes | None) -> Any:
    """A bound as a value of its column's type (a nested column's: none, as in pyiceberg)."""
    return _readable_bound(kind, value) if isinstance(kind, PrimitiveType) else None


def _as_int32(table: pa.Table, name: str) -> pa.Table:
    index = table.schema.get_field_index(name)
    field = table.schema.field(index)
    return table.set_column(index, field.with_type(pa.int32()), table.column(index).cast(pa.int32()))


class IcebergInspect(InspectTable):
    """``InspectTable`` whose tables have Iceberg Java's columns (see the module docstring)."""

    @cached_property
    def _v3_manifests(self) -> dict[str, ManifestFile]:
        """Every snapshot's manifests as the v3 manifest lists hold them (pyiceberg's drop their
        ``first_row_id``); none below format v3, where there is no ``first_row_id`` to keep."""
        if self.tbl.metadata.format_version < 3:
            return {}
        return {
            m.manifest_path: m
            for snapshot in self.tbl.metadata.snapshots
            for m in read_manifest_list(self.tbl.io, snapshot.manifest_list)
        }

    def _v3_manifest(self, manifest: ManifestFile) -> ManifestFile:
        return self._v3_manifests.get(manifest.manifest_path, manifest)

    def _get_files_schema(self) -> pa.Schema:
        base = super()._get_files_schema()
        fields = [f.with_type(pa.int32()) if f.name == "content" else f for f in base]
        at = base.get_field_index("readable_metrics")
        return pa.schema([*fields[:at], *V3_FILE_FIELDS, *fields[at:]])

    def _get_files_from_manifest(
        self, manifest_list: ManifestFile, data_file_filter: set[DataFileContent] | None = None
    ) -> pa.Table:
        manifest = self._v3_manifest(manifest_list)
        rows = [
            self._file_row(e.data_file, manifest.partition_spec_id)
            for e in read_manifest(manifest, self.tbl.io)
            if e.status != ManifestEntryStatus.DELETED
            and (not data_file_filter or e.data_file.content in data_file_filter)
        ]
        return pa.Table.from_pylist(rows, schema=self._get_files_schema())

    def entries(self, snapshot_id: int | None = None) -> pa.Table:
        files = self._get_files_schema()
        metrics = files.field("readable_metrics")
        data_file = pa.struct([f for f in files if f.name != "readable_metrics"])
        schema = pa.schema(
            [
                pa.field("status", pa.int32(), nullable=False),
                pa.field("snapshot_id", pa.int64()),
                pa.field("sequence_number", pa.int64()),
                pa.field("file_sequence_number", pa.int64()),
                pa.field("data_file", data_file, nullable=False),
                metrics,
            ]
        )
        rows = []
        for manifest in read_manifest_list(self.tbl.io, self._get_snapshot(snapshot_id).manifest_list):
            for entry in read_manifest(manifest, self.tbl.io):
                row = self._file_row(entry.data_file, manifest.partition_spec_id)
                rows.append(
                    {
                        "status": int(entry.status.value),
                        "snapshot_id": entry.snapshot_id,
                        "sequence_number": entry.sequence_number,
                        "file_sequence_number": entry.file_sequence_number,
                        "readable_metrics": row.pop("readable_metrics"),
                        "data_file": row,
                    }
                )
        return pa.Table.from_pylist(rows, schema=schema)

    def _file_row(self, df: DataFile, spec_id: int) -> dict[str, Any]:
        """One row of the files tables (Iceberg Java's columns)."""
        schema = self.tbl.metadata.schema()
        stats = [df.column_sizes, df.value_counts, df.null_value_counts, df.nan_value_counts]
        sizes, values, nulls, nans = (dict(s) if s is not None else None for s in stats)
        lower, upper = (dict(b) if b is not None else None for b in (df.lower_bounds, df.upper_bounds))
        spec = self.tbl.metadata.specs()[spec_id]
        where = content_range(df)
        return {
            "content": int(df.content),
            "file_path": df.file_path,
            "file_format": df.file_format,
            "spec_id": df.spec_id,
            "partition": {f.name: df.partition[i] for i, f in enumerate(spec.fields)},
            "record_count": df.record_count,
            "file_size_in_bytes": df.file_size_in_bytes,
            "column_sizes": sizes,
            "value_counts": values,
            "null_value_counts": nulls,
            "nan_value_counts": nans,
            "lower_bounds": lower,
            "upper_bounds": upper,
            "key_metadata": df.key_metadata,
            "split_offsets": df.split_offsets,
            "equality_ids": df.equality_ids,
            "sort_order_id": df.sort_order_id,
            "first_row_id": first_row_id(df),
            "referenced_data_file": referenced_data_file(df),
            "content_offset": where[0] if where else None,
            "content_size_in_bytes": where[1] if where else None,
            "readable_metrics": {
                schema.find_column_name(f.field_id): {
                    "column_size": (sizes or {}).get(f.field_id),
                    "value_count": (values or {}).get(f.field_id),
                    "null_value_count": (nulls or {}).get(f.field_id),
                    "nan_value_count": (nans or {}).get(f.field_id),
                    "lower_bound": _bound(f.field_type, (lower or {}).get(f.field_id)),
                    "upper_bound": _bound(f.field_type, (upper or {}).get(f.field_id)),
                }
                for f in schema.fields
            },
        }

    def manifests(self) -> pa.Table:
        return _as_int32(super().manifests(), "content")

    def all_manifests(self) -> pa.Table:
        table = _as_int32(super().all_manifests(), "content")
        return table.drop_columns(["key_metadata"])  # not a column of Iceberg Java's all_manifests


def without_empty_partition(table: pa.Table) -> pa.Table:
    """``table`` without an empty ``partition`` struct (an unpartitioned table's), at the top and in
    ``data_file``, as Iceberg Java drops it ("avoid returning an empty struct")."""
    if "partition" in table.schema.names and table.schema.field("partition").type.num_fields == 0:
        table = table.drop_columns(["partition"])
    if "data_file" in table.schema.names:
        data_file: Any = table.column("data_file").combine_chunks()
        kept = [
            (f.name, data_file.field(i))
            for i, f in enumerate(data_file.type)
            if not (f.name == "partition" and f.type.num_fields == 0)
        ]
        rebuilt = pa.StructArray.from_arrays(
            [a for _, a in kept], names=[n for n, _ in kept], mask=data_file.is_null()
        )
        table = table.set_column(table.schema.get_field_index("data_file"), "data_file", rebuilt)
    return table
