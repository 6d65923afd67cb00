"""The paper's Cases 1-4 side by side: rowops (every strategy + ``auto``) and Iceberg 1.10.2
(copy-on-write, merge-on-read, v3 deletion vectors; storage-partitioned joins), plus the tiny-table
latency point. ``make bench-cases`` (SF 1) and ``make bench-cases-sf10`` run it; see tpcds/README.md.

As ``tpcds.bench``, the process started from the command line only orchestrates: it generates the data
and runs every phase in its own subprocess (own JVM, own time limit), one after the other:

=================  ===================================================================================
cases-prepare      the rowops table, every case's batches (seeds 1..N) and the tiny table, as Parquet
rowops-case<N>     rowops: per configuration of case N, ``--runs`` x ``--iterations`` consecutive MERGEs
iceberg-case<N>    Iceberg: the same per mode
baseline           pyarrow alone reading + rewriting every data file (the copy-on-write floor)
rowops-tiny        a 10-row upsert into a 10,000-row table, ``--tiny-runs`` times per strategy
iceberg-tiny       the same in Iceberg copy-on-write and merge-on-read
=================  ===================================================================================

Then it writes ``<out>/cases-sf<SF>.json`` (raw runs, per-series summaries, targets, consistency),
``cases-sf<SF>.md`` (the target table, met / missed) and the PNG plots. It exits 1 when a phase or a
timed MERGE failed or when the engines' answers differ after any iteration.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tpcds.bench import iceberg_jars, machine_info, run_phase
from tpcds.bench_common import LOG_FILES, REPO, Recorder, log, run_worker, write_json
from tpcds.bench_rowops import worker_baseline
from tpcds.cases import CASE_NAMES, ITERATIONS, Series, case_series
from tpcds.cases_common import CasesConfig, case_phases
from tpcds.cases_iceberg import worker_iceberg_case, worker_iceberg_tiny
from tpcds.cases_markdown import cases_markdown
from tpcds.cases_report import assemble, targets
from tpcds.cases_rowops import worker_prepare_cases, worker_rowops_case, worker_rowops_tiny

# Phase limits at SF 1 per run (seconds; generous), scaled by max(1, SF) and --timeout-factor.
PHASE_LIMITS = {"cases-prepare": 1800.0, "case": 3600.0, "baseline": 1800.0, "tiny": 1800.0}


def workers() -> dict[str, Callable[[CasesConfig, Recorder], None]]:
    table: dict[str, Callable[[CasesConfig, Recorder], None]] = {
        "cases-prepare": worker_prepare_cases,
        "baseline": worker_baseline,
        "rowops-tiny": worker_rowops_tiny,
        "iceberg-tiny": worker_iceberg_tiny,
    }
    for case in CASE_NAMES:
        table[f"rowops-case{case}"] = worker_rowops_case(case)
        table[f"iceberg-case{case}"] = worker_iceberg_case(case)
    return table


def phase_limit(phase: str, cfg: CasesConfig, factor: float) -> float:
    scale = max(1.0, cfg.sf) * factor
    if phase.startswith(("rowops-case", "iceberg-case")):
        return PHASE_LIMITS["case"] * cfg.runs * scale
    return PHASE_LIMITS["tiny" if phase.endswith("tiny") else phase] * scale


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tpcds.bench_cases",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--sf", type=float, default=1.0, help="TPC-DS scale factor (default 1)")
    parser.add_argument("--out", default="tpcds/results", help="directory of cases-sf<SF>.json/.md and plots")
    parser.add_argument("--cases", default="1,2,3,4", help="cases to run (comma separated, of 1,2,3,4)")
    parser.add_argument("--iterations", type=int, default=ITERATIONS, help="consecutive MERGEs per case")
    parser.add_argument(
        "--runs", type=int, default=None, help="runs per configuration (default 2; 1 with --sf10-subset)"
    )
    parser.add_argument(
        "--sf10-subset",
        action="store_true",
        help="only what the SF 10 ratios need: auto + the best Iceberg mode per case (from --compare when "
        "it exists), equality deletes in Case 1, copy-on-write with runtime filtering in Case 4",
    )
    parser.add_argument(
        "--compare",
        default=None,
        help="the other SF's cases JSON (default: <out>/cases-sf1.json or cases-sf10.json)",
    )
    parser.add_argument(
        "--tiny-runs", type=int, default=10, help="MERGEs per engine of the tiny-table point (0: skip)"
    )
    parser.add_argument(
        "--series",
        default=None,
        help="run only these series of each case (comma separated names, e.g. 'rowops copy-on-write,iceberg "
        "copy-on-write'); default: all the mode runs",
    )
    parser.add_argument("--no-baseline", action="store_true", help="skip the pyarrow floor")
    parser.add_argument("--warmup", type=int, default=1, help="untimed warm-up MERGEs per phase")
    parser.add_argument("--cores", type=int, default=2, help="local[N] for both engines")
    parser.add_argument("--driver-memory", default="4g", help="spark.driver.memory for both engines")
    parser.add_argument(
        "--op-timeout", type=float, default=None, help="seconds per MERGE before it is cancelled"
    )
    parser.add_argument("--timeout-factor", type=float, default=1.0, help="multiplies every phase time limit")
    parser.add_argument("--data", default="data/tpcds", help="cache of generated data and batches")
    parser.add_argument("--keep-work", action="store_true", help="keep the lake and warehouse after the run")
    parser.add_argument(
        "--reuse-tables", action="store_true", help="do not drop the tables of an earlier run"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.case_list = sorted({int(c) for c in args.cases.split(",") if c})
    if not set(args.case_list) <= set(CASE_NAMES):
        parser.error(f"--cases takes some of {sorted(CASE_NAMES)}")
    args.runs = args.runs if args.runs is not None else (1 if args.sf10_subset else 2)
    if args.runs < 1 or args.iterations < 1 or args.sf <= 0:
        parser.error("--runs and --iterations must be >= 1 and --sf > 0")
    return args


def load_compare(args: argparse.Namespace, out: Path) -> dict[str, Any] | None:
    """The other scale factor's report (for the SF 10 / SF 1 rows and the subset's Iceberg modes)."""
    default = out / ("cases-sf10.json" if args.sf == 1 else "cases-sf1.json")
    path = Path(args.compare) if args.compare else default
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if data.get("meta", {}).get("sf") != args.sf else None


def best_iceberg_modes(other: dict[str, Any] | None) -> dict[int, str]:
    """Per case, the Iceberg mode with the lowest median mean write in ``other`` (absent: none)."""
    best: dict[int, str] = {}
    for case, entry in (other or {}).get("cases", {}).items():
        scored = {}
        for name, s in entry["series"].items():
            series, means = Series.parse(name), [m for m in s["mean_write_s"] if m is not None]
            if series.engine == "iceberg" and series.runtime_filter and means:
                scored[series.mode] = sorted(means)[len(means) // 2]
        if scored:
            best[int(case)] = min(scored, key=lambda m: scored[m])
    return best


def make_config(args: argparse.Namespace, work: Path, other: dict[str, Any] | None) -> CasesConfig:
    from tpcds.datagen import generate_store_sales

    data = Path(args.data) if Path(args.data).is_absolute() else REPO / args.data
    log("cases", f"TPC-DS store_sales SF {args.sf:g} under {data} (generated once, then reused)")
    source = generate_store_sales(args.sf, data / f"sf{args.sf:g}")
    best = best_iceberg_modes(other)
    wanted = {n.strip() for n in args.series.split(",")} if args.series else None
    series = {
        str(c): [
            s.name
            for s in case_series(c, args.sf10_subset, best.get(c))
            if wanted is None or s.name in wanted
        ]
        for c in args.case_list
    }
    return CasesConfig(
        sf=args.sf,
        quick=False,
        runs=args.runs,
        warmup=args.warmup,
        iterations=args.iterations,
        degradation_strategies=[],
        cores=args.cores,
        driver_memory=args.driver_memory,
        op_timeout=args.op_timeout if args.op_timeout is not None else max(300.0, 1800.0 * args.sf),
        source_dir=str(source),
        batch_root=str(data / f"cases-sf{args.sf:g}"),
        work_dir=str(work),
        jars=iceberg_jars(),
        cases=args.case_list,
        series=series,
        subset=args.sf10_subset,
        tiny_runs=args.tiny_runs,
    )


def finish(
    cfg: CasesConfig,
    out: Path,
    phases_run: dict[str, Any],
    meta: dict[str, Any],
    other: dict[str, Any] | None,
) -> int:
    """Assemble and write the report, the markdown summary and the plots; the exit code."""
    from tpcds.cases_plots import plot_cases

    raw = {}
    for phase in phases_run:
        try:
            raw[phase] = json.loads(cfg.phase_result(phase).read_text())
        except (OSError, ValueError):
            raw[phase] = {}
    report = assemble(raw, cfg.cases, cfg.iterations, meta)
    report["phases"] = phases_run
    report["targets"] = targets(report, other)
    path = out / f"cases-{cfg.tag}.json"
    write_json(path, report)
    markdown = cases_markdown(report, report["targets"])
    (out / f"cases-{cfg.tag}.md").write_text(markdown)
    print(markdown, flush=True)
    for drawn in [path, out / f"cases-{cfg.tag}.md", *plot_cases(report, out, cfg.tag)]:
        log("cases", f"wrote {drawn}")
    failed = [p for p, r in phases_run.items() if r["status"] != "ok"]
    disagree = [c for c, e in report["cases"].items() if not e["consistency"]["all_agree"]]
    for what, bad in (
        ("phases not ok", failed),
        ("failed MERGEs", report["failed_runs"]),
        ("answers differ in cases", disagree),
    ):
        if bad:
            log("cases", f"{what}: {bad}")
    return 1 if failed or report["failed_runs"] or disagree else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return run_worker(args.worker, Path(args.config), workers()[args.worker], CasesConfig)
    out = Path(args.out) if Path(args.out).is_absolute() else REPO / args.out
    work = out / "work" / f"cases-sf{args.sf:g}"
    (work / "logs").mkdir(parents=True, exist_ok=True)
    (out / ".gitignore").write_text("work/\n")
    other = load_compare(args, out)
    meta: dict[str, Any] = {
        "sf": args.sf,
        "command": " ".join([Path(sys.executable).name, "-m", "tpcds.bench_cases", *(argv or sys.argv[1:])]),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": machine_info(),
    }
    started = time.time()
    with open(work / "logs" / "bench.log", "a") as bench_log:
        LOG_FILES.append(bench_log)
        if not args.reuse_tables:
            for old in ("lake", "iceberg-warehouse"):
                shutil.rmtree(work / old, ignore_errors=True)
        cfg = make_config(args, work, other)
        config_path = work / "config.json"
        cfg.save(config_path)
        meta["config"] = asdict(cfg)
        phases_run: dict[str, Any] = {}
        for phase in case_phases(cfg.cases, cfg.tiny_runs > 0, not args.no_baseline):
            command = [
                sys.executable,
                "-m",
                "tpcds.bench_cases",
                "--worker",
                phase,
                "--config",
                str(config_path),
            ]
            limit = phase_limit(phase, cfg, args.timeout_factor)
            phases_run[phase] = run_phase(phase, cfg, config_path, limit, bench_log, command)
        LOG_FILES.remove(bench_log)
    meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    meta["total_s"] = time.time() - started
    meta["load_average_after"] = machine_info().get("load_average")
    code = finish(cfg, out, phases_run, meta, other)
    if not args.keep_work:
        for old in ("lake", "iceberg-warehouse"):
            shutil.rmtree(work / old, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
