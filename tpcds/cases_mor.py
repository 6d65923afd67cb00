"""The merge-on-read target rows of the cases benchmark (issue 47): rowops' position deletes (v2) and
deletion vectors (v3) against Iceberg's merge-on-read and deletion vectors, and ``auto`` on v3 against
Iceberg's deletion vectors, per case of 1-3. Pure: series summaries in, rows out.

A pair missing from the report (the SF 10 subset, a ``--series`` run) gives no rows.
"""

from __future__ import annotations

from typing import Any

from tpcds.cases_ratios import column, pair, row

WRITE_LIMIT = 0.8
READ_LIMIT = 1.2
BYTES_LIMIT = 1.2

# (rowops series, Iceberg series, short id) compared on writes, reads and bytes written
PAIRS = (
    ("rowops position-delete", "iceberg merge-on-read", "pos"),
    ("rowops deletion-vectors", "iceberg deletion-vectors", "dv"),
)
AUTO_V3 = ("rowops auto-v3", "iceberg deletion-vectors", "auto_v3")


def bytes_ratio(series: dict[str, Any], mine: str, theirs: str) -> list[float]:
    """Bytes written over the first run's writes, ``mine`` / ``theirs`` (one value; none when either
    side misses a write's bytes).

    >>> s = {"a": {"bytes_written": [10, 30]}, "b": {"bytes_written": [20, 20]}}
    >>> bytes_ratio(s, "a", "b")
    [1.0]
    >>> bytes_ratio({"a": {"bytes_written": [10, None]}, "b": {"bytes_written": [1, 1]}}, "a", "b")
    []
    """
    a, b = series[mine]["bytes_written"], series[theirs]["bytes_written"]
    if not a or not b or None in a or None in b or not sum(b):
        return []
    return [sum(a) / sum(b)]


def _reads(case: int, series: dict[str, Any], mine: str, theirs: str, key: str) -> list[dict[str, Any]]:
    rows = []
    for index, when in ((1, "first"), (-1, "last")):
        runs = pair(column(series, mine, index), column(series, theirs, index))
        label = f"Case {case} read after the {when} write, {mine} / {theirs}"
        rows.append(row(label, READ_LIMIT, case, runs, "", f"case{case}_read_{when}_{key}_over_iceberg"))
    return rows


def _write(
    case: int, series: dict[str, Any], mine: str, theirs: str, key: str, limit: float | None, detail: str
) -> dict[str, Any]:
    runs = pair(series[mine]["mean_write_s"], series[theirs]["mean_write_s"])
    label = f"Case {case} write, {mine} / {theirs}"
    return row(label, limit, case, runs, detail, f"case{case}_write_{key}_over_iceberg")


def mor_targets(case: int, series: dict[str, Any]) -> list[dict[str, Any]]:
    """The merge-on-read rows of one case (none for Case 4).

    >>> summary = {"mean_write_s": [1.0], "read_s": [[1.0, 2.0, 3.0]], "planned": 2, "bytes_written": [5, 5]}
    >>> theirs = {"mean_write_s": [2.0], "read_s": [[1.0, 2.0, 2.0]], "planned": 2, "bytes_written": [5, 5]}
    >>> rows = mor_targets(2, {"rowops position-delete": summary, "iceberg merge-on-read": theirs})
    >>> [(r["id"], round(r["value"], 2), r["met"]) for r in rows]
    [('case2_write_pos_over_iceberg', 0.5, True), ('case2_read_first_pos_over_iceberg', 1.0, True), ('case2_read_last_pos_over_iceberg', 1.5, False), ('case2_bytes_pos_over_iceberg', 1.0, True)]
    """
    if case not in (1, 2, 3):
        return []
    rows = []
    for mine, theirs, key in PAIRS:
        if mine not in series or theirs not in series:
            continue
        rows.append(_write(case, series, mine, theirs, key, WRITE_LIMIT, ""))
        rows += _reads(case, series, mine, theirs, key)
        label = f"Case {case} bytes written (first run), {mine} / {theirs}"
        rows.append(
            row(
                label,
                BYTES_LIMIT,
                case,
                bytes_ratio(series, mine, theirs),
                "",
                f"case{case}_bytes_{key}_over_iceberg",
            )
        )
    mine, theirs, key = AUTO_V3
    if mine in series and theirs in series:
        chosen = ",".join(sorted(set(series[mine].get("chosen", []))))
        rows.append(_write(case, series, mine, theirs, key, None, f"informational; auto chose {chosen}"))
        rows += _reads(case, series, mine, theirs, key)
    return rows
