"""Pipeline configuration: a TOML file parsed into frozen dataclasses, strictly (no Spark, no I/O but the file).

>>> config = parse_config('''
... [pipeline]
... id = "orders"
... [source]
... format = "parquet"
... path = "changes/{batch_id}"
... [[targets]]
... table = "db.orders"
... keys = ["id"]
... ''', "example.toml")
>>> config.targets[0].strategy, config.source.path_for("2024-01-01"), config.maintenance.mode
('auto', 'changes/2024-01-01', 'off')
>>> parse_config('[pipeline]\\nid = "x"\\nbatch = 1\\n', "bad.toml")
Traceback (most recent call last):
...
rowops.errors.PipelineConfigError: bad.toml: unknown key [pipeline].batch; allowed keys: batch_id, id, lake, storage_options
Help: Fix the named field of the pipeline's TOML file (see docs/guide/pipelines.md).

Every section rejects unknown keys (naming the key and the allowed ones); every field is checked
for presence and type (naming the field and the expected type). See docs/guide/pipelines.md.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rowops.errors import PipelineConfigError
from rowops.pipeline.metrics import DEBT_FIELDS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

SOURCE_FORMATS = ("parquet", "csv", "json", "table")
TABLE_CHANGES = "table_changes"  # [source] table_changes = "db.silver": a rowops table's change feed
# a change feed's columns as a [source.cdc] (``Table.changes(net=True)``; pre-images are left out)
FEED_CDC_COLUMNS = ("_change_type", "_change_ordinal")
STRATEGIES = ("auto", "copy-on-write", "position-delete", "equality-delete")
# "add-columns": source columns a target lacks are added to it (optional, in the batch's transaction)
SCHEMA_EVOLUTION = ("none", "add-columns")
MAINTENANCE_MODES = ("off", "advise", "run")
MAINTENANCE_ACTIONS = (
    "compact_position_deletes",
    "convert_equality_deletes",
    "compact",
    "rewrite_manifests",
    "expire_snapshots",
    "remove_orphans",
)
DEFAULT_ACTIONS = ("compact_position_deletes", "convert_equality_deletes", "compact")
_TYPE_NAMES = {str: "a string", bool: "a boolean", int: "an integer", float: "a number", list: "a list"}


@dataclass(frozen=True)
class CdcConfig:
    """A change feed: an operation column with its codes, and the column that orders changes of a key."""

    op_column: str
    order_by: str
    insert: tuple[str, ...] = ("I",)
    update: tuple[str, ...] = ("U",)
    delete: tuple[str, ...] = ("D",)

    def code_map(self) -> dict[str, str]:
        """Operation code → ``insert`` / ``update`` / ``delete``."""
        return {
            **{c: "insert" for c in self.insert},
            **{c: "update" for c in self.update},
            **{c: "delete" for c in self.delete},
        }


@dataclass(frozen=True)
class SourceConfig:
    """Where a batch's rows come from: a Parquet/CSV/JSON directory, a rowops table, or a rowops
    table's change feed (``format == "table_changes"``: the changes since the pipeline's last batch)."""

    format: str
    path: str | None = None
    table: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    cdc: CdcConfig | None = None
    where: str | None = None

    def path_for(self, batch_id: str) -> str | None:
        """The directory of one batch (``{batch_id}`` in ``path`` is replaced)."""
        return None if self.path is None else self.path.replace("{batch_id}", batch_id)

    def where_for(self, batch_id: str) -> str | None:
        """The batch's filter on the source (``{batch_id}`` in ``where`` is replaced), e.g. of a table."""
        return None if self.where is None else self.where.replace("{batch_id}", batch_id)


@dataclass(frozen=True)
class TargetConfig:
    """One table the batch is merged into."""

    table: str
    keys: tuple[str, ...]
    columns: Mapping[str, str] = field(default_factory=dict)
    where: str | None = None
    strategy: str = "auto"
    schema_evolution: str = "none"


@dataclass(frozen=True)
class MaintenanceConfig:
    """What to do when a target's health report crosses a threshold after the commit."""

    mode: str = "off"
    thresholds: Mapping[str, float] = field(default_factory=dict)
    actions: tuple[str, ...] = DEFAULT_ACTIONS
    expire_older_than_hours: float | None = None
    retain_last: int = 1


@dataclass(frozen=True)
class PipelineConfig:
    """A whole pipeline: one batch is read from ``source`` and merged into every target at once."""

    id: str
    source: SourceConfig
    targets: tuple[TargetConfig, ...]
    batch_id: str | None = None
    lake: str | None = None
    storage_options: Mapping[str, str] = field(default_factory=dict)
    maintenance: MaintenanceConfig = field(default_factory=MaintenanceConfig)
    spark: Mapping[str, str] = field(default_factory=dict)
    path: str = "<config>"


