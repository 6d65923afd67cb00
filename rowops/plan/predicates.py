"""File pruning for UPDATE and DELETE: a Spark SQL ``WHERE`` evaluated against manifest metadata.

The predicate is split into its top-level ``AND`` conjuncts; each simple comparison of a column with a
literal (``=``, ``<>``/``!=``, ``<``, ``<=``, ``>``, ``>=``, ``<=>``, ``IS [NOT] NULL``, ``IN (...)``)
becomes a pyiceberg expression. Anything else (``OR`` at the top level, functions, arithmetic, other
types) is left out: the conjunction of what was translated is implied by the predicate, so a file it
cannot match (partition projection, column bounds) holds no matching row (*inclusive* pruning). Only
when every conjunct was translated can the *strict* evaluators say that every row of a file matches
(then a DELETE removes the file by metadata alone).

SQL's NULL rule is kept exactly: a comparison with NULL is not true, so ``x <> 5`` becomes
``x != 5 AND x IS NOT NULL`` (Iceberg's ``not_equal`` is true for NULL). Literals are translated
only where Spark and Iceberg compare them the same way: integers on int/long columns, strings on
string columns, ``'YYYY-MM-DD'`` (or ``DATE '...'``) on date columns, ``TRUE``/``FALSE`` on booleans.
Floating point (NaN ordering), decimals and timestamps (session time zones) are never translated.

>>> from pyiceberg.schema import Schema
>>> from pyiceberg.types import IntegerType, NestedField, StringType, DoubleType
>>> schema = Schema(NestedField(1, "k", IntegerType()), NestedField(2, "s", StringType()),
...                 NestedField(3, "x", DoubleType()))
>>> p = translate("k >= 10 AND `s` <> 'a'", schema)
>>> p.complete, str(p.expression).count("NotNull")
(True, 1)
>>> translate("K IN (1, 2) AND x > 1.5", schema).complete  # x is a double: left out
False
>>> translate("k = 1 OR s = 'a'", schema).expression
AlwaysTrue()
>>> translate("(k = 1 AND s IS NULL) AND 3 > k", schema).complete
True
>>> translate("k % 2 = 0", schema).complete
False
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyiceberg.expressions import (
    AlwaysTrue,
    And,
    BooleanExpression,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNull,
    LessThan,
    LessThanOrEqual,
    NotEqualTo,
    NotNull,
)
from pyiceberg.expressions.visitors import (
    _InclusiveMetricsEvaluator,
    _StrictMetricsEvaluator,
    expression_evaluator,
    extract_field_ids,
    inclusive_projection,
    strict_projection,
)
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.typedef import Record
from pyiceberg.types import BooleanType, DateType, IntegerType, LongType, NestedField, StringType

from rowops.meta.files import LiveFile
from rowops.meta.tables import struct_path

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'[^'\\]*')|(?P<quoted>`(?:[^`]|``)+`)|(?P<num>-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?[a-zA-Z]*)"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<op><=>|<=|>=|<>|!=|==|[=<>(),.+*/%|&^~-])|(?P<other>\S))"
)
_FLIP = {"=": "=", "<": ">", ">": "<", "<=": ">=", ">=": "<=", "<>": "<>"}
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_INT_RANGE = {IntegerType(): (-(2**31), 2**31 - 1), LongType(): (-(2**63), 2**63 - 1)}


@dataclass(frozen=True)
class Token:
    kind: str  # str, quoted, num, word, op, other; path (a dotted name: ``s.c1``)
    text: str

    def is_word(self, *words: str) -> bool:
        return self.kind == "word" and self.text.upper() in words


@dataclass(frozen=True)
class Predicate:
    """The translated part of a ``WHERE``: ``complete`` when it is the whole predicate."""

    expression: BooleanExpression
    complete: bool


def _tokens(sql: str) -> list[Token] | None:
    out: list[Token] = []
    for m in _TOKEN.finditer(sql):
        kind = m.lastgroup or "other"
        if kind == "other":
            return None
        out.append(Token(kind, m.group(kind)))
    return _paths(out)


def _name(token: Token) -> str:
    return token.text[1:-1].replace("``", "`") if token.kind == "quoted" else token.text


def _paths(tokens: list[Token]) -> list[Token]:
    """``s.c1`` (or ```s`.`c1```) as one ``path`` token naming a field of a struct.

    >>> [(t.kind, t.text) for t in _tokens("`s`.c1 = 1") or []]
    [('path', 's.c1'), ('op', '='), ('num', '1')]
    """
    out: list[Token] = []
    for t in tokens:
        named = t.kind in ("word", "quoted")
        if named and len(out) >= 2 and out[-1].text == "." and out[-2].kind in ("word", "quoted", "path"):
            out[-2:] = [Token("path", f"{_name(out[-2])}.{_name(t)}")]
        else:
            out.append(t)
    return out


def _conjuncts(tokens: list[Token]) -> list[list[Token]] | None:
    """Top-level ``AND`` operands (outer parentheses removed); None when an ``OR`` is at the top."""
    while tokens and tokens[0].text == "(" and _closing(tokens, 0) == len(tokens) - 1:
        tokens = tokens[1:-1]
    parts: list[list[Token]] = [[]]
    depth = 0
    for t in tokens:
        depth += (t.text == "(") - (t.text == ")")
        if depth < 0:
            return None
        if depth == 0 and t.is_word("OR"):
            return None
        if depth == 0 and t.is_word("AND"):
            parts.append([])
        else:
            parts[-1].append(t)
    out: list[list[Token]] = []
    for part in parts:
        nested = _conjuncts(part) if part and part[0].text == "(" else None
        out.extend(nested if nested is not None and len(nested) > 1 else [part])
    return out


def _closing(tokens: list[Token], start: int) -> int:
    depth = 0
    for i in range(start, len(tokens)):
        depth += (tokens[i].text == "(") - (tokens[i].text == ")")
        if depth == 0:
            return i
    return -1


def _column(token: Token, schema: Schema, case_sensitive: bool) -> NestedField | None:
    """The primitive column (or field of a struct, named by its dotted path) ``token`` names."""
    if token.kind in ("quoted", "path"):
        name = _name(token)
    elif token.kind == "word" and not token.is_word("NULL", "TRUE", "FALSE", "DATE", "NOT", "IN", "IS"):
        name = token.text
    else:
        return None
    if not _known(schema, name, case_sensitive, token.kind == "path"):
        return None
    field = schema.find_field(name, case_sensitive)
    if not field.field_type.is_primitive or struct_path(schema, field.field_id) is None:
        return None
    full = schema.find_column_name(field.field_id) or name  # the expression names the whole path
    return NestedField(field.field_id, full, field.field_type, required=field.required)


def _known(schema: Schema, name: str, case_sensitive: bool, path: bool) -> bool:
    names = schema.column_names if case_sensitive else [n.lower() for n in schema.column_names]
    return (name if case_sensitive else name.lower()) in names and ("." in name) == path


def _literal(tokens: list[Token], field: NestedField) -> tuple[object, int] | None:
    """The literal at the head of ``tokens`` as a value of ``field``'s type, and the tokens it used."""
    if not tokens:
        return None
    t, ftype = tokens[0], field.field_type
    if isinstance(ftype, (IntegerType, LongType)) and t.kind == "num" and re.fullmatch(r"-?\d+", t.text):
        low, high = _INT_RANGE[ftype]
        return (int(t.text), 1) if low <= int(t.text) <= high else None
    if ftype == StringType() and t.kind == "str":
        return t.text[1:-1], 1  # no quote or backslash inside (Spark joins 'a''b' into 'ab')
    if ftype == DateType():
        used = 2 if t.is_word("DATE") else 1
        text = tokens[used - 1].text if len(tokens) >= used else ""
        if tokens[used - 1].kind == "str" and _DATE.fullmatch(text[1:-1]):
            return text[1:-1], used
        return None
    if ftype == BooleanType() and t.is_word("TRUE", "FALSE"):
        return t.text.upper() == "TRUE", 1
    return None


