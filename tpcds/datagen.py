"""Generate TPC-DS ``store_sales`` as Parquet with DuckDB's tpcds extension, fully offline.

The extension binary comes from the ``duckdb-extension-tpcds`` wheel, which ships it as
``duckdb_extension_tpcds/extensions/v<duckdb version>/tpcds.duckdb_extension``; it is ``LOAD``-ed by
path, so nothing is downloaded. ``dsdgen`` always generates all 24 TPC-DS tables (it has no table
filter), so generation runs in a scratch on-disk DuckDB database under a bounded memory limit (DuckDB
spills to the scratch directory instead of growing), and only ``store_sales`` is exported.

Output layout of ``out_dir``::

    part-00000.parquet ... part-0000N.parquet   disjoint ss_ticket_number ranges, sorted by the key
    _SUCCESS.json                               written last: scale factor, row count, file sizes

Spark reads the directory directly (``spark.read.parquet(str(out_dir))`` skips ``_``/``.`` files).

Usage::

    python -m tpcds.datagen --sf 0.1 --out data/tpcds/sf0.1
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import duckdb
import duckdb_extension_tpcds

TABLE = "store_sales"
KEY_COLUMNS = ("ss_ticket_number", "ss_item_sk")
SUCCESS_FILE = "_SUCCESS.json"
PART_GLOB = "part-*.parquet"
DEFAULT_NUM_FILES = 8
DEFAULT_MEMORY_LIMIT = "2GB"
DEFAULT_THREADS = 2
_SCRATCH_PREFIX = ".dsdgen-"

_MONEY = "DECIMAL(7,2)"
# store_sales exactly as DuckDB's dsdgen produces it (column order and DuckDB types).
STORE_SALES_COLUMNS: tuple[tuple[str, str], ...] = (
    ("ss_sold_date_sk", "BIGINT"),
    ("ss_sold_time_sk", "BIGINT"),
    ("ss_item_sk", "BIGINT"),
    ("ss_customer_sk", "BIGINT"),
    ("ss_cdemo_sk", "BIGINT"),
    ("ss_hdemo_sk", "BIGINT"),
    ("ss_addr_sk", "BIGINT"),
    ("ss_store_sk", "BIGINT"),
    ("ss_promo_sk", "BIGINT"),
    ("ss_ticket_number", "BIGINT"),
    ("ss_quantity", "BIGINT"),
    ("ss_wholesale_cost", _MONEY),
    ("ss_list_price", _MONEY),
    ("ss_sales_price", _MONEY),
    ("ss_ext_discount_amt", _MONEY),
    ("ss_ext_sales_price", _MONEY),
    ("ss_ext_wholesale_cost", _MONEY),
    ("ss_ext_list_price", _MONEY),
    ("ss_ext_tax", _MONEY),
    ("ss_coupon_amt", _MONEY),
    ("ss_net_paid", _MONEY),
    ("ss_net_paid_inc_tax", _MONEY),
    ("ss_net_profit", _MONEY),
)


class DataGenError(RuntimeError):
    """Generated data is not what the benchmark relies on (schema drift, NULL or duplicate keys)."""


@dataclass(frozen=True)
class Manifest:
    """Content of ``_SUCCESS.json``: what a complete dataset directory holds."""

    table: str
    scale_factor: float
    rows: int
    files: dict[str, int]  # file name -> size in bytes
    duckdb_version: str
    seconds: float

    @classmethod
    def read(cls, out_dir: Path) -> Manifest | None:
        """Read the manifest of ``out_dir``, or None if it is missing or unreadable."""
        try:
            return cls(**json.loads((out_dir / SUCCESS_FILE).read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def write(self, out_dir: Path) -> None:
        """Write the manifest atomically (rename), marking ``out_dir`` complete."""
        tmp = out_dir / f".{SUCCESS_FILE}.tmp"
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(out_dir / SUCCESS_FILE)

    def is_complete(self, out_dir: Path, scale_factor: float) -> bool:
        """Whether ``out_dir`` holds exactly this manifest's files for ``scale_factor``."""
        if self.table != TABLE or self.scale_factor != float(scale_factor):
            return False
        present = {p.name: p.stat().st_size for p in out_dir.glob(PART_GLOB)}
        return present == self.files


