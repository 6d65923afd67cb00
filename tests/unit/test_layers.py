"""The package's layers, read from the source with ``ast``: no import circle, no upward import.

Every import statement counts: module level, inside functions, and under ``if TYPE_CHECKING`` (a
type-only circle is still a circle a reader has to untangle; Protocols break them instead).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "rowops"

# Top to bottom: a module imports only modules of its own layer or of a lower one.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("entry", ("rowops", "rowops.__main__", "rowops.cli")),
    ("pipeline", ("rowops.pipeline",)),
    (
        "api",
        (
            "rowops.lakehouse",
            "rowops.lake_at",
            "rowops.catalog_lakehouse",
            "rowops.transaction",
            "rowops.statements",
            "rowops.functions",
            "rowops.table",
            "rowops.table_evolution",
            "rowops.merge_builder",
            "rowops.metadata_tables",
        ),
    ),
    ("run", ("rowops.run",)),
    ("exec", ("rowops.exec",)),
    ("catalog", ("rowops.catalog",)),
    ("maintenance", ("rowops.maintenance",)),
    ("commit", ("rowops.commit",)),
    ("plan", ("rowops.plan", "rowops.sqltext")),
    ("meta", ("rowops.meta",)),
    ("request", ("rowops.request",)),
    ("base", ("rowops.errors", "rowops.faults")),
]
# The only layer that imports pyspark (or py4j); the others use rowops/exec/spark/frames.py's names.
SPARK_LAYER = "exec"


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imported(name: str, path: Path) -> set[str]:
    """Every module named by an import statement anywhere in the file (absolute names)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                prefix = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(prefix + ([node.module] if node.module else []))
            for alias in node.names:  # `from pkg import module` imports the module, not just pkg
                full = f"{base}.{alias.name}"
                names.add(full if full in MODULES else base)
    return names


def _rowops_imports(name: str) -> set[str]:
    found = set()
    for imported in _imported(name, MODULES[name]):
        while imported and imported not in MODULES:
            imported = imported.rpartition(".")[0]
        if imported and imported != name:
            found.add(imported)
    return found


GRAPH = {name: _rowops_imports(name) for name in MODULES}


def layer_of(module: str) -> int:
    matches = [
        (len(prefix), index)
        for index, (_, prefixes) in enumerate(LAYERS)
        for prefix in prefixes
        if module == prefix or (prefix != "rowops" and module.startswith(prefix + "."))
    ]
    assert matches, f"{module} is in no layer: add it to LAYERS in {Path(__file__).name}"
    return max(matches)[1]


def _circles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(GRAPH[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    return circles


def test_the_walk_sees_imports() -> None:
    assert "rowops.run.row_level" in GRAPH["rowops.table"]
    assert "rowops.commit.row_conflicts" in GRAPH["rowops.commit.rebase"]
    assert "rowops.faults" in GRAPH["rowops.commit.row_delta"]  # `from rowops import faults`


def test_no_import_circle() -> None:
    assert _circles() == []


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        layer_of(module)


def test_no_module_imports_a_higher_layer() -> None:
    upward = [
        f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
        for module, targets in sorted(GRAPH.items())
        for target in sorted(targets)
        if layer_of(target) < layer_of(module)
    ]
    assert upward == []


def test_only_exec_imports_pyspark() -> None:
    spark = [index for index, (name, _) in enumerate(LAYERS) if name == SPARK_LAYER]
    found = [
        f"{module} imports {imported}"
        for module, path in sorted(MODULES.items())
        if [layer_of(module)] != spark
        for imported in sorted(_imported(module, path))
        if imported.split(".")[0] in ("pyspark", "py4j")
    ]
    assert found == []
