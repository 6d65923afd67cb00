"""Pipeline configs (strict TOML validation) and the batch index of the lake log; no Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from rowops.catalog.batches import BatchIndex, batch_record
from rowops.catalog.log import LakeLog, TableEntry
from rowops.errors import PipelineConfigError
from rowops.pipeline import load_config, parse_config
from rowops.pipeline.maintenance import exceeded

GOOD = """
[pipeline]
id = "sales"
batch_id = "2024-01-01"
lake = "lake"
storage_options = { "s3.region" = "eu-west-1" }

[source]
format = "csv"
path = "landing/{batch_id}"
options = { header = true, inferSchema = "true" }

[source.cdc]
op_column = "op"
order_by = "seq"
insert = ["c"]
update = ["u", "r"]
delete = ["d"]

[[targets]]
table = "db.sales"
keys = ["id"]
columns = { amount = "cast(amount_cents as decimal(12,2)) / 100" }
strategy = "position-delete"

[[targets]]
table = "db.sales_copy"
keys = ["id"]
where = "region = 'EU'"

[maintenance]
mode = "run"
actions = ["compact_position_deletes", "expire_snapshots"]
expire_older_than_hours = 24
retain_last = 3
thresholds = { delete_files = 10, read_overhead_ratio = 0.5 }

[spark]
"spark.sql.shuffle.partitions" = 8
"spark.sql.adaptive.enabled" = true
"""


def test_a_full_config_parses_into_frozen_dataclasses() -> None:
    config = parse_config(GOOD, "good.toml")
    assert (config.id, config.batch_id, config.lake) == ("sales", "2024-01-01", "lake")
    assert config.storage_options == {"s3.region": "eu-west-1"}
    assert config.source.format == "csv" and config.source.options == {
        "header": "true",
        "inferSchema": "true",
    }
    assert config.source.path_for("b7") == "landing/b7" and config.source.where_for("b7") is None
    table = parse_config(
        '[pipeline]\nid = "t"\n[source]\nformat = "table"\ntable = "db.staging"\nwhere = "batch = \'{batch_id}\'"\n'
        '[[targets]]\ntable = "db.t"\nkeys = ["k"]\n'
    )
    assert table.source.where_for("b7") == "batch = 'b7'" and table.source.path_for("b7") is None
    assert config.source.cdc is not None
    assert config.source.cdc.code_map() == {"c": "insert", "u": "update", "r": "update", "d": "delete"}
    first, second = config.targets
    assert first.keys == ("id",) and first.strategy == "position-delete" and "amount" in first.columns
    assert second.strategy == "auto" and second.where == "region = 'EU'"
    assert config.maintenance.mode == "run" and config.maintenance.retain_last == 3
    assert config.maintenance.thresholds == {"delete_files": 10.0, "read_overhead_ratio": 0.5}
    assert config.spark == {"spark.sql.shuffle.partitions": "8", "spark.sql.adaptive.enabled": "true"}
    with pytest.raises(AttributeError):
        config.id = "other"  # type: ignore[misc]


def _broken(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new, 1)


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        (
            _broken('lake = "lake"', 'lake = "lake"\nlaek = 1'),
            ["unknown key [pipeline].laek", "allowed keys: batch_id, id"],
        ),
        (
            _broken('format = "csv"', 'format = "csv"\npaths = "x"'),
            ["unknown key [source].paths", "path, table"],
        ),
        (_broken('order_by = "seq"', 'order = "seq"'), ["unknown key [source.cdc].order", "order_by"]),
        (_broken('where = "region', 'were = "region'), ["unknown key [[targets]][1].were", "where"]),
        (_broken("retain_last = 3", "retain = 3"), ["unknown key [maintenance].retain", "retain_last"]),
        (
            _broken("[spark]", "[sparkk]"),
            ["unknown key the file.sparkk", "maintenance, pipeline, source, spark"],
        ),
        (_broken('id = "sales"\n', ""), ["missing required field [pipeline].id (a string)"]),
        (_broken('table = "db.sales"\n', ""), ["missing required field [[targets]][0].table"]),
        (_broken('op_column = "op"\n', ""), ["missing required field [source.cdc].op_column"]),
        (
            _broken('keys = ["id"]', 'keys = "id"'),
            ["[[targets]][0].keys must be a list", "got a string 'id'"],
        ),
        (_broken('keys = ["id"]', "keys = []"), ["[[targets]][0].keys must name at least one key column"]),
        (
            _broken('batch_id = "2024-01-01"', "batch_id = 20240101"),
            ["[pipeline].batch_id must be a string", "integer"],
        ),
        (_broken("retain_last = 3", 'retain_last = "3"'), ["[maintenance].retain_last must be an integer"]),
        (
            _broken('format = "csv"', 'format = "avro"'),
            ["[source].format must be one of parquet, csv, json, table"],
        ),
        (
            _broken('strategy = "position-delete"', 'strategy = "fast"'),
            ["[[targets]][0].strategy must be one of auto"],
        ),
        (
            _broken('mode = "run"', 'mode = "sometimes"'),
            ["[maintenance].mode must be one of off, advise, run"],
        ),
        (
            _broken('actions = ["compact_position_deletes"', 'actions = ["vacuum"'),
            ["unknown action 'vacuum'"],
        ),
        (
            _broken("delete_files = 10", 'delete_files = "10"'),
            ["[maintenance.thresholds].delete_files must be a number"],
        ),
        (
            _broken('delete = ["d"]', 'delete = ["u"]'),
            ["operation code 'u' is listed for more than one operation"],
        ),
        (_broken('path = "landing/{batch_id}"', 'table = "db.src"'), ['format = "csv" needs path']),
        (_broken('table = "db.sales_copy"', 'table = "db.sales"'), ["target table db.sales is listed twice"]),
        (
            _broken('columns = { amount = "cast', 'columns = { amount = 3, x = "cast'),
            ["columns.amount must be a string"],
        ),
        (
            _broken('"spark.sql.adaptive.enabled" = true', '"spark.sql.adaptive.enabled" = [1]'),
            ["[spark].spark.sql.adaptive.enabled"],
        ),
        ("[pipeline\nid=1", ["not valid TOML"]),
        ('[pipeline]\nid = "x"\n[source]\nformat = "json"\npath = "p"\n', ["missing [[targets]]"]),
        (
            '[pipeline]\nid = "x"\n[[targets]]\ntable = "a.b"\nkeys = ["k"]\n',
            ["missing required section [source]"],
        ),
    ],
)
def test_bad_configs_name_the_field_and_what_is_expected(text: str, needles: list[str]) -> None:
    with pytest.raises(PipelineConfigError) as caught:
        parse_config(text, "conf/p.toml")
    message = str(caught.value)
    assert message.startswith("conf/p.toml: ")
    assert "\nHelp: " in message
    for needle in needles:
        assert needle in message, message


def test_load_config_names_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PipelineConfigError, match=r"cannot read pipeline config .*nope\.toml"):
        load_config(tmp_path / "nope.toml")
    (tmp_path / "p.toml").write_text(GOOD)
    assert load_config(tmp_path / "p.toml").path == str(tmp_path / "p.toml")


def test_thresholds_compare_the_measured_debt() -> None:
    debt = {"delete_files": 12, "small_files": 1}
    assert exceeded(debt, {"delete_files": 10, "small_files": 4}) == {"delete_files": 12}
    assert exceeded(debt, {"delete_files": 12}) == {}  # crossed only above the threshold


# -- the batch index ---------------------------------------------------------------------------------
class CountingLog(LakeLog):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.reads: list[int] = []

    def read(self, version: int):  # type: ignore[no-untyped-def]
        self.reads.append(version)
        return super().read(version)


def _commit(log: LakeLog, n: int, batch: dict[str, str] | None = None) -> int:
    record = {"id": f"tx{n}", **({"batch": batch} if batch else {})}
    return log.commit(log.latest(), {f"db.t{n % 3}": TableEntry(f"/m{n}.json", "u")}, record).version


def test_the_batch_index_reads_only_versions_since_the_last_run(tmp_path: Path) -> None:
    log = CountingLog(tmp_path)
    index = BatchIndex(log)
    for n in range(20):
        _commit(log, n)
    first = _commit(log, 20, batch_record("p", "b1"))
    index.record("p", "b1", first)
    for n in range(21, 30):  # other writers
        _commit(log, n)
    log.reads.clear()
    assert index.find("p", "b1", log.latest()) == first
    assert min(log.reads) >= first, "versions before the pipeline's last run were read again"
    log.reads.clear()
    latest = log.latest()
    assert index.find("p", "b2", latest) is None
    assert min(log.reads) > first, "only versions since the pipeline's last successful run are read"
    assert index.find("other", "b1", latest) is None  # a new pipeline reads the log
    index.catch_up("other", latest.version)  # what its first successful run's record() does
    log.reads.clear()
    assert index.find("other", "b1", latest) is None
    assert log.reads == []


def test_a_lost_index_entry_is_recovered_from_the_log(tmp_path: Path) -> None:
    """A crash between the commit and the index write: the next run finds the batch in the log."""
    log = LakeLog(tmp_path)
    _commit(log, 0)
    committed = _commit(log, 1, batch_record("p", "b1"))  # committed, never indexed
    _commit(log, 2, batch_record("q", "b1"))
    index = BatchIndex(log)
    assert index.find("p", "b1", log.latest()) == committed
    assert index.find("q", "b1", log.latest()) == 3
    assert index.find("p", "b1", log.read(1)) is None  # not committed as of version 1
    assert index.indexed_up_to("p") == 0  # find writes nothing (a skipped run changes no file)
    index.record("p", "b1", committed)
    assert index.indexed_up_to("p") == 2


def test_an_index_entry_is_verified_against_the_log(tmp_path: Path) -> None:
    """An entry naming a version that does not carry the batch (hand-edited, or a bug) is not trusted."""
    log = LakeLog(tmp_path)
    other = _commit(log, 0)
    index = BatchIndex(log)
    index._put_entry("p", "b1", other)
    index.storage.put(index._dir("p") + "_indexed", b"1")
    assert index.find("p", "b1", log.latest()) is None


def test_the_shipped_and_documented_configs_parse() -> None:
    root = Path(__file__).resolve().parents[2]
    shipped = load_config(root / "conf" / "store_sales_pipeline.toml")
    guide = (root / "docs" / "guide" / "pipelines.md").read_text()
    documented = parse_config(guide.split("```toml\n", 1)[1].split("```", 1)[0], "pipelines.md")
    for config in (shipped, documented):
        assert config.id == "store_sales_changes" and config.source.cdc is not None
        assert config.targets[0].keys == ("ss_ticket_number", "ss_item_sk")
        assert config.maintenance.thresholds == {"delete_files": 8.0}
