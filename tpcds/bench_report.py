"""The report of the TPC-DS benchmark: ``assemble`` turns the phase files into ``bench-sf<SF>.json``
(raw runs, medians, ratios, consistency checks, the profile digest); ``print_summary`` prints a digest.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from typing import Any

from tpcds.bench_common import (
    FIXED_STRATEGIES,
    ICEBERG_MODES,
    JOIN_MODES,
    PHASES,
    ROWOPS_STRATEGIES,
    SLICED_STRATEGIES,
    BenchConfig,
    json_default,
    stats,
)

SCHEMA_VERSION = 1


def _read_phase(cfg: BenchConfig, phase: str) -> dict[str, Any]:
    path = cfg.phase_result(phase)
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        return data
    except (OSError, ValueError):
        return {}


def _ok_runs(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r.get("ok")]


def _join_mode(record: dict[str, Any]) -> str:
    """on / off / sliced-N (records of older runs carry only the ``colocated`` flag)."""
    return str(record.get("join") or ("on" if record.get("colocated") else "off"))


def summarize_rowops(phase: dict[str, Any]) -> dict[str, Any]:
    """Medians per strategy and join mode (co-located on / off / sliced-N)."""
    summary: dict[str, Any] = {}
    runs = phase.get("runs", [])
    for strategy in ROWOPS_STRATEGIES:
        for mode in JOIN_MODES:
            mine = [r for r in runs if r["requested"] == strategy and _join_mode(r) == mode]
            ok = _ok_runs(mine)
            if not mine:
                continue
            first = ok[0] if ok else {}
            summary.setdefault(strategy, {})[mode] = {
                "write_s": stats([r["write_s"] for r in ok]),
                "op_s": stats([r["op_s"] for r in ok]),
                "read_s": stats([r["read_s"] for r in ok]),
                "spark_jobs": stats([r["spark_jobs"] for r in ok]),
                "chosen": sorted({r["result"]["strategy"] for r in ok}),
                "failed_runs": len(mine) - len(ok),
                "result": first.get("result"),
                "files_after": first.get("files_after"),
            }
    return summary


def summarize_iceberg(phase: dict[str, Any]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    runs = phase.get("runs", [])
    for mode in ICEBERG_MODES:
        mine = [r for r in runs if r["mode"] == mode]
        ok = _ok_runs(mine)
        if not mine:
            continue
        first = ok[0] if ok else {}
        summary[mode] = {
            "write_s": stats([r["write_s"] for r in ok]),
            "read_s": stats([r["read_s"] for r in ok]),
            "spark_jobs": stats([r["spark_jobs"] for r in ok]),
            "failed_runs": len(mine) - len(ok),
            "snapshot_summary": first.get("snapshot_summary"),
            "files_after": first.get("files_after"),
            "storage_partitioned_join": phase.get("plans", {}).get(mode, {}).get("storage_partitioned_join"),
        }
    return summary


def _median(summary: dict[str, Any] | None, key: str = "write_s") -> float | None:
    if not summary:
        return None
    value = summary.get(key, {}).get("median")
    return float(value) if value is not None else None


def _present(values: dict[str, float | None]) -> dict[str, float]:
    return {k: v for k, v in values.items() if v is not None}


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def degradation_series(rowops_phase: dict[str, Any], iceberg_phase: dict[str, Any]) -> dict[str, Any]:
    """Read and write time per iteration for every series (read index 0 = before the first upsert)."""
    series: dict[str, Any] = {}
    for engine, phase in (("rowops", rowops_phase), ("iceberg", iceberg_phase)):
        for name, entry in phase.get("series", {}).items():
            iterations = entry.get("iterations", [])
            ok = _ok_runs(iterations)
            reads = [entry["read_before_s"], *[r["read_s"] for r in ok]]
            series[f"{engine} {name}"] = {
                "read_s": reads,
                "write_s": [r["write_s"] for r in ok],
                "answers": [entry.get("answer_before"), *[r.get("answer") for r in ok]],
                "files_after": [r.get("files_after") for r in ok],
                "completed": len(ok),
                "planned": len(iterations) if len(ok) < len(iterations) else None,
                "read_slowdown": _ratio(reads[-1], reads[0]) if len(reads) > 1 else None,
            }
    return series


def assemble(cfg: BenchConfig, phases_run: dict[str, dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    """The final report: raw phase data, medians, ratios and consistency checks."""
    raw = {phase: _read_phase(cfg, phase) for phase in PHASES}
    rowops_summary = summarize_rowops(raw["rowops-writes"])
    iceberg_summary = summarize_iceberg(raw["iceberg-writes"])
    degradation = degradation_series(raw["rowops-degradation"], raw["iceberg-degradation"])
    baseline = raw["baseline"]

    def rowops_write(strategy: str, on: str = "on") -> float | None:
        return _median(rowops_summary.get(strategy, {}).get(on))

    iceberg_writes = _present({m: _median(s) for m, s in iceberg_summary.items()})
    best_iceberg = min(iceberg_writes, key=lambda m: iceberg_writes[m]) if iceberg_writes else None
    fixed = _present({s: rowops_write(s) for s in FIXED_STRATEGIES})
    best_fixed = min(fixed, key=lambda s: fixed[s]) if fixed else None
    auto = rowops_write("auto")
    base_read = (
        statistics.median(raw["rowops-writes"]["base_read_s"])
        if raw["rowops-writes"].get("base_read_s")
        else None
    )
    ratios: dict[str, Any] = {
        "auto_over_best_iceberg": {
            "value": _ratio(auto, iceberg_writes.get(best_iceberg) if best_iceberg else None),
            "auto_s": auto,
            "best_iceberg_mode": best_iceberg,
            "best_iceberg_s": iceberg_writes.get(best_iceberg) if best_iceberg else None,
        },
        "auto_over_best_fixed_rowops": {
            "value": _ratio(auto, fixed.get(best_fixed) if best_fixed else None),
            "auto_s": auto,
            "best_fixed_strategy": best_fixed,
            "best_fixed_s": fixed.get(best_fixed) if best_fixed else None,
        },
        "colocated_on_over_off": {
            s: _ratio(rowops_write(s, "on"), rowops_write(s, "off")) for s in ROWOPS_STRATEGIES
        },
        "sliced_over_on": {
            f"{s} {mode}": _ratio(rowops_write(s, mode), rowops_write(s, "on"))
            for s in SLICED_STRATEGIES
            for mode in JOIN_MODES
            if mode.startswith("sliced")
        },
        "cow_over_pyarrow_baseline": {
            "value": _ratio(rowops_write("copy-on-write"), _median(baseline, "total_s")),
            "cow_s": rowops_write("copy-on-write"),
            "pyarrow_read_rewrite_s": _median(baseline, "total_s"),
        },
        "read_slowdown_after_upserts": {name: s["read_slowdown"] for name, s in degradation.items()},
        "read_after_one_upsert_over_base": {
            **{
                f"rowops {s}": _ratio(_median(rowops_summary.get(s, {}).get("on"), "read_s"), base_read)
                for s in ROWOPS_STRATEGIES
            },
            **{
                f"iceberg {m}": _ratio(
                    _median(iceberg_summary.get(m), "read_s"),
                    statistics.median(raw["iceberg-writes"]["base_read_s"].get(m, [0]) or [0])
                    if raw["iceberg-writes"].get("base_read_s")
                    else None,
                )
                for m in ICEBERG_MODES
            },
        },
        "rowops_over_iceberg_same_encoding": {
            "copy-on-write": _ratio(rowops_write("copy-on-write"), iceberg_writes.get("copy-on-write")),
            "position-delete / merge-on-read": _ratio(
                rowops_write("position-delete"), iceberg_writes.get("merge-on-read")
            ),
        },
    }
    return {
        "schema_version": SCHEMA_VERSION,
        "meta": meta,
        "phases": phases_run,
        "failed_runs": failed_runs(raw),
        "rowops": {
            "summary": rowops_summary,
            "base_read_s": stats(raw["rowops-writes"].get("base_read_s", [])),
        },
        "iceberg": {"summary": iceberg_summary},
        "degradation": degradation,
        "baseline": {k: baseline.get(k) for k in ("files", "read_s", "write_s", "total_s")},
        "cardinality": raw["cardinality"].get("results"),
        "ratios": ratios,
        "consistency": consistency(raw, degradation),
        "profile": _profile_summary(raw["profile"]),
        "raw": raw,
    }


def failed_runs(raw: dict[str, dict[str, Any]]) -> dict[str, int]:
    """Timed upserts that failed (error or ``--op-timeout``), per phase; the phase itself went on."""
    counts = {}
    for phase in ("rowops-writes", "iceberg-writes", "rowops-degradation", "iceberg-degradation"):
        records = list(raw[phase].get("runs", []))
        for entry in raw[phase].get("series", {}).values():
            records += entry.get("iterations", [])
        failed = sum(1 for r in records if not r.get("ok"))
        if failed:
            counts[phase] = failed
    return counts


def consistency(raw: dict[str, dict[str, Any]], degradation: dict[str, Any]) -> dict[str, Any]:
    """Do all strategies and both engines produce the same table (same read-query answer)?"""
    after: dict[str, set[str]] = {}
    for r in _ok_runs(raw["rowops-writes"].get("runs", [])):
        after.setdefault(json.dumps(r["answer"]), set()).add(f"rowops {r['requested']}")
    for r in _ok_runs(raw["iceberg-writes"].get("runs", [])):
        after.setdefault(json.dumps(r["answer"]), set()).add(f"iceberg {r['mode']}")
    base = {json.dumps(a) for a in (raw["rowops-writes"].get("base_answer"),) if a}
    base |= {json.dumps(a) for a in raw["iceberg-writes"].get("base_answer", {}).values()}
    per_iteration = []
    length = max((len(s["answers"]) for s in degradation.values()), default=0)
    for i in range(length):
        answers = {json.dumps(s["answers"][i]) for s in degradation.values() if i < len(s["answers"])}
        per_iteration.append(len(answers) == 1)
    return {
        "base_answers_agree": len(base) <= 1,
        "upsert_answers_agree": len(after) <= 1,
        "upsert_answers": {k: sorted(v) for k, v in after.items()},
        "degradation_answers_agree": per_iteration,
    }


def _profile_summary(phase: dict[str, Any]) -> dict[str, Any]:
    """Per profiled strategy: wall time, top-level phase split, and the five slowest Spark jobs."""
    out = {}
    for strategy, profile in phase.get("profiles", {}).items():
        jobs = sorted(profile.get("jobs", []), key=lambda j: -(j["seconds"] or 0.0))
        out[strategy] = {
            "wall_s": profile["wall_s"],
            "phases": {p["phase"]: round(p["seconds"], 3) for p in profile.get("phases", [])},
            "spark_jobs": len(profile.get("jobs", [])),
            "spark_job_s": sum(j["seconds"] or 0.0 for j in profile.get("jobs", [])),
            "slowest_jobs": [
                {"phase": j["phase"], "callsite": j["callsite"], "seconds": j["seconds"]} for j in jobs[:5]
            ],
        }
    return out


def print_summary(report: dict[str, Any]) -> None:
    """A human-readable digest of the report on stdout."""
    lines = ["", f"== TPC-DS store_sales upsert benchmark, SF {report['meta']['sf']:g} =="]
    lines.append(f"{'engine / strategy':<36} {'write s (median)':>17} {'read s':>8}  chosen / files")
    for strategy, by_coloc in report["rowops"]["summary"].items():
        for on, s in by_coloc.items():
            w, r = _median(s), _median(s, "read_s")
            res = s.get("result") or {}
            files = (
                f"+{res.get('data_files_added')}d -{res.get('data_files_removed')}d "
                f"+{res.get('delete_files_added')}del"
            )
            lines.append(
                f"{'rowops ' + strategy + ' (colocated ' + on + ')':<36} {_fmt(w):>17} {_fmt(r):>8}  "
                f"{','.join(s['chosen'])} {files}"
            )
    for mode, s in report["iceberg"]["summary"].items():
        summ = s.get("snapshot_summary") or {}
        files = (
            f"+{summ.get('added-data-files', 0)}d -{summ.get('deleted-data-files', 0)}d "
            f"+{summ.get('added-delete-files', 0)}del spj={s.get('storage_partitioned_join')}"
        )
        lines.append(
            f"{'iceberg ' + mode:<36} {_fmt(_median(s)):>17} {_fmt(_median(s, 'read_s')):>8}  {files}"
        )
    base = report["baseline"].get("total_s") or {}
    lines.append(f"{'pyarrow read+rewrite all files':<36} {_fmt(base.get('median')):>17}")
    lines.append("")
    lines.append("read query over consecutive upserts (s): before, after 1..N")
    for name, s in report["degradation"].items():
        lines.append(f"  {name:<30} " + " ".join(_fmt(v) for v in s["read_s"]))
    for name, c in (report.get("cardinality") or {}).items():
        lines.append(
            f"cardinality check ({name}, {c['matched_rows']} matched rows): bitmap "
            f"{_fmt(c['bitmap_s']['median'])}s, group-by {_fmt(c['groupby_s']['median'])}s, "
            f"bitmap without limit {_fmt(c.get('bitmap_no_limit_s', {}).get('median'))}s"
        )
    for name, prof in (report.get("profile") or {}).items():
        top = {k: v for k, v in prof["phases"].items() if k.count("/") <= 1 and k != "execute"}
        split = ", ".join(f"{k.removeprefix('execute/')} {v:.1f}" for k, v in top.items() if v >= 0.05)
        lines.append(f"profile {name}: {prof['wall_s']:.1f}s, {prof['spark_jobs']} jobs: {split}")
    lines.append("")
    lines.append("ratios: " + json.dumps(report["ratios"], indent=1, default=json_default))
    lines.append("consistency: " + json.dumps(report["consistency"], default=json_default))
    print("\n".join(lines), flush=True)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
