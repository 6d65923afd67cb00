"""OpenLineage configuration that cannot make a client (an unknown transport) sends nothing and never
fails the operation it would describe (rowops/run/lineage.py; the events themselves:
tests/spark/test_lineage.py)."""

from __future__ import annotations

import logging
import os

import pytest

from rowops.run.lineage import Dataset, enabled, lineage_run


def test_a_broken_configuration_is_logged_and_the_block_still_runs(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", "no.such.transport")
    assert enabled()
    ran = []
    dataset = Dataset("file:///lake", "db.t")
    with (
        caplog.at_level(logging.WARNING, logger="rowops.lineage"),
        lineage_run("j", [], [dataset]) as outcome,
    ):
        ran.append(outcome)
    assert ran and any("could not be made" in r.getMessage() for r in caplog.records)


def test_off_without_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.startswith("OPENLINEAGE")]:
        monkeypatch.delenv(key)
    assert not enabled()
