"""Text in and out of the ``rowops`` command: durations and options parsed; descriptions, version and
snapshot lines, and error messages with a Help line that works on the command line."""

from __future__ import annotations

import re
import shlex
from datetime import datetime, timedelta, timezone
from typing import Any

import typer

from rowops.catalog.history import LakeCommit
from rowops.errors import NoSuchLakeError, NoSuchNamespaceError, NoSuchTableError, RowOpsError
from rowops.pipeline.metrics import debt_summary
from rowops.table import Table

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def describe_table(table: Table) -> dict[str, Any]:
    """Schema, partitioning, sort order, files and debt of a table (metadata only)."""
    metadata = table.metadata
    schema = table.schema
    files = table.files()
    read_weight = float(metadata.properties.get("rowops.read-weight", "1"))
    return {
        "table": table.name,
        "metadata_location": table.metadata_location,
        "current_snapshot_id": metadata.current_snapshot_id,
        "schema": [
            {"id": f.field_id, "name": f.name, "type": str(f.field_type), "required": f.required}
            for f in schema.fields
        ],
        "identifier": [schema.find_column_name(i) for i in schema.identifier_field_ids],
        "partitioning": [
            f"{f.transform}({schema.find_column_name(f.source_id)})" for f in metadata.spec().fields
        ],
        "sort_order": sort_order(table),
        "files": {
            "data": len(files.data),
            "data_bytes": sum(f.size for f in files.data),
            "rows": sum(f.record_count for f in files.data),
            "position_deletes": len(files.position_deletes),
            "equality_deletes": len(files.equality_deletes),
        },
        "debt": debt_summary(files, read_weight),
        "properties": dict(metadata.properties),
    }


def sort_order(table: Table) -> str:
    metadata = table.metadata
    order = metadata.sort_order_by_id(metadata.default_sort_order_id)
    if order is None or not order.fields:
        return "unsorted"
    names = [table.schema.find_column_name(f.source_id) for f in order.fields]
    return ", ".join(
        f"{n} {f.direction.name} {f.null_order.name}" for n, f in zip(names, order.fields, strict=True)
    )


def describe_lines(doc: dict[str, Any]) -> list[str]:
    lines = [f"table {doc['table']} (snapshot {doc['current_snapshot_id']})", "schema:"]
    for f in doc["schema"]:
        lines.append(f"  {f['id']:>3} {f['name']}: {f['type']}{' NOT NULL' if f['required'] else ''}")
    lines.append(f"identifier: {', '.join(doc['identifier']) or '-'}")
    lines.append(f"partitioning: {', '.join(doc['partitioning']) or 'unpartitioned'}")
    lines.append(f"sort order: {doc['sort_order']}")
    lines.append("files: " + ", ".join(f"{k} {v:,}" for k, v in doc["files"].items()))
    lines.append("debt: " + ", ".join(f"{k} {v:,}" for k, v in doc["debt"].items()))
    return lines


def commit_time(millis: int) -> str:
    """A commit time as UTC ``YYYY-mm-dd HH:MM:SS``.

    >>> commit_time(0)
    '1970-01-01 00:00:00'
    """
    return datetime.fromtimestamp(millis / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def count_text(n: int | None) -> str:
    return "?" if n is None else str(n)


def commit_line(c: LakeCommit) -> str:
    """One lake version: rows inserted ~updated -deleted ("?": the encoding could not count them),
    then Iceberg's own summary counts (records of data files added and removed, deletes added)."""
    tables = "; ".join(f"{name}: {', '.join(ops)}" for name, ops in c.tables.items())
    batch = f" batch {c.batch}" if c.batch else ""
    rows = f"+{count_text(c.rows_inserted)} ~{count_text(c.rows_updated)} -{count_text(c.rows_deleted)}"
    records = f"records +{c.records_added} -{c.records_removed}"
    for name, n in (
        ("position deletes", c.position_deletes_added),
        ("equality deletes", c.equality_deletes_added),
    ):
        records += f", {name} +{n}" if n else ""
    return (
        f"v{c.version} {commit_time(c.timestamp_ms)} {c.isolation}{batch} [{tables}] rows {rows}; {records}"
    )


def snapshot_line(snapshot: dict[str, Any]) -> str:
    summary = snapshot["summary"]
    keep = (
        "operation",
        "rowops.strategy",
        "rowops.rows-inserted",
        "rowops.rows-updated",
        "rowops.rows-deleted",
        "rowops.rows-unknown",
        "added-records",
        "deleted-records",
        "added-position-deletes",
        "added-equality-deletes",
    )
    shown = " ".join(f"{k.removeprefix('rowops.')}={summary[k]}" for k in keep if k in summary)
    return f"{snapshot['snapshot_id']} seq {snapshot['sequence_number']} {commit_time(snapshot['timestamp_ms'])} {shown}"


def parse_duration(text: str) -> timedelta:
    """``90s``, ``30m``, ``12h``, ``7d``, ``2w`` as a timedelta.

    >>> parse_duration("7d"), parse_duration("1.5h")
    (datetime.timedelta(days=7), datetime.timedelta(seconds=5400))
    """
    match = _DURATION.match(text.strip())
    if not match:
        raise typer.BadParameter(f"{text!r} is not a duration like 90s, 30m, 12h, 7d or 2w")
    return timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})


def storage_options(values: list[str]) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, item = value.partition("=")
        if not sep or not key:
            raise typer.BadParameter(
                f"--storage-option {value!r} must be KEY=VALUE (e.g. s3.endpoint=http://...)"
            )
        out[key] = item
    return out


def command_help(exc: RowOpsError, lake: str | None) -> str | None:
    """The Help line of an error as a command that works on the command line, where the error's own
    names a Python call (None: keep the error's)."""
    where = f"rowops --lake {shlex.quote(lake)}" if lake else "rowops"
    if isinstance(exc, NoSuchLakeError) and isinstance(exc.__cause__, NoSuchLakeError):
        return None  # a pipeline's: it names the tables to create
    if isinstance(exc, NoSuchLakeError):
        return f"Check the path; to create a new lake there, run: {where} init"
    if isinstance(exc, NoSuchTableError) and isinstance(exc.__cause__, NoSuchTableError):
        return None  # a pipeline's target: its Help names what creates it
    if isinstance(exc, NoSuchTableError | NoSuchNamespaceError):
        return f"List the lake's tables with: {where} tables"
    return None


def error_message(exc: RowOpsError, lake: str | None) -> str:
    """The error's text, with its Help line for the command line."""
    text = str(exc)
    replaced = command_help(exc, lake)
    if replaced is None:
        return text
    return f"{text.split(chr(10) + 'Help: ')[0]}\nHelp: {replaced}"


def change_row(row: dict[str, Any]) -> dict[str, Any]:
    """A change feed row as JSON values (times as ISO 8601 text)."""
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in row.items()}


def change_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per change: version, type, then the row's columns."""
    lines = []
    for r in sorted(rows, key=lambda r: (r["_change_ordinal"], r["_change_type"])):
        values = ", ".join(f"{k}={v!r}" for k, v in r.items() if not k.startswith("_"))
        lines.append(f"v{r['_commit_version']} {r['_change_type']:<16} {values}")
    return lines or ["no changes"]