class _Section:
    """One TOML table being read: every key must be allowed and of the expected type."""

    def __init__(self, where: str, name: str, data: object, allowed: tuple[str, ...]) -> None:
        self.where, self.name = where, name
        if not isinstance(data, dict):
            self.fail(f"{name} must be a table (a [section]), got {_kind(data)}")
        self.data: dict[str, Any] = data  # type: ignore[assignment]
        unknown = sorted(set(self.data) - set(allowed))
        if unknown and allowed:
            self.fail(f"unknown key {name}.{unknown[0]}; allowed keys: {', '.join(sorted(allowed))}")

    def fail(self, message: str) -> None:
        raise PipelineConfigError(f"{self.where}: {message}")

    def get(self, key: str, kind: type, required: bool = False, default: Any = None) -> Any:
        if key not in self.data:
            if required:
                self.fail(f"missing required field {self.name}.{key} ({_TYPE_NAMES[kind]})")
            return default
        value = self.data[key]
        ok = isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value, ok = float(value), True
        if not ok:
            self.fail(f"{self.name}.{key} must be {_TYPE_NAMES[kind]}, got {_kind(value)}")
        if kind is str and not value.strip():
            self.fail(f"{self.name}.{key} must not be empty")
        return value

    def choice(self, key: str, choices: tuple[str, ...], default: str) -> str:
        value: str = self.get(key, str, default=default)
        if value not in choices:
            self.fail(f"{self.name}.{key} must be one of {', '.join(choices)}, got {value!r}")
        return value

    def strings(self, key: str, required: bool = False, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        values = self.get(key, list, required, list(default))
        if not all(isinstance(v, str) and v for v in values):
            self.fail(f"{self.name}.{key} must be a list of non-empty strings, got {values!r}")
        return tuple(values)

    def mapping(self, key: str, scalars: bool = True) -> dict[str, str]:
        """A sub-table of string values (numbers and booleans allowed and written as Spark does)."""
        value = self.get(key, dict, default={})
        out = {}
        for k, v in value.items():
            if isinstance(v, str) or (scalars and isinstance(v, int | float | bool)):
                out[str(k)] = str(v).lower() if isinstance(v, bool) else str(v)
            else:
                self.fail(f"{self.name}.{key}.{k} must be a string, got {_kind(v)}")
        return out


def _kind(value: object) -> str:
    names = {str: "a string", bool: "a boolean", int: "an integer", float: "a number"}
    names.update({list: "a list", dict: "a table"})
    return f"{names.get(type(value), type(value).__name__)} {value!r}"


def _cdc(where: str, data: object) -> CdcConfig:
    s = _Section(where, "[source.cdc]", data, ("op_column", "order_by", "insert", "update", "delete"))
    cdc = CdcConfig(
        op_column=s.get("op_column", str, required=True),
        order_by=s.get("order_by", str, required=True),
        insert=s.strings("insert", default=("I",)),
        update=s.strings("update", default=("U",)),
        delete=s.strings("delete", default=("D",)),
    )
    codes = [*cdc.insert, *cdc.update, *cdc.delete]
    repeated = sorted({c for c in codes if codes.count(c) > 1})
    if repeated:
        s.fail(f"operation code {repeated[0]!r} is listed for more than one operation in [source.cdc]")
    return cdc


def _source(where: str, data: object) -> SourceConfig:
    s = _Section(
        where, "[source]", data, ("format", "path", "table", "options", "cdc", "where", TABLE_CHANGES)
    )
    if TABLE_CHANGES in s.data:
        return _table_changes(s)
    fmt = s.get("format", str, required=True)
    if fmt not in SOURCE_FORMATS:
        s.fail(f"[source].format must be one of {', '.join(SOURCE_FORMATS)}, got {fmt!r}")
    path, table = s.get("path", str), s.get("table", str)
    if fmt == "table" and (table is None or path is not None):
        s.fail('[source] with format = "table" needs table = "namespace.name" (and no path)')
    if fmt != "table" and (path is None or table is not None):
        s.fail(f'[source] with format = "{fmt}" needs path = "<directory>" (and no table)')
    cdc = _cdc(where, s.data["cdc"]) if "cdc" in s.data else None
    return SourceConfig(fmt, path, table, s.mapping("options"), cdc, s.get("where", str))


def _table_changes(s: _Section) -> SourceConfig:
    """``table_changes = "db.silver"``: the net changes of that table since this pipeline's last batch."""
    table = s.get(TABLE_CHANGES, str, required=True)
    extra = sorted(k for k in s.data if k not in (TABLE_CHANGES, "where"))
    if extra:
        s.fail(f"[source] with table_changes takes no {', '.join(extra)} (only where)")
    op, order = FEED_CDC_COLUMNS
    cdc = CdcConfig(op, order, insert=("insert",), update=("update_postimage",), delete=("delete",))
    return SourceConfig(TABLE_CHANGES, None, table, {}, cdc, s.get("where", str))


def _target(where: str, index: int, data: object) -> TargetConfig:
    name = f"[[targets]][{index}]"
    s = _Section(where, name, data, ("table", "keys", "columns", "where", "strategy", "schema_evolution"))
    keys = s.strings("keys", required=True)
    if not keys:
        s.fail(f"{name}.keys must name at least one key column")
    return TargetConfig(
        table=s.get("table", str, required=True),
        keys=keys,
        columns=s.mapping("columns", scalars=False),
        where=s.get("where", str),
        strategy=s.choice("strategy", STRATEGIES, "auto"),
        schema_evolution=s.choice("schema_evolution", SCHEMA_EVOLUTION, "none"),
    )


def _maintenance(where: str, data: object) -> MaintenanceConfig:
    allowed = ("mode", "thresholds", "actions", "expire_older_than_hours", "retain_last")
    s = _Section(where, "[maintenance]", data, allowed)
    values = {}
    for key, value in s.get("thresholds", dict, default={}).items():
        if key not in DEBT_FIELDS:
            s.fail(f"unknown key [maintenance.thresholds].{key}; allowed keys: {', '.join(DEBT_FIELDS)}")
        if isinstance(value, bool) or not isinstance(value, int | float):
            s.fail(f"[maintenance.thresholds].{key} must be a number, got {_kind(value)}")
        values[str(key)] = float(value)
    actions = s.strings("actions", default=DEFAULT_ACTIONS)
    for action in actions:
        if action not in MAINTENANCE_ACTIONS:
            s.fail(
                f"[maintenance].actions: unknown action {action!r}; allowed: {', '.join(MAINTENANCE_ACTIONS)}"
            )
    retain = s.get("retain_last", int, default=1)
    if retain < 1:
        s.fail(f"[maintenance].retain_last must be at least 1, got {retain}")
    return MaintenanceConfig(
        mode=s.choice("mode", MAINTENANCE_MODES, "off"),
        thresholds=values,
        actions=actions,
        expire_older_than_hours=s.get("expire_older_than_hours", float),
        retain_last=retain,
    )


def _spark_settings(section: _Section) -> dict[str, str]:
    out = {}
    for key, value in section.data.items():
        if not isinstance(value, str | int | float | bool):
            section.fail(f"[spark].{key} must be a string, number or boolean, got {_kind(value)}")
        out[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


def parse_config(text: str, where: str = "<config>") -> PipelineConfig:
    """Parse and validate a pipeline config (TOML text); ``where`` names it in errors."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PipelineConfigError(f"{where}: not valid TOML: {exc}") from None
    top = _Section(where, "the file", data, ("pipeline", "source", "targets", "maintenance", "spark"))
    if "pipeline" not in top.data:
        top.fail("missing required section [pipeline]")
    head = _Section(where, "[pipeline]", top.data["pipeline"], ("id", "batch_id", "lake", "storage_options"))
    pipeline_id: str = head.get("id", str, required=True)
    for required in ("source", "targets"):
        if required not in top.data:
            top.fail("missing [[targets]]" if required == "targets" else "missing required section [source]")
    targets = top.data["targets"]
    if not isinstance(targets, list) or not targets:
        top.fail("[[targets]] must be one or more tables of targets")
    parsed = tuple(_target(where, i, t) for i, t in enumerate(targets))
    names = [t.table for t in parsed]
    if len(set(names)) != len(names):
        top.fail(f"target table {sorted(n for n in names if names.count(n) > 1)[0]} is listed twice")
    spark = _Section(where, "[spark]", top.data.get("spark", {}), ())  # only a table; keys are free
    return PipelineConfig(
        id=pipeline_id,
        source=_source(where, top.data["source"]),
        targets=parsed,
        batch_id=head.get("batch_id", str),
        lake=head.get("lake", str),
        storage_options=head.mapping("storage_options"),
        maintenance=_maintenance(where, top.data.get("maintenance", {})),
        spark=_spark_settings(spark),
        path=where,
    )


def load_config(path: str | Path) -> PipelineConfig:
    """Read and validate the pipeline config file at ``path``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PipelineConfigError(f"cannot read pipeline config {path}: {exc}") from None
    return parse_config(text, str(path))