def tpcds_extension_path() -> Path:
    """Locate the tpcds extension binary shipped by the ``duckdb-extension-tpcds`` wheel.

    Returns:
        Path of ``tpcds.duckdb_extension`` built for the installed DuckDB version.

    Raises:
        FileNotFoundError: The wheel has no binary for this DuckDB version.
    """
    root = Path(duckdb_extension_tpcds.__file__).parent / "extensions"
    path = root / f"v{duckdb.__version__}" / "tpcds.duckdb_extension"
    if not path.is_file():
        raise FileNotFoundError(
            f"No tpcds extension for DuckDB {duckdb.__version__} under {root}.\n"
            "Help: install duckdb-extension-tpcds with the same version as duckdb."
        )
    return path


def generate_store_sales(
    scale_factor: float,
    out_dir: Path,
    *,
    num_files: int = DEFAULT_NUM_FILES,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    threads: int = DEFAULT_THREADS,
) -> Path:
    """Generate TPC-DS ``store_sales`` as Parquet files, reusing a complete earlier run.

    Args:
        scale_factor: TPC-DS scale factor (1.0 gives 2,880,404 rows).
        out_dir: Directory for the Parquet files and ``_SUCCESS.json``; created if missing.
        num_files: Number of Parquet files (disjoint ``ss_ticket_number`` ranges).
        memory_limit: DuckDB memory limit; DuckDB spills to a scratch directory beyond it.
        threads: DuckDB worker threads.

    Returns:
        ``out_dir``.

    Raises:
        DataGenError: The generated table has an unexpected schema, or NULL or duplicate keys.
    """
    if scale_factor <= 0 or num_files < 1:
        raise ValueError(f"scale_factor must be > 0 and num_files >= 1, got {scale_factor}, {num_files}")
    out_dir = Path(out_dir)
    manifest = Manifest.read(out_dir)
    if manifest is not None and manifest.is_complete(out_dir, scale_factor):
        return out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    _remove_stale(out_dir)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=_SCRATCH_PREFIX, dir=out_dir) as scratch_name:
        scratch = Path(scratch_name)
        with _connect(scratch, memory_limit, threads) as con:
            con.execute(f"CALL dsdgen(sf={float(scale_factor)!r})")
            _check_store_sales(con)
            rows = _export(con, scratch / "parts", num_files)
        files = _publish(scratch / "parts", out_dir)
    elapsed = time.monotonic() - started
    Manifest(TABLE, float(scale_factor), rows, files, duckdb.__version__, elapsed).write(out_dir)
    return out_dir


def _remove_stale(out_dir: Path) -> None:
    """Remove a previous (possibly partial) dataset and scratch directories from ``out_dir``."""
    (out_dir / SUCCESS_FILE).unlink(missing_ok=True)
    for part in out_dir.glob(PART_GLOB):
        part.unlink()
    for scratch in out_dir.glob(f"{_SCRATCH_PREFIX}*"):
        shutil.rmtree(scratch, ignore_errors=True)


def _connect(scratch: Path, memory_limit: str, threads: int) -> duckdb.DuckDBPyConnection:
    """Open an on-disk scratch database with bounded memory and the tpcds extension loaded."""
    con = duckdb.connect(
        str(scratch / "dsdgen.duckdb"),
        config={
            "memory_limit": memory_limit,
            "threads": threads,
            "temp_directory": str(scratch / "spill"),
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
        },
    )
    con.execute("SET enable_progress_bar = false")
    con.execute(f"LOAD '{tpcds_extension_path()}'")
    return con


