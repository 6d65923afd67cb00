"""The report of the cases benchmark: per-case series summaries, the issue's target ratios (met or
missed, with their run-to-run spread), consistency checks and the tiny-table latency point.

Everything here is pure (dicts in, dicts out): ``assemble`` turns the phase files' contents into
``cases-sf<SF>.json``; ``targets`` computes the ratio table from a report (and, for the SF 10 / SF 1
rows, the other scale factor's report). ``tpcds.cases_markdown`` renders both.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from typing import Any

from tpcds.cases import CASE_NAMES, FIXED
from tpcds.cases_mor import mor_targets
from tpcds.cases_ratios import best, column, median_of, pair, row

SCHEMA_VERSION = 1
CASE_WRITE_LIMITS = {1: 0.7, 2: 0.7, 3: 1.0}
READ_FIRST_LIMIT = 1.0
READ_GROWTH_LIMIT = 1.5
AUTO_FIXED_LIMIT = 1.1
COW_FLOOR_LIMIT = 2.0
CASE4_LIMIT = 1.0
EQ_SCALE_LIMIT = 1.3


def _ok(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r.get("ok")]


def file_totals(files_after: dict[str, Any] | None) -> dict[str, int]:
    """Live data and delete files from either engine's counts (rowops' ``data_files`` /
    ``position_delete_files`` / ``equality_delete_files``; Iceberg's ``<kind>_files_<format>``).

    >>> file_totals({"data_files": 32, "position_delete_files": 16, "equality_delete_files": 0, "data_bytes": 9})
    {'data_files': 32, 'delete_files': 16}
    >>> file_totals({"data_files_parquet": 32, "position_delete_files_puffin": 16, "data_bytes_parquet": 1})
    {'data_files': 32, 'delete_files': 16}
    """
    files = files_after or {}
    data = sum(int(v) for k, v in files.items() if k.startswith("data_files"))
    deletes = sum(
        int(v) for k, v in files.items() if k.startswith(("position_delete_files", "equality_delete_files"))
    )
    return {"data_files": data, "delete_files": deletes}


def summarize_series(runs: Sequence[dict[str, Any]], planned: int) -> dict[str, Any]:
    """Per-run write / read times of one series, and the first run's files, bytes and choices.

    A run's ``mean_write_s`` is None unless all ``planned`` iterations succeeded.
    """
    writes, reads, means = [], [], []
    for run in runs:
        ok = _ok(run.get("iterations", []))
        writes.append([r["write_s"] for r in ok])
        reads.append([run["read_before_s"], *[r["read_s"] for r in ok]])
        means.append(statistics.fmean(writes[-1]) if len(ok) == planned and ok else None)
    first = _ok(runs[0].get("iterations", [])) if runs else []
    return {
        "write_s": writes,
        "read_s": reads,
        "mean_write_s": means,
        "completed": [len(w) for w in writes],
        "planned": planned,
        "files": [file_totals(r.get("files_after")) for r in first],
        "bytes_written": [r.get("bytes_written") for r in first],
        "spark_jobs": [r.get("spark_jobs") for r in first],
        "chosen": [r["result"]["strategy"] for r in first if "result" in r],
        "files_scanned": [r["result"].get("files_scanned") for r in first if "result" in r],
        "answers": [
            [run.get("answer_before"), *[r.get("answer") for r in _ok(run.get("iterations", []))]]
            for run in runs
        ],
    }


def case_consistency(series: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Whether every series and run reads the same answer at every step (0 = base, i = after write i)."""
    length = max((len(a) for s in series.values() for a in s["answers"]), default=0)
    agree = []
    for i in range(length):
        answers = {json.dumps(a[i]) for s in series.values() for a in s["answers"] if i < len(a)}
        agree.append(len(answers) <= 1)
    return {"per_step": agree, "all_agree": all(agree)}


