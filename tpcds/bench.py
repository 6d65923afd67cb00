"""TPC-DS ``store_sales`` upsert benchmark: rowops' strategies against Iceberg's own Spark runtime.

``make bench`` runs ``python -m tpcds.bench --sf 1 --out tpcds/results``; ``--quick`` (SF 0.1, one run,
three degradation iterations) is for development. See ``tpcds/README.md`` for what is measured.

The process started from the command line is only the orchestrator: it generates the data (DuckDB,
cached under ``data/tpcds``) and runs every phase in its own subprocess, one after the other, with a
timeout per phase (the process group is killed on expiry). Each phase has its own JVM:

==================== =================================================================================
prepare              the upsert batches (seed 7 for the write runs, seeds 1..N for degradation), cached
rowops-writes        rowops: each strategy x co-located join on/off, median of ``--runs``; read after
iceberg-writes       Iceberg 1.10.2: MERGE INTO in copy-on-write, merge-on-read (v2), DVs (v3)
baseline             pyarrow alone reading + rewriting every data file of the table
rowops-degradation   rowops: N consecutive upserts per strategy, read query after each
iceberg-degradation  Iceberg: N consecutive MERGEs (merge-on-read v2, DVs v3), read query after each
cardinality          rowops' bitmap cardinality check vs the group-by check, on this upsert's matches
profile              where rowops spends its time (phase timings + Spark jobs/stages) per strategy
==================== =================================================================================

Every phase writes its raw measurements to ``<out>/work/sf<SF>/phase-<name>.json`` after each step (a
phase that fails or times out keeps what it measured). The orchestrator then writes
``<out>/bench-sf<SF>.json`` (raw runs, medians, ratios, consistency checks) and the PNG plots.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tpcds.bench_common import (
    LOG_FILES,
    PHASES,
    REPO,
    ROWOPS_STRATEGIES,
    BenchConfig,
    Recorder,
    log,
    run_worker,
    write_json,
)
from tpcds.bench_profile import worker_profile
from tpcds.bench_report import assemble, print_summary
from tpcds.bench_rowops import (
    parse_series,
    worker_baseline,
    worker_cardinality,
    worker_prepare,
    worker_rowops_degradation,
    worker_rowops_writes,
)

# Phase time limits in seconds for SF 1 on 2 busy cores (generous: about 3x the expected duration).
DEFAULT_PHASE_TIMEOUTS = {
    "prepare": 1800.0,
    "rowops-writes": 5 * 3600.0,
    "iceberg-writes": 3 * 3600.0,
    "baseline": 1800.0,
    "rowops-degradation": 5 * 3600.0,
    "iceberg-degradation": 3 * 3600.0,
    "cardinality": 3600.0,
    "profile": 3600.0,
}


ROWOPS_WORKERS: dict[str, Callable[[BenchConfig, Recorder], None]] = {
    "prepare": worker_prepare,
    "rowops-writes": worker_rowops_writes,
    "rowops-degradation": worker_rowops_degradation,
    "cardinality": worker_cardinality,
    "baseline": worker_baseline,
    "profile": worker_profile,
}


# ------------------------------------------------------------------------------------ orchestrator


def phase_command(phase: str, config_path: Path) -> list[str]:
    if phase.startswith("iceberg-"):
        mode = phase.removeprefix("iceberg-")
        return [sys.executable, "-m", "tpcds.iceberg_peer", "--phase", mode, "--config", str(config_path)]
    return [sys.executable, "-m", "tpcds.bench", "--worker", phase, "--config", str(config_path)]


def _forward(stream: Any, log_file: Any) -> None:
    for line in stream:
        sys.stdout.write(line)
        sys.stdout.flush()
        log_file.write(line)
        log_file.flush()


def run_phase(
    phase: str,
    cfg: BenchConfig,
    config_path: Path,
    timeout: float,
    bench_log: Any,
    command: list[str] | None = None,
) -> dict[str, Any]:
    """Run one phase subprocess (own process group) to completion or until ``timeout``.

    ``command`` defaults to ``phase_command(phase, config_path)`` (this runner's phases).
    """
    logs = Path(cfg.work_dir) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    cfg.phase_result(phase).unlink(missing_ok=True)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    stderr_path = logs / f"{phase}.stderr.log"
    log("bench", f"phase {phase} (timeout {timeout:.0f}s, JVM log {stderr_path})")
    started = time.perf_counter()
    with open(stderr_path, "w") as stderr:
        proc = subprocess.Popen(
            command or phase_command(phase, config_path),
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=REPO,
            env=env,
            text=True,
            start_new_session=True,
        )
        reader = threading.Thread(target=_forward, args=(proc.stdout, bench_log), daemon=True)
        reader.start()
        status = "ok"
        try:
            code = proc.wait(timeout)
            if code != 0:
                status = f"failed (exit code {code})"
        except subprocess.TimeoutExpired:
            status = f"timeout after {timeout:.0f}s"
            log("bench", f"phase {phase}: {status}; killing process group {proc.pid}")
            _kill_group(proc)
        except BaseException:
            _kill_group(proc)
            raise
        finally:
            reader.join(10)
    seconds = time.perf_counter() - started
    log("bench", f"phase {phase}: {status} in {seconds:.0f}s")
    return {"status": status, "seconds": seconds, "stderr_log": str(stderr_path)}


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGTERM the phase's process group (python + its JVM), SIGKILL if it does not exit."""
    for sig, grace in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 20.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(grace)
            return
        except subprocess.TimeoutExpired:
            continue


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
    }
    with contextlib.suppress(OSError):
        info["load_average"] = os.getloadavg()
    with contextlib.suppress(OSError, ValueError, IndexError):
        mem = Path("/proc/meminfo").read_text().splitlines()[0].split()
        info["memory_gb"] = round(int(mem[1]) / 2**20, 1)
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        info["rowops_commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    with contextlib.suppress(ImportError):
        import pyarrow
        import pyspark

        info["pyspark"] = pyspark.__version__
        info["pyarrow"] = pyarrow.__version__
    return info


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tpcds.bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--sf", type=float, default=None, help="TPC-DS scale factor (default 1; 0.1 with --quick)"
    )
    parser.add_argument(
        "--out", default="tpcds/results", help="directory for bench-sf<SF>.json and the plots"
    )
    parser.add_argument("--quick", action="store_true", help="development run: SF 0.1, 1 run, 3 iterations")
    parser.add_argument("--runs", type=int, default=None, help="timed runs per configuration (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed warm-up upserts per engine")
    parser.add_argument("--iterations", type=int, default=None, help="consecutive upserts (default 10)")
    parser.add_argument(
        "--degradation-strategies",
        default="auto,auto@rw10,position-delete,equality-delete",
        help="rowops strategies of the degradation phase (comma separated; auto@rw10 = auto with "
        "table property rowops.read-weight=10)",
    )
    parser.add_argument("--phases", default=",".join(PHASES), help=f"phases to run, of {','.join(PHASES)}")
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
    parser.add_argument("--worker", choices=sorted(ROWOPS_WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.sf = args.sf if args.sf is not None else (0.1 if args.quick else 1.0)
    args.runs = args.runs if args.runs is not None else (1 if args.quick else 3)
    args.iterations = args.iterations if args.iterations is not None else (3 if args.quick else 10)
    unknown = set(args.phases.split(",")) - set(PHASES)
    if unknown:
        parser.error(f"unknown phases {sorted(unknown)}; expected some of {','.join(PHASES)}")
    if args.runs < 1 or args.iterations < 1 or args.sf <= 0:
        parser.error("--runs and --iterations must be >= 1 and --sf > 0")
    return args


def iceberg_jars() -> list[str]:
    """``[iceberg-spark-runtime-3.5_2.12-1.10.2.jar, shaded jackson jar]`` from ``tools/iceberg_jars.py``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_iceberg_jars", REPO / "tools" / "iceberg_jars.py")
    if spec is None or spec.loader is None:
        raise RuntimeError("cannot load tools/iceberg_jars.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    jars: list[str] = module.iceberg_jars()
    return jars


def make_config(args: argparse.Namespace, work: Path) -> BenchConfig:
    from tpcds.datagen import generate_store_sales

    data = Path(args.data) if Path(args.data).is_absolute() else REPO / args.data
    log("bench", f"TPC-DS store_sales SF {args.sf:g} under {data} (generated once, then reused)")
    started = time.perf_counter()
    source = generate_store_sales(args.sf, data / f"sf{args.sf:g}")
    log("bench", f"source ready in {time.perf_counter() - started:.1f}s: {source}")
    strategies = [s for s in args.degradation_strategies.split(",") if s]
    bad = [s for s in strategies if parse_series(s)[0] not in ROWOPS_STRATEGIES]
    if bad:
        raise SystemExit(f"unknown degradation strategies {bad}; expected some of {ROWOPS_STRATEGIES}")
    return BenchConfig(
        sf=args.sf,
        quick=args.quick,
        runs=args.runs,
        warmup=args.warmup,
        iterations=args.iterations,
        degradation_strategies=strategies,
        cores=args.cores,
        driver_memory=args.driver_memory,
        op_timeout=args.op_timeout if args.op_timeout is not None else max(300.0, 1800.0 * args.sf),
        source_dir=str(source),
        batch_root=str(data / f"batches-sf{args.sf:g}"),
        work_dir=str(work),
        jars=iceberg_jars(),
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return run_worker(args.worker, Path(args.config), ROWOPS_WORKERS[args.worker], BenchConfig)
    out = Path(args.out) if Path(args.out).is_absolute() else REPO / args.out
    work = out / "work" / f"sf{args.sf:g}"
    work.mkdir(parents=True, exist_ok=True)
    (out / ".gitignore").write_text("work/\n")
    started = time.time()
    meta: dict[str, Any] = {
        "sf": args.sf,
        "quick": args.quick,
        "command": " ".join([Path(sys.executable).name, "-m", "tpcds.bench", *(argv or sys.argv[1:])]),
        "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
        "machine": machine_info(),
    }
    (work / "logs").mkdir(exist_ok=True)
    with open(work / "logs" / "bench.log", "a") as bench_log:
        LOG_FILES.append(bench_log)
        if not args.reuse_tables:
            for old in ("lake", "iceberg-warehouse"):
                shutil.rmtree(work / old, ignore_errors=True)
        cfg = make_config(args, work)
        config_path = work / "config.json"
        cfg.save(config_path)
        meta["config"] = asdict(cfg)
        selected = [p for p in PHASES if p in args.phases.split(",")]
        phases_run: dict[str, dict[str, Any]] = {}
        for phase in selected:
            timeout = DEFAULT_PHASE_TIMEOUTS[phase] * args.timeout_factor * (0.5 if args.quick else 1.0)
            phases_run[phase] = run_phase(phase, cfg, config_path, timeout, bench_log)
        LOG_FILES.remove(bench_log)
    meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    meta["total_s"] = time.time() - started
    meta["load_average_after"] = machine_info().get("load_average")
    report = assemble(cfg, phases_run, meta)
    result_path = out / f"bench-{cfg.tag}.json"
    write_json(result_path, report)
    log("bench", f"wrote {result_path}")
    from tpcds.plots import plot_report

    for path in plot_report(report, out, cfg.tag):
        log("bench", f"wrote {path}")
    print_summary(report)
    if not args.keep_work:
        for old in ("lake", "iceberg-warehouse"):
            shutil.rmtree(work / old, ignore_errors=True)
    failed = [p for p, r in phases_run.items() if r["status"] != "ok"]
    if failed:
        log("bench", f"phases not ok: {failed}")
    if report["failed_runs"]:
        log("bench", f"failed timed upserts per phase: {report['failed_runs']}")
    return 1 if failed or report["failed_runs"] else 0


if __name__ == "__main__":
    sys.exit(main())
