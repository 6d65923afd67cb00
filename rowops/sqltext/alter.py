"""``ALTER TABLE`` text of Iceberg's Spark SQL extensions for partition and sort order evolution.

sqlglot does not parse Iceberg's extensions, so this small hand parser reads the subset rowops runs:

* ``ALTER TABLE ns.t ADD PARTITION FIELD <term> [AS name]``
* ``ALTER TABLE ns.t DROP PARTITION FIELD <term | name>``
* ``ALTER TABLE ns.t REPLACE PARTITION FIELD <term | name> WITH <term> [AS name]``
* ``ALTER TABLE ns.t WRITE [LOCALLY] ORDERED BY col [ASC|DESC] [NULLS FIRST|LAST], ...``
* ``ALTER TABLE ns.t WRITE DISTRIBUTED BY PARTITION [LOCALLY ORDERED BY ...]``
* ``ALTER TABLE ns.t WRITE UNORDERED``

A term is a column or ``bucket(N, col)``, ``truncate(W, col)`` (either argument order),
``years/months/days/hours(col)`` (or the singular forms), ``void(col)``. As in Iceberg, ``ORDERED BY``
sets ``write.distribution-mode`` to ``range``, ``LOCALLY ORDERED BY`` and ``UNORDERED`` to ``none``,
``DISTRIBUTED BY PARTITION`` to ``hash``. Anything else after ``ALTER TABLE ns.t`` is an
``UnsupportedSqlError`` naming the clause.

>>> parse_alter("ALTER TABLE db.t ADD PARTITION FIELD bucket(16, id) AS shard")
Alter(target='db.t', clause='ADD PARTITION FIELD', add=(('bucket(16, id)', 'shard'),), drop=(), sort_by=None, distribution=None)
>>> parse_alter("alter table db.t replace partition field days(ts) with hours(ts)").add
(('hour(ts)', None),)
>>> a = parse_alter("ALTER TABLE db.t WRITE ORDERED BY ts DESC NULLS LAST, id")
>>> a.sort_by, a.distribution
(('ts DESC NULLS LAST', 'id'), 'range')
>>> parse_alter("ALTER TABLE db.t WRITE UNORDERED").sort_by
()
>>> parse_alter("ALTER TABLE db.t ADD COLUMNS (c int)")
Traceback (most recent call last):
...
rowops.errors.UnsupportedSqlError: ALTER TABLE ... ADD COLUMNS is not supported by rowops.sql
Help: ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NoReturn

from rowops.errors import SqlSyntaxError, UnsupportedSqlError

ALTER = re.compile(r"^\s*ALTER\s+TABLE\b", re.IGNORECASE)
_TOKEN = re.compile(r"\s*(?:(`(?:[^`]|``)+`)|([A-Za-z_][A-Za-z0-9_]*)|(\d+)|([(),.;])|(\S))")
_HELP = (
    "rowops.sql runs ALTER TABLE ns.t ADD / DROP / REPLACE PARTITION FIELD and WRITE [LOCALLY] ORDERED "
    "BY / DISTRIBUTED BY PARTITION / UNORDERED; use table.add_columns and the other table methods for "
    "the rest (docs/guide/evolution.md)."
)
_PLURAL = {"years": "year", "months": "month", "days": "day", "hours": "hour"}


@dataclass(frozen=True)
class Alter:
    """One ``ALTER TABLE``: partition fields to add (``(term, name)``) and drop, or a new sort order
    (``sort_by``, ``()`` = unordered) with its ``write.distribution-mode``."""

    target: str
    clause: str
    add: tuple[tuple[str, str | None], ...] = ()
    drop: tuple[str, ...] = ()
    sort_by: tuple[str, ...] | None = None
    distribution: str | None = None


class _Tokens:
    def __init__(self, text: str) -> None:
        self.items: list[tuple[str, str]] = []  # (kind, text): kind is name, number or punctuation
        pos, text = 0, text.rstrip().rstrip(";")
        while pos < len(text.rstrip()):
            m = _TOKEN.match(text, pos)
            assert m is not None and m.end() > pos  # \S matches any other character
            quoted, word, number, punct, other = m.groups()
            if quoted:
                self.items.append(("name", quoted[1:-1].replace("``", "`")))
            elif word:
                self.items.append(("word", word))
            elif number:
                self.items.append(("number", number))
            else:  # punctuation, or a character no supported clause has (reported where it is met)
                self.items.append(("punct" if punct else "other", punct or other))
            pos = m.end()
        self.i = 0

    def peek(self, *words: str) -> bool:
        """Whether the next tokens are these keywords (case-insensitive)."""
        ahead = self.items[self.i : self.i + len(words)]
        return len(ahead) == len(words) and all(
            k == "word" and t.upper() == w for (k, t), w in zip(ahead, words, strict=True)
        )

    def accept(self, *words: str) -> bool:
        if self.peek(*words):
            self.i += len(words)
            return True
        return False

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            raise SqlSyntaxError(f"ALTER TABLE: expected {' '.join(words)} at {self.rest()!r}")

    def punct(self, char: str) -> bool:
        if self.i < len(self.items) and self.items[self.i] == ("punct", char):
            self.i += 1
            return True
        return False

    def name(self, what: str) -> str:
        if self.i < len(self.items) and self.items[self.i][0] in ("word", "name"):
            self.i += 1
            return self.items[self.i - 1][1]
        raise SqlSyntaxError(f"ALTER TABLE: expected {what} at {self.rest()!r}")

    def path(self, what: str) -> str:
        """A name, or a dotted path of names (``s.c1``: a field of a struct)."""
        parts = [self.name(what)]
        while self.punct("."):
            parts.append(self.name(what))
        return ".".join(parts)

    def number(self) -> str | None:
        if self.i < len(self.items) and self.items[self.i][0] == "number":
            self.i += 1
            return self.items[self.i - 1][1]
        return None

    def done(self) -> bool:
        return self.i >= len(self.items)

    def rest(self) -> str:
        return " ".join(t for _, t in self.items[self.i :]) or "the end"


def parse_alter(text: str) -> Alter:
    """Parse one ``ALTER TABLE`` statement of the supported subset."""
    tokens = _Tokens(text)
    tokens.expect("ALTER", "TABLE")
    target = tokens.path("a table name")
    if tokens.accept("ADD", "PARTITION", "FIELD"):
        term = _term(tokens)
        alter = Alter(target, "ADD PARTITION FIELD", add=((term, _alias(tokens)),))
    elif tokens.accept("DROP", "PARTITION", "FIELD"):
        alter = Alter(target, "DROP PARTITION FIELD", drop=(_term(tokens),))
    elif tokens.accept("REPLACE", "PARTITION", "FIELD"):
        old = _term(tokens)
        tokens.expect("WITH")
        new = _term(tokens)
        alter = Alter(target, "REPLACE PARTITION FIELD", add=((new, _alias(tokens)),), drop=(old,))
    elif tokens.accept("WRITE"):
        alter = _write(tokens, target)
    else:
        words = tokens.rest().upper().split()
        clause = " ".join(words[:2]) if words else "an empty ALTER TABLE"
        raise UnsupportedSqlError(f"ALTER TABLE ... {clause} is not supported by rowops.sql", help=_HELP)
    if not tokens.done():
        raise SqlSyntaxError(f"ALTER TABLE: unexpected {tokens.rest()!r} after {alter.clause}")
    return alter


def _term(tokens: _Tokens) -> str:
    """A partition term as ``partition_by`` spells it: ``col`` or ``transform(N, col)``."""
    head = tokens.path("a column or a partition transform")
    if not tokens.punct("("):
        return head
    transform = _PLURAL.get(head.lower(), head.lower())
    number = tokens.number()
    if number is not None and not tokens.punct(","):
        _fail(tokens, "','")
    column = tokens.path("a column")
    if number is None and tokens.punct(","):  # truncate(col, W), as older Iceberg releases wrote it
        number = tokens.number() or _fail(tokens, "a number")
    if not tokens.punct(")"):
        _fail(tokens, "')'")
    return f"{transform}({number}, {column})" if number is not None else f"{transform}({column})"


def _fail(tokens: _Tokens, what: str) -> NoReturn:
    raise SqlSyntaxError(f"ALTER TABLE: expected {what} at {tokens.rest()!r}")


def _alias(tokens: _Tokens) -> str | None:
    return tokens.name("a partition field name") if tokens.accept("AS") else None


def _write(tokens: _Tokens, target: str) -> Alter:
    if tokens.accept("UNORDERED"):
        return Alter(target, "WRITE UNORDERED", sort_by=(), distribution="none")
    distribution = None
    if tokens.accept("DISTRIBUTED", "BY", "PARTITION"):
        distribution = "hash"
        if tokens.done():
            return Alter(target, "WRITE DISTRIBUTED BY PARTITION", sort_by=None, distribution=distribution)
    locally = tokens.accept("LOCALLY")
    tokens.expect("ORDERED", "BY")
    distribution = distribution or ("none" if locally else "range")
    fields = [_sort_field(tokens)]
    while tokens.punct(","):
        fields.append(_sort_field(tokens))
    clause = "WRITE " + ("LOCALLY " if locally else "") + "ORDERED BY"
    return Alter(target, clause, sort_by=tuple(fields), distribution=distribution)


def _sort_field(tokens: _Tokens) -> str:
    column = tokens.path("a sort column")
    if tokens.punct("("):
        raise UnsupportedSqlError(
            f"ALTER TABLE ... WRITE ORDERED BY {column}(...): sort orders of transforms are not supported",
            help="Order by plain columns, e.g. WRITE ORDERED BY ts DESC, id.",
        )
    parts = [column]
    parts += [word for word in ("ASC", "DESC") if tokens.accept(word)]
    parts += [f"NULLS {word}" for word in ("FIRST", "LAST") if tokens.accept("NULLS", word)]
    return " ".join(parts)