def _comparison(name: str, op: str, value: object) -> BooleanExpression | None:
    ops: dict[str, Callable[..., BooleanExpression]] = {
        "=": EqualTo, "==": EqualTo, "<=>": EqualTo, "<": LessThan, "<=": LessThanOrEqual,
        ">": GreaterThan, ">=": GreaterThanOrEqual,
    }  # fmt: skip
    if op in ("<>", "!="):
        not_equal: Callable[..., BooleanExpression] = NotEqualTo
        return And(not_equal(term=name, literal=value), NotNull(term=name))
    return ops[op](term=name, literal=value) if op in ops else None


def _conjunct(tokens: list[Token], schema: Schema, case_sensitive: bool) -> BooleanExpression | None:
    """One conjunct as a pyiceberg expression, or None when it is not a simple comparison."""
    if len(tokens) < 3:
        return None
    field = _column(tokens[0], schema, case_sensitive)
    if field is not None:
        return _column_first(field, tokens[1:])
    field = _column(tokens[-1], schema, case_sensitive)  # literal op column
    if field is None or len(tokens) < 3:
        return None
    op = tokens[-2].text
    value = _literal(tokens[:-2], field)
    if value is None or value[1] != len(tokens) - 2 or op not in _FLIP:
        return None
    return _comparison(field.name, _FLIP[op], value[0])


