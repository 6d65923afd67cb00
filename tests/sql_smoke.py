"""The SQL text surface in one pass (``rowops.sql`` / ``lake.sql``), shared by the pyspark 4.x run
(``tests/spark/test_sql.py::test_sql_smoke``) and the Spark Connect run (``tests/connect``): MERGE,
UPDATE, DELETE and EXPLAIN text under every strategy, ALTER TABLE, a query joining a lake table with
a Spark view, time travel; the rows checked by rowops and DuckDB (and PyIceberg without equality
deletes). Only public PySpark APIs, so a Connect client runs it as is."""

from __future__ import annotations

from typing import Any

import rowops
from tests.readers import assert_readers_agree

COLUMNS = ["k", "v", "n"]
STRATEGIES = ("copy-on-write", "position-delete", "equality-delete")


def sql_smoke(lake: Any, java: Any = None) -> dict[str, str]:
    """Run the SQL smoke cases on ``lake`` (a fresh lake); returns which readers were checked."""
    spark = lake.spark
    initial = spark.range(10).selectExpr("id AS k", "CAST(id AS STRING) AS v", "0 AS n")
    table = lake.create_table("db.t", initial, partition_by=["bucket(2, k)"], identifier=["k"])
    expected = {k: (k, str(k), 0) for k in range(10)}
    first = table.current_snapshot_id
    spark.range(5, 15).selectExpr("id AS k", "CONCAT('v', id) AS v", "1 AS n").createOrReplaceTempView(
        "smoke_src"
    )
    merge = (
        "MERGE INTO db.t t USING smoke_src s ON t.k = s.k WHEN MATCHED AND s.k = 5 THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET v = s.v, n = t.n + s.n WHEN NOT MATCHED THEN INSERT *"
    )
    explained = rowops.sql(lake, "EXPLAIN " + merge)
    assert isinstance(explained, str) and explained.startswith("== rowops plan ==")
    rowops.sql(lake, merge, strategy="position-delete")
    expected.pop(5)
    expected.update({k: (k, f"v{k}", 1) for k in range(6, 15)})
    for i, strategy in enumerate(STRATEGIES):  # upserts by key: every encoding, equality deletes too
        upsert = (
            f"MERGE INTO db.t USING (SELECT k, CONCAT('{strategy}', k) AS v, {i} AS n FROM smoke_src "
            f"WHERE k % 3 = {i}) src ON db.t.k = src.k WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
        )
        result = lake.sql(upsert, strategy=strategy)
        assert result.strategy == strategy
        expected.update({k: (k, f"{strategy}{k}", i) for k in range(5, 15) if k % 3 == i})
    lake.sql("UPDATE db.t SET n = n + 10 WHERE k < 3", strategy="copy-on-write")
    expected.update({k: (k, s, n + 10) for k, s, n in expected.values() if k < 3})
    rowops.sql(lake, "DELETE FROM db.t WHERE k = 14 OR v = '1'")
    expected = {k: r for k, r in expected.items() if k != 14 and r[1] != "1"}
    out = rowops.sql(lake, "ALTER TABLE db.t ADD PARTITION FIELD truncate(4, k) AS k4")
    assert "k4=truncate[4](k)" in str(out)
    lake.sql("UPDATE db.t SET n = -1 WHERE k = 0")
    expected[0] = (0, expected[0][1], -1)

    rows = lake.sql("SELECT k, v, n FROM db.t ORDER BY k").collect()
    assert [tuple(r) for r in rows] == sorted(expected.values())
    joined = lake.sql("SELECT count(*) AS c FROM db.t JOIN smoke_src v ON db.t.k = v.k").first()
    assert joined is not None and joined.c == len([k for k in expected if 5 <= k < 15])
    old = lake.sql(f"SELECT count(*) AS c FROM db.t VERSION AS OF {first}").first()
    assert old is not None and old.c == 10
    return assert_readers_agree(lake.table("db.t"), expected.values(), COLUMNS, java)