def assemble(
    raw: dict[str, dict[str, Any]], cases: Sequence[int], planned: int, meta: dict[str, Any]
) -> dict[str, Any]:
    """The report from the phase files' contents (``raw[phase]``)."""
    report_cases: dict[str, Any] = {}
    for case in cases:
        series: dict[str, Any] = {}
        for engine in ("rowops", "iceberg"):
            phase = raw.get(f"{engine}-case{case}", {})
            for name, runs in phase.get("series", {}).items():
                series[name] = summarize_series(runs, planned)
        report_cases[str(case)] = {
            "name": CASE_NAMES[case],
            "series": series,
            "consistency": case_consistency(series),
            "plans": raw.get(f"iceberg-case{case}", {}).get("plans"),
        }
    baseline = raw.get("baseline", {})
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "meta": meta,
        "cases": report_cases,
        "baseline": {k: baseline.get(k) for k in ("files", "read_s", "write_s", "total_s")},
        "tiny": tiny_summary(raw.get("rowops-tiny", {}), raw.get("iceberg-tiny", {})),
        "prepare": {k: raw.get("cases-prepare", {}).get(k) for k in ("table", "tiny")},
        "failed_runs": failed_runs(raw),
        "raw": raw,
    }
    return report


def tiny_summary(rowops_phase: dict[str, Any], iceberg_phase: dict[str, Any]) -> dict[str, Any]:
    """Median write time and Spark jobs per engine configuration of the tiny-table point."""
    out: dict[str, Any] = {}
    for phase in (rowops_phase, iceberg_phase):
        for name, records in phase.get("runs", {}).items():
            ok = _ok(records)
            out[name] = {
                "write_s": _stats([r["write_s"] for r in ok]),
                "spark_jobs": _stats([r["spark_jobs"] for r in ok]),
                "chosen": sorted({r["result"]["strategy"] for r in ok if "result" in r}),
                "failed": len(records) - len(ok),
            }
    return out


def _stats(values: Sequence[float]) -> dict[str, Any]:
    vals = [float(v) for v in values]
    if not vals:
        return {"runs": [], "median": None, "min": None, "max": None}
    return {"runs": vals, "median": statistics.median(vals), "min": min(vals), "max": max(vals)}


def failed_runs(raw: dict[str, dict[str, Any]]) -> dict[str, int]:
    """Timed MERGEs that failed, per phase."""
    counts = {}
    for phase, data in raw.items():
        records = [
            r for runs in data.get("series", {}).values() for run in runs for r in run.get("iterations", [])
        ]
        if isinstance(data.get("runs"), dict):
            records += [r for rs in data["runs"].values() for r in rs]
        failed = sum(1 for r in records if not r.get("ok"))
        if failed:
            counts[phase] = failed
    return counts


# ------------------------------------------------------------------------------------------ targets


def case_targets(case: int, series: dict[str, Any]) -> list[dict[str, Any]]:
    """The target rows of one case."""
    rows = []
    iceberg = best(series, lambda s: s.engine == "iceberg" and s.runtime_filter)
    if case == 4:
        cow, ice = "rowops copy-on-write", "iceberg copy-on-write"
        if cow in series and ice in series:
            runs = pair(series[cow]["mean_write_s"], series[ice]["mean_write_s"])
            rows.append(
                row(
                    "Case 4 write, rowops copy-on-write / Iceberg copy-on-write",
                    CASE4_LIMIT,
                    4,
                    runs,
                    "",
                    "case4_cow_over_iceberg_cow",
                )
            )
        for engine in ("rowops", "iceberg"):
            off = f"{engine} copy-on-write no-runtime-filter"
            if off in series and f"{engine} copy-on-write" in series:
                runs = pair(series[f"{engine} copy-on-write"]["mean_write_s"], series[off]["mean_write_s"])
                rows.append(
                    row(
                        f"Case 4 write, {engine} runtime filtering on / off",
                        None,
                        4,
                        runs,
                        "informational",
                        f"case4_{engine}_filter_on_over_off",
                    )
                )
        return rows
    auto = "rowops auto"
    if auto not in series:
        return rows
    chosen = ",".join(sorted(set(series[auto]["chosen"])))
    if iceberg:
        runs = pair(series[auto]["mean_write_s"], series[iceberg]["mean_write_s"])
        rows.append(
            row(
                f"Case {case} write, auto / best Iceberg mode",
                CASE_WRITE_LIMITS[case],
                case,
                runs,
                f"best Iceberg: {iceberg}; auto chose {chosen}",
                f"case{case}_write_auto_over_best_iceberg",
            )
        )
        runs = pair(column(series, auto, 1), column(series, iceberg, 1))
        rows.append(
            row(
                f"Case {case} read after the first write, auto / {iceberg}",
                READ_FIRST_LIMIT,
                case,
                runs,
                "",
                f"case{case}_read_first_auto_over_best_iceberg",
            )
        )
    runs = pair(column(series, auto, -1), column(series, auto, 0))
    rows.append(
        row(
            f"Case {case} read after the last write / before the first, auto",
            READ_GROWTH_LIMIT,
            case,
            runs,
            "",
            f"case{case}_read_growth_auto",
        )
    )
    fixed = best(series, lambda s: s.engine == "rowops" and s.mode in FIXED)
    if fixed and all(f"rowops {f}" in series for f in FIXED):  # not in the SF 10 subset
        runs = pair(series[auto]["mean_write_s"], series[fixed]["mean_write_s"])
        rows.append(
            row(
                f"Case {case} write, auto / best fixed rowops strategy",
                AUTO_FIXED_LIMIT,
                case,
                runs,
                f"best fixed: {fixed}",
                f"case{case}_auto_over_best_fixed",
            )
        )
    return rows


