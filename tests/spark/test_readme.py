"""The README's Python examples run as written (in a scratch directory), so the docs stay true."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_examples_run(spark, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 4
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    for block in blocks[:4]:  # quick start, the MERGE builder, transactions, planning and tuning
        exec(compile(block, str(README), "exec"), namespace)
    t, r = namespace["t"], namespace["r"]
    assert r.rows_deleted is not None  # type: ignore[attr-defined]
    rows = {row["id"]: row for row in t.to_df().collect()}  # type: ignore[attr-defined]
    assert not [i for i in rows if i < 10]  # NOT MATCHED BY SOURCE AND t.id < 10: deleted
    assert 10 in rows and rows[14]["status"] == "late"  # amount 0 rows got status 'late'
    assert rows[995]["status"] == "paid" and rows[995]["amount"] == 99 + 99  # odd id: updated s + t
    lake = namespace["lake"]
    assert "db.payments" in lake.list_tables("db")  # type: ignore[attr-defined]
    assert lake.history()[-1].transaction_id  # type: ignore[attr-defined]
    assert 996 not in rows  # even id: deleted by "s.op = 'D'"
    assert all(row["amount"] != 1 for row in rows.values())
    # maintenance, then schema evolution, on the quick start's table
    maintenance = next(block for block in blocks if "table.compact(" in block)
    exec(compile(maintenance, str(README), "exec"), namespace)
    assert not t.files().deletes and rows == {r["id"]: r for r in t.to_df().collect()}  # type: ignore[attr-defined]
    exec(compile(next(block for block in blocks if "add_columns" in block), str(README), "exec"), namespace)
    assert t.schema.column_names == ["id", "amount", "state", "discount"]  # type: ignore[attr-defined]
    assert t.to_df(snapshot_id=namespace["before"]).columns == ["id", "amount", "status"]  # type: ignore[attr-defined]
    # column defaults (format v3) on a table of their own
    exec(compile(next(block for block in blocks if "set_default" in block), str(README), "exec"), namespace)
    got = {
        r["id"]: (r["amount"], r["channel"], str(r["discount"])) for r in namespace["t3"].to_df().collect()
    }  # type: ignore[attr-defined]
    assert got == {1: (10, "store", "0.00"), 2: (21, "store", "0.00"), 3: (30, "store", "0.00")}
    # partition and sort order evolution on the same table
    exec(
        compile(next(block for block in blocks if "add_partition_field" in block), str(README), "exec"),
        namespace,
    )
    assert [f.name for f in t.metadata.spec().fields] == ["id_bucket_4", "st"]  # type: ignore[attr-defined]
    assert not t.metadata.sort_order().fields and t.metadata.default_spec_id == 2  # type: ignore[attr-defined]
    assert t.to_df().where("id = 12").first()["amount"] == rows[12]["amount"] + 1  # type: ignore[attr-defined]
    # branches and tags: write-audit-publish on the same table
    exec(compile(next(block for block in blocks if "create_branch" in block), str(README), "exec"), namespace)
    assert set(t.refs()) == {"main", "v1"}  # type: ignore[attr-defined]
    assert t.refs()["v1"]["snapshot_id"] == t.current_snapshot_id  # type: ignore[attr-defined]
    assert t.to_df().where("id = 10").first()["amount"] == 2 * rows[10]["amount"]  # type: ignore[attr-defined]
    # SQL text (its own table): MERGE / UPDATE / DELETE / EXPLAIN / a transaction, then queries
    sql = next(block for block in blocks if "lake.sql(" in block)
    exec(compile(sql, str(README), "exec"), namespace)
    accounts = {r["id"]: (r["balance"], r["state"]) for r in namespace["accounts"].to_df().collect()}  # type: ignore[attr-defined]
    assert accounts == {3: (37, "big"), 4: (0, "big")}
