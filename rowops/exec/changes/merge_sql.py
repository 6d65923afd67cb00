"""The projection of a MERGE's joined rows as SQL text: each row's action and the new values.

``exec/changes/rows.py`` computes, per joined row, the index of the first WHEN clause that applies and one
value per table column (a CASE on that index). Built from PySpark ``Column`` objects this costs
classic PySpark a Py4J round trip or two per function call, ~10 per column and clause (0.44 s of
a Case 2 MERGE of the 23 store_sales columns, measured with cProfile); as SQL text the projection
goes to the JVM in one piece (``compat.select_exprs``). The text computes what the ``Column``
version built: clause conditions and assigned values are the user's SQL, checked on their own
before (``exec/checks/expressions.py``), each in parentheses and followed by a line break (a trailing
``--`` comment ends there). A value set inside a struct (``SET s.c1 = ...``) needs ``withField``:
such a column has no text form (None), and ``exec/changes/rows.py`` builds it from ``Column`` objects
around the same texts. On Spark Connect the text goes as it is (``selectExpr``).
"""

from __future__ import annotations

from collections.abc import Sequence

from rowops.exec.checks.nested import nested_assignments
from rowops.exec.spark.literal_frames import sql_identifier
from rowops.request.operations import MergeClause, MergeSpec

T_ROW, S_ROW = "_t_present", "_s_present"  # non-NULL in joined rows that have a target / source row


def user_sql(text: str) -> str:
    """A user's SQL expression as an operand of a larger expression.

    >>> user_sql("a = 1 -- note")
    '(a = 1 -- note\\n)'
    """
    return f"({text}\n)"


def clause_applies(clause: MergeClause) -> str:
    """When ``clause`` applies to a joined row: its kind of match and its condition.

    >>> from rowops.request.operations import MergeClause
    >>> clause_applies(MergeClause("not_matched", "insert", condition="s.v > 0"))
    '(_t_present IS NULL AND _s_present IS NOT NULL AND (s.v > 0\\n))'
    """
    t, s = f"{T_ROW} IS NOT NULL", f"{S_ROW} IS NOT NULL"
    no_t, no_s = f"{T_ROW} IS NULL", f"{S_ROW} IS NULL"
    where = {
        "matched": f"{t} AND {s}",
        "not_matched": f"{no_t} AND {s}",
        "not_matched_by_source": f"{t} AND {no_s}",
    }
    applies = where[clause.match]
    return f"({applies} AND {user_sql(clause.condition)})" if clause.condition else f"({applies})"


def action(spec: MergeSpec) -> str:
    """The index of the first WHEN clause that applies to a joined row, -1 if none (SQL order).

    >>> from rowops.request.operations import simple_merge_spec
    >>> print(action(simple_merge_spec(["k"])))
    CASE WHEN (_t_present IS NOT NULL AND _s_present IS NOT NULL) THEN 0 WHEN (_t_present IS NULL AND _s_present IS NOT NULL) THEN 1 ELSE -1 END
    """
    cases = " ".join(f"WHEN {clause_applies(c)} THEN {i}" for i, c in enumerate(spec.clauses))
    return f"CASE {cases} ELSE -1 END"


def clause_value(clause: MergeClause, column: str, columns: Sequence[str]) -> str | None:
    """The value ``clause`` gives ``column`` (None: a field inside it is set, see the module doc).

    >>> from rowops.request.operations import MergeClause
    >>> upd = MergeClause("matched", "update", assignments=(("v", "s.v + 1"),))
    >>> clause_value(upd, "v", ["k", "v"]), clause_value(upd, "k", ["k", "v"])
    ('(s.v + 1\\n)', 't.`k`')
    >>> clause_value(MergeClause("not_matched", "insert"), "k", ["k"])
    's.`k`'
    """
    assigned = dict(clause.assignments or ())
    if column in assigned:
        return user_sql(assigned[column])
    if clause.assignments is None:  # UPDATE SET * / INSERT *
        return f"s.{sql_identifier(column)}"
    if clause.action != "update":
        return "NULL"
    if nested_assignments(column, [(c, e) for c, e in clause.assignments if c not in columns]):
        return None
    return f"t.{sql_identifier(column)}"


def new_values(spec: MergeSpec, action_column: str, columns: Sequence[str]) -> list[str] | None:
    """Per table column its new value: the value of the clause whose index ``action_column`` holds.

    >>> from rowops.request.operations import simple_merge_spec
    >>> new_values(simple_merge_spec(["k"]), "_action", ["k"])
    ['CASE WHEN `_action` = 0 THEN s.`k` WHEN `_action` = 1 THEN s.`k` END AS `k`']
    """
    producing = [i for i, c in enumerate(spec.clauses) if c.action != "delete"]
    action_sql = sql_identifier(action_column)
    out = []
    for column in columns:
        branches = []
        for i in producing:
            value = clause_value(spec.clauses[i], column, columns)
            if value is None:
                return None
            branches.append(f"WHEN {action_sql} = {i} THEN {value}")
        out.append(f"CASE {' '.join(branches)} END" if branches else "NULL")
        out[-1] += f" AS {sql_identifier(column)}"
    return out