def targets(report: dict[str, Any], other: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every target row of ``report``; with ``other`` (the other scale factor's report) also the
    equality-delete write ratio SF 10 / SF 1 (Case 1) and, per ratio, SF 10 no worse than SF 1."""
    rows = []
    for case, entry in sorted(report.get("cases", {}).items()):
        rows += case_targets(int(case), entry["series"])
        rows += mor_targets(int(case), entry["series"])
    cow = report.get("cases", {}).get("2", {}).get("series", {}).get("rowops copy-on-write")
    floor = (report.get("baseline") or {}).get("total_s") or {}
    if cow and floor.get("median"):
        firsts = [w[0] if w else None for w in cow["write_s"]]
        runs = pair(firsts, [floor["median"]] * len(firsts))
        rows.append(
            row(
                "forced full copy-on-write (Case 2, first write) / pyarrow read+rewrite floor",
                COW_FLOOR_LIMIT,
                2,
                runs,
                f"floor {floor['median']:.2f}s",
                "cow_over_pyarrow_floor",
            )
        )
    if other is None:
        return rows
    sf, other_sf = report["meta"]["sf"], other["meta"]["sf"]
    big, small = (report, other) if sf > other_sf else (other, report)
    eq = "rowops equality-delete"
    big_eq = big.get("cases", {}).get("1", {}).get("series", {}).get(eq)
    small_eq = small.get("cases", {}).get("1", {}).get("series", {}).get(eq)
    if big_eq and small_eq:
        small_mean = median_of(small_eq["mean_write_s"])
        runs = pair(big_eq["mean_write_s"], [small_mean] * len(big_eq["mean_write_s"]))
        label = f"equality-delete write SF {big['meta']['sf']:g} / SF {small['meta']['sf']:g} (Case 1, same changed rows)"
        rows.append(row(label, EQ_SCALE_LIMIT, 1, runs, "", "eq_delete_write_scale"))
    mine = {r["id"]: r for r in rows}
    theirs = {r["id"]: r for r in targets(other)}
    for key, mine_row in mine.items():
        if (
            key in theirs
            and mine_row["value"] is not None
            and theirs[key]["value"] is not None
            and mine_row["limit"]
        ):
            big_v, small_v = (
                (mine_row["value"], theirs[key]["value"])
                if sf > other_sf
                else (theirs[key]["value"], mine_row["value"])
            )
            rows.append(
                {
                    **row(
                        f"{mine_row['target']}: SF {max(sf, other_sf):g} no worse than SF {min(sf, other_sf):g}",
                        None,
                        mine_row["case"],
                        [big_v / small_v],
                        f"SF {max(sf, other_sf):g} {big_v:.2f} vs SF {min(sf, other_sf):g} {small_v:.2f}",
                        f"scale_{key}",
                    ),
                    "met": big_v <= small_v,
                }
            )
    return rows
