"""The cases benchmark's pure parts: batch sizes, Case 4's file choice, the engine lists, and the ratio
table the runner reports (so it cannot silently compute wrong ratios). No Spark."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tpcds.bench_cases import best_iceberg_modes
from tpcds.cases import (
    CASE4_FILE_FRACTION,
    case_series,
    choose_file_buckets,
    streaming_rows_per_bucket,
)
from tpcds.cases_common import case_phases
from tpcds.cases_markdown import cases_markdown
from tpcds.cases_report import assemble, case_consistency, file_totals, summarize_series, targets

ANSWER = ["100", "5.00", "7", "10"]


def _run(writes: list[float], reads: list[float], answers: list[list[str]] | None = None) -> dict[str, Any]:
    """One run of a series: ``reads[0]`` before, ``reads[i]`` after write ``i``."""
    answers = answers or [ANSWER] * len(reads)
    iterations = [
        {
            "ok": True,
            "write_s": w,
            "read_s": r,
            "answer": a,
            "spark_jobs": 3,
            "files_after": {"data_files": 16 + i, "position_delete_files": i},
            "bytes_written": 1000,
            "result": {"strategy": "position-delete"},
        }
        for i, (w, r, a) in enumerate(zip(writes, reads[1:], answers[1:], strict=True), 1)
    ]
    return {"read_before_s": reads[0], "answer_before": answers[0], "iterations": iterations}


def _raw(case: int, series: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    rowops = {n: r for n, r in series.items() if n.startswith("rowops")}
    iceberg = {n: r for n, r in series.items() if n.startswith("iceberg")}
    return {f"rowops-case{case}": {"series": rowops}, f"iceberg-case{case}": {"series": iceberg}}


def _report(raw: dict[str, dict[str, Any]], cases: list[int], sf: float = 1.0) -> dict[str, Any]:
    return assemble(raw, cases, 2, {"sf": sf, "config": {"iterations": 2, "runs": 2}})


def _by_id(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in rows}


CASE2 = {
    "rowops auto": [_run([1.0, 1.0], [1.0, 1.0, 2.0]), _run([2.0, 2.0], [1.0, 1.0, 1.0])],
    "rowops copy-on-write": [_run([4.0, 4.0], [1.0, 1.0, 1.0]), _run([4.0, 4.0], [1.0, 1.0, 1.0])],
    "rowops position-delete": [_run([1.25, 1.25], [1.0, 2.0, 2.0]), _run([2.0, 2.0], [1.0, 2.0, 2.0])],
    "rowops equality-delete": [_run([3.0, 3.0], [1.0, 2.0, 3.0]), _run([3.0, 3.0], [1.0, 2.0, 3.0])],
    "iceberg copy-on-write": [_run([8.0, 8.0], [1.0, 1.0, 1.0]), _run([8.0, 8.0], [1.0, 1.0, 1.0])],
    "iceberg merge-on-read": [_run([2.0, 2.0], [1.0, 0.5, 1.0]), _run([2.0, 2.0], [1.0, 0.5, 1.0])],
}


def test_case1_size_is_25_per_bucket_scaled_down_on_small_tables() -> None:
    assert streaming_rows_per_bucket(2_880_404) == 25
    assert streaming_rows_per_bucket(28_810_000) == 25  # SF 10: the same changed rows as SF 1
    assert streaming_rows_per_bucket(288_464) == 25
    assert streaming_rows_per_bucket(28_810) == 18  # < 2,500 rows per bucket: 1% of a bucket
    assert streaming_rows_per_bucket(10) == 1


@pytest.mark.parametrize("seed", range(20))
def test_case4_buckets_hold_at_most_a_quarter_of_the_files(seed: int) -> None:
    rng = random.Random(seed)
    layout = {b: rng.randint(1, 5) for b in range(16)}
    chosen = choose_file_buckets(layout, CASE4_FILE_FRACTION, seed)
    assert chosen and set(chosen) <= set(layout)
    assert sum(layout[b] for b in chosen) <= max(1, int(0.25 * sum(layout.values())))
    assert choose_file_buckets({b: 1 for b in range(16)}, 0.25, seed).__len__() == 4


def test_sf10_subset_keeps_what_the_ratios_need() -> None:
    full = {s.name for s in case_series(3)}
    assert full == {
        "rowops copy-on-write",
        "rowops position-delete",
        "rowops equality-delete",
        "rowops auto",
        "rowops deletion-vectors",
        "rowops auto-v3",
        "iceberg copy-on-write",
        "iceberg merge-on-read",
        "iceberg deletion-vectors",
    }
    assert [s.name for s in case_series(2, subset=True, best_iceberg="deletion-vectors")] == [
        "rowops auto",
        "iceberg deletion-vectors",
    ]
    assert {s.name for s in case_series(4)} == {
        "rowops copy-on-write",
        "rowops copy-on-write no-runtime-filter",
        "iceberg copy-on-write",
        "iceberg copy-on-write no-runtime-filter",
    }


def test_series_summary_means_only_complete_runs() -> None:
    complete, partial = _run([1.0, 3.0], [1.0, 2.0, 3.0]), _run([1.0], [1.0, 2.0])
    summary = summarize_series([complete, partial], planned=2)
    assert summary["mean_write_s"] == [2.0, None]
    assert summary["read_s"] == [[1.0, 2.0, 3.0], [1.0, 2.0]]
    assert summary["files"] == [{"data_files": 17, "delete_files": 1}, {"data_files": 18, "delete_files": 2}]
    assert file_totals({"data_files_parquet": 3, "equality_delete_files_parquet": 2}) == {
        "data_files": 3,
        "delete_files": 2,
    }


def test_write_ratios_use_the_best_iceberg_mode_and_the_best_fixed_strategy() -> None:
    rows = _by_id(targets(_report(_raw(2, CASE2), [2])))
    write = rows["case2_write_auto_over_best_iceberg"]
    assert write["runs"] == [0.5, 1.0]  # auto 1 / MoR 2, auto 2 / MoR 2 (CoW 8 is not the best)
    assert write["value"] == 0.75 and write["spread"] == [0.5, 1.0] and write["limit"] == 0.7
    assert write["met"] is False and "merge-on-read" in write["detail"]
    fixed = rows["case2_auto_over_best_fixed"]
    assert fixed["runs"] == [0.8, 1.0] and fixed["met"] is True and "position-delete" in fixed["detail"]


def test_read_ratios() -> None:
    rows = _by_id(targets(_report(_raw(2, CASE2), [2])))
    assert rows["case2_read_first_auto_over_best_iceberg"]["runs"] == [2.0, 2.0]  # 1.0 / 0.5
    assert rows["case2_read_first_auto_over_best_iceberg"]["met"] is False
    growth = rows["case2_read_growth_auto"]
    assert growth["runs"] == [2.0, 1.0] and growth["value"] == 1.5 and growth["met"] is True


def test_merge_on_read_ratios_pair_each_rowops_format_with_iceberg_in_the_same_mode() -> None:
    v3 = {
        "rowops deletion-vectors": [_run([1.0, 1.0], [1.0, 1.5, 3.0]), _run([1.0, 1.0], [1.0, 1.5, 3.0])],
        "rowops auto-v3": [_run([0.5, 0.5], [1.0, 1.0, 1.0]), _run([0.5, 0.5], [1.0, 1.0, 1.0])],
        "iceberg deletion-vectors": [_run([2.0, 2.0], [1.0, 1.0, 2.0]), _run([4.0, 4.0], [1.0, 1.0, 2.0])],
    }
    rows = _by_id(targets(_report(_raw(2, {**CASE2, **v3}), [2])))
    pos = rows["case2_write_pos_over_iceberg"]  # position deletes against merge-on-read, not the DVs
    assert pos["runs"] == [0.625, 1.0] and pos["limit"] == 0.8 and pos["met"] is False
    assert rows["case2_read_first_pos_over_iceberg"]["runs"] == [4.0, 4.0]  # 2.0 / 0.5
    assert rows["case2_bytes_pos_over_iceberg"]["runs"] == [1.0]
    dv = rows["case2_write_dv_over_iceberg"]
    assert dv["runs"] == [0.5, 0.25] and dv["met"] is True
    assert rows["case2_read_last_dv_over_iceberg"]["runs"] == [1.5, 1.5]
    assert rows["case2_read_last_dv_over_iceberg"]["met"] is False
    auto = rows["case2_write_auto_v3_over_iceberg"]
    assert auto["met"] is None and "position-delete" in auto["detail"]
    assert rows["case2_read_first_auto_v3_over_iceberg"]["runs"] == [1.0, 1.0]
    assert not any(r.startswith("case2_write_dv") for r in _by_id(targets(_report(_raw(2, CASE2), [2]))))


def test_cow_floor_and_case4_ratios() -> None:
    case4 = {
        "rowops copy-on-write": [_run([3.0, 3.0], [1.0, 1.0, 1.0])],
        "rowops copy-on-write no-runtime-filter": [_run([6.0, 6.0], [1.0, 1.0, 1.0])],
        "iceberg copy-on-write": [_run([2.0, 2.0], [1.0, 1.0, 1.0])],
    }
    report = _report({**_raw(2, CASE2), **_raw(4, case4), "baseline": {"total_s": {"median": 2.0}}}, [2, 4])
    rows = _by_id(targets(report))
    assert rows["cow_over_pyarrow_floor"]["runs"] == [2.0, 2.0]  # first CoW write 4.0 / floor 2.0
    assert rows["cow_over_pyarrow_floor"]["met"] is True
    assert rows["case4_cow_over_iceberg_cow"]["value"] == 1.5
    assert rows["case4_cow_over_iceberg_cow"]["met"] is False
    assert rows["case4_rowops_filter_on_over_off"]["value"] == 0.5
    assert rows["case4_rowops_filter_on_over_off"]["met"] is None  # informational
    assert "case4_iceberg_filter_on_over_off" not in rows  # not measured


def test_scale_rows_compare_with_the_other_scale_factor() -> None:
    def case1(eq_write: float, auto_write: float) -> dict[str, list[dict[str, Any]]]:
        return {
            "rowops auto": [_run([auto_write] * 2, [1.0, 1.0, 1.0])],
            "rowops equality-delete": [_run([eq_write] * 2, [1.0, 1.0, 1.0])],
            "iceberg merge-on-read": [_run([2.0, 2.0], [1.0, 1.0, 1.0])],
        }

    sf1 = _report(_raw(1, case1(2.0, 1.0)), [1], sf=1.0)
    sf10 = _report(_raw(1, case1(3.0, 1.6)), [1], sf=10.0)
    rows = _by_id(targets(sf10, sf1))
    assert "case1_auto_over_best_fixed" not in rows  # one fixed strategy (the SF 10 subset): no ratio
    assert rows["eq_delete_write_scale"]["value"] == 1.5 and rows["eq_delete_write_scale"]["met"] is False
    scale = rows["scale_case1_write_auto_over_best_iceberg"]  # 0.8 at SF 10 vs 0.5 at SF 1
    assert scale["met"] is False and scale["value"] == pytest.approx(1.6)
    assert _by_id(targets(sf1, sf10))["eq_delete_write_scale"]["value"] == 1.5  # either order
    assert "eq_delete_write_scale" not in _by_id(targets(sf10))


def test_differing_answers_are_caught_and_the_summary_renders() -> None:
    wrong = [ANSWER, ANSWER, ["101", "5.00", "7", "10"]]
    series = {**CASE2, "iceberg merge-on-read": [_run([2.0, 2.0], [1.0, 1.0, 1.0], wrong)]}
    report = _report(_raw(2, series), [2])
    assert report["cases"]["2"]["consistency"] == {"per_step": [True, True, False], "all_agree": False}
    assert case_consistency(_report(_raw(2, CASE2), [2])["cases"]["2"]["series"])["all_agree"] is True
    assert "All answers agree: False." in cases_markdown(report, targets(report))
    good = _report(_raw(2, CASE2), [2])
    text = cases_markdown(good, targets(good))
    assert "| Case 2 write, auto / best Iceberg mode | ≤ 0.7 | 0.75 | 0.50..1.00 | **missed** |" in text
    assert "| rowops auto | 1.50 | 1.00 | 1.00 | 2.00 | 18/2 | position-delete |" in text


def test_sf10_subset_takes_the_best_iceberg_mode_per_case_from_the_other_report() -> None:
    report = _report(_raw(2, CASE2), [2])
    assert best_iceberg_modes(report) == {2: "merge-on-read"}
    assert best_iceberg_modes(None) == {}
    assert case_phases([2], tiny=False, baseline=False) == ["cases-prepare", "rowops-case2", "iceberg-case2"]
