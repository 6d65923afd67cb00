"""Golden ``explain`` outputs: plan reports rendered to text, compared with files in tests/golden.

Set ROWOPS_UPDATE_GOLDEN=1 to rewrite the files after an intended change (and review the diff).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from rowops.plan.cost import Estimate
from rowops.plan.explain import FileGroup, PlanReport, format_report
from rowops.plan.strategy import TableFacts, choose_strategy
from rowops.request.operations import DeleteSpec, simple_merge_spec

GOLDEN = Path(__file__).parent.parent / "golden"
FACTS = TableFacts(identifier=("k",), partition_sources=("k",), data_files=16)
MICRO_BATCH = Estimate(source_rows=57_000, source_bytes=2_600_000, candidate_bytes=132_000_000,
                       candidate_rows=2_880_404, candidate_files=16, key_fraction=0.12,
                       partition_bytes=132_000_000)  # fmt: skip
# the batch lands in big partitions (e.g. by day) of which it touches a few files: equality deletes
# would make every read join the whole partitions, position deletes only the touched files
BIG_PARTITIONS = replace(MICRO_BATCH, partition_bytes=50_000_000_000)
# seven upserts left equality deletes on every file (a read anti-joins the 132 MB, and opens 16 more
# delete files and 16 more small data files per upsert): reads have paid that debt ~4 times over,
# more than a copy-on-write costs (one read's debt in its join, the deletes resolved to positions)
AFTER_UPSERTS = replace(MICRO_BATCH, debt_bytes=680_962_048, debt_generations=7,
                        eq_deleted_bytes=132_000_000, deleted_bytes=132_000_000)  # fmt: skip
STREAMING = Estimate(source_rows=400, source_bytes=18_000, candidate_bytes=132_000_000,
                     candidate_rows=2_880_404, candidate_files=16, key_fraction=0.12,
                     partition_bytes=132_000_000)  # fmt: skip


def _report(name: str, estimate: Estimate | None, read_weight: float, **extra: object) -> PlanReport:
    spec = simple_merge_spec(["k"]) if estimate is not None else DeleteSpec("k % 10 = 0")
    decision = choose_strategy("auto", spec, FACTS, estimate, read_weight)
    fields = {"operation": name, "requested": "auto", "strategy": decision.strategy, "reason": decision.reason,
              "costs": decision.costs, "files_total": 16, **extra}  # fmt: skip
    return PlanReport(**fields)  # type: ignore[arg-type]


CASES = {
    "micro_batch_read_heavy": _report(
        "MERGE ON t.k <=> s.k (1% upsert into big partitions)",
        BIG_PARTITIONS,
        10.0,
        files_scanned=16,
        colocated=True,
        colocated_reason="source ~2.5 MiB <= 256 MiB: broadcast to the target's scan tasks",
        groups=(FileGroup("position-delete", 16, 28_804, 2_880_404),),
    ),
    "streaming_write_heavy": _report(
        "MERGE ON t.k <=> s.k (streaming)",
        STREAMING,
        0.0,
        colocated=False,
        colocated_reason="equality deletes do not read the target",
    ),
    "hybrid_dense_and_sparse": _report(
        "MERGE ON t.k <=> s.k (batch into big partitions)",
        BIG_PARTITIONS,
        1.0,
        files_scanned=4,
        files_pruned=12,
        colocated=True,
        colocated_reason="source ~2.5 MiB <= 256 MiB: broadcast to the target's scan tasks",
        groups=(
            FileGroup("copy-on-write", 1, 90_000, 180_000),
            FileGroup("position-delete", 3, 120, 540_000),
        ),
    ),
    "compaction_after_upserts": _report(
        "MERGE ON t.k <=> s.k (1% upsert after many)",
        AFTER_UPSERTS,
        1.0,
        files_scanned=16,
        colocated=True,
        colocated_reason="source ~2.5 MiB <= 256 MiB: broadcast to the target's scan tasks",
        groups=(FileGroup("copy-on-write", 16, 28_804, 2_880_404),),
    ),
    "delete_without_estimate": _report("DELETE WHERE k % 10 = 0", None, 1.0, files_scanned=16),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_explain_matches_golden(name: str) -> None:
    text = format_report(CASES[name]) + "\n"
    path = GOLDEN / f"explain_{name}.txt"
    if os.environ.get("ROWOPS_UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with ROWOPS_UPDATE_GOLDEN=1"
    assert text == path.read_text()