def _check_store_sales(con: duckdb.DuckDBPyConnection) -> None:
    """Check the schema and that the composite key is non-NULL and unique.

    Raises:
        DataGenError: On any violation.
    """
    schema = tuple((name, dtype) for name, dtype, *_ in con.execute(f"DESCRIBE {TABLE}").fetchall())
    if schema != STORE_SALES_COLUMNS:
        raise DataGenError(f"Unexpected {TABLE} schema from dsdgen: {schema}")
    ticket, item = KEY_COLUMNS
    nulls, duplicates = _fetch_one(
        con,
        f"SELECT count(*) FILTER ({ticket} IS NULL OR {item} IS NULL), "
        f"(SELECT count(*) FROM (SELECT 1 FROM {TABLE} GROUP BY {ticket}, {item} HAVING count(*) > 1)) "
        f"FROM {TABLE}",
    )
    if nulls or duplicates:
        raise DataGenError(
            f"{TABLE} key {KEY_COLUMNS}: {nulls} rows with NULLs, {duplicates} duplicated keys"
        )


def _export(con: duckdb.DuckDBPyConnection, parts_dir: Path, num_files: int) -> int:
    """Write ``store_sales`` as ``num_files`` Parquet files of disjoint ticket ranges.

    Returns:
        Number of rows written (checked against the table).
    """
    ticket, item = KEY_COLUMNS
    parts_dir.mkdir()
    low, high, rows = _fetch_one(con, f"SELECT min({ticket}), max({ticket}), count(*) FROM {TABLE}")
    for index, (start, stop) in enumerate(_ranges(low, high, num_files)):
        target = parts_dir / f"part-{index:05d}.parquet"
        con.execute(
            f"COPY (SELECT * FROM {TABLE} WHERE {ticket} >= {start} AND {ticket} < {stop} "
            f"ORDER BY {ticket}, {item}) TO '{target}' (FORMAT parquet, COMPRESSION snappy)"
        )
    (written,) = _fetch_one(con, f"SELECT count(*) FROM read_parquet('{parts_dir / PART_GLOB}')")
    if written != rows:
        raise DataGenError(f"Wrote {written} rows to Parquet, {TABLE} has {rows}")
    return int(rows)


def _ranges(low: int, high: int, count: int) -> list[tuple[int, int]]:
    """Split ``[low, high]`` into at most ``count`` contiguous half-open ranges of near-equal width.

    >>> _ranges(1, 10, 3)
    [(1, 4), (4, 7), (7, 11)]
    >>> _ranges(5, 5, 8)
    [(5, 6)]
    """
    count = max(1, min(count, high - low + 1))
    bounds = [low + (high - low + 1) * i // count for i in range(count + 1)]
    return list(itertools.pairwise(bounds))


def _publish(parts_dir: Path, out_dir: Path) -> dict[str, int]:
    """Move the finished Parquet files into ``out_dir``.

    Returns:
        File name -> size in bytes.
    """
    files = {}
    for part in sorted(parts_dir.glob(PART_GLOB)):
        files[part.name] = part.stat().st_size
        part.replace(out_dir / part.name)
    return files


def _fetch_one(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[Any, ...]:
    """Run ``sql`` and return its single result row."""
    row = con.execute(sql).fetchone()
    if row is None:
        raise DataGenError(f"No result row for: {sql}")
    return tuple(row)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point: generate (or reuse) a dataset and print its manifest as JSON."""
    parser = argparse.ArgumentParser(prog="python -m tpcds.datagen", description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, required=True, help="TPC-DS scale factor, e.g. 0.1 or 1")
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--files", type=int, default=DEFAULT_NUM_FILES, help="number of Parquet files")
    parser.add_argument("--memory-limit", default=DEFAULT_MEMORY_LIMIT, help="DuckDB memory limit")
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS, help="DuckDB threads")
    args = parser.parse_args(argv)
    started = time.monotonic()
    out_dir = generate_store_sales(
        args.sf, args.out, num_files=args.files, memory_limit=args.memory_limit, threads=args.threads
    )
    manifest = Manifest.read(out_dir)
    summary = {"out": str(out_dir), "elapsed_seconds": round(time.monotonic() - started, 2)}
    print(json.dumps({**summary, **(asdict(manifest) if manifest else {})}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