def _column_first(field: NestedField, rest: list[Token]) -> BooleanExpression | None:
    words = [t.text.upper() if t.kind == "word" else t.text for t in rest]
    if words == ["IS", "NULL"] or words == ["<=>", "NULL"]:
        return IsNull(term=field.name)
    if words == ["IS", "NOT", "NULL"]:
        return NotNull(term=field.name)
    if words[:2] == ["IN", "("] and words[-1] == ")":
        values = []
        items = rest[2:-1]
        for i in range(0, len(items), 2):
            value = _literal(items[i : i + 1], field)
            if value is None or (i + 1 < len(items) and items[i + 1].text != ","):
                return None
            values.append(value[0])
        return In(term=field.name, literals=values) if values else None
    value = _literal(rest[1:], field)
    if value is None or value[1] != len(rest) - 1:
        return None
    return _comparison(field.name, rest[0].text, value[0])


def translate(where: str | None, schema: Schema, case_sensitive: bool = False) -> Predicate:
    """The pyiceberg expression implied by a Spark SQL ``WHERE`` (None: every row)."""
    if where is None:
        return Predicate(AlwaysTrue(), True)
    tokens = _tokens(where)
    parts = _conjuncts(tokens) if tokens else None
    if not parts:
        return Predicate(AlwaysTrue(), False)
    translated = [_conjunct(p, schema, case_sensitive) for p in parts]
    kept = [e for e in translated if e is not None]
    expression: BooleanExpression = AlwaysTrue()
    for e in kept:
        expression = e if isinstance(expression, AlwaysTrue) else And(expression, e)
    return Predicate(expression, len(kept) == len(translated))


@dataclass(frozen=True)
class FileSelector:
    """Evaluators of one predicate over a table's files (built once, used per file)."""

    may_match: Callable[[LiveFile], bool]
    all_match: Callable[[LiveFile], bool]


def selector(predicate: Predicate, metadata: TableMetadata, case_sensitive: bool = False) -> FileSelector:
    """Inclusive (may a row match?) and strict (do all rows match?) tests of a data file's metadata:
    its partition through the spec's projections, its column metrics through pyiceberg's evaluators."""
    schema, expression = metadata.schema(), predicate.expression
    if isinstance(expression, AlwaysTrue):
        return FileSelector(lambda f: True, lambda f: predicate.complete)
    inclusive = _InclusiveMetricsEvaluator(schema, expression, case_sensitive, include_empty_files=True)
    strict = _StrictMetricsEvaluator(schema, expression, case_sensitive)
    # pyiceberg 0.12's strict metrics evaluator finds top-level columns only (a struct field raises)
    top_level = {f.field_id for f in schema.fields}
    strict_metrics = extract_field_ids(strict.expr) <= top_level
    specs = metadata.specs()
    partition_may = {
        i: _partition_test(
            schema, s, inclusive_projection(schema, s, case_sensitive)(expression), case_sensitive
        )
        for i, s in specs.items()
    }
    partition_all = {
        i: _partition_test(
            schema, s, strict_projection(schema, s, case_sensitive)(expression), case_sensitive
        )
        for i, s in specs.items()
        if s.fields
    }

    def may(f: LiveFile) -> bool:
        by_partition = partition_may.get(f.spec_id)
        return (by_partition is None or by_partition(f)) and bool(inclusive.eval(f.data_file))

    def every(f: LiveFile) -> bool:
        if not predicate.complete:
            return False
        by_partition = partition_all.get(f.spec_id)
        return bool(by_partition is not None and by_partition(f)) or (
            strict_metrics and bool(strict.eval(f.data_file))
        )

    return FileSelector(may, every)


def _partition_test(
    schema: Schema, spec: object, projected: BooleanExpression, case_sensitive: bool
) -> Callable[[LiveFile], bool]:
    partition_schema = Schema(*spec.partition_type(schema).fields)  # type: ignore[attr-defined]
    evaluate = expression_evaluator(partition_schema, projected, case_sensitive)
    return lambda f: bool(evaluate(Record(*f.partition)))


def candidates(
    where: str | None, files: Sequence[LiveFile], metadata: TableMetadata, case_sensitive: bool = False
) -> tuple[list[LiveFile], list[LiveFile]]:
    """The data files that may hold a row matching ``where``, and those of them whose every row does."""
    select = selector(translate(where, metadata.schema(), case_sensitive), metadata, case_sensitive)
    kept = [f for f in files if select.may_match(f)]
    return kept, [f for f in kept if select.all_match(f)]
