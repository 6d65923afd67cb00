"""Every code block of the README and the guide pages is run by a test, or says why not; every relative
link of the docs names a file that exists (no Spark: these run in a second)."""

from __future__ import annotations

import re

import pytest

from tests.docs_blocks import LANGUAGES, ROOT, blocks, pages, rowops_commands

DOCS = [
    *pages(),
    ROOT / "docs" / "ARCHITECTURE.md",
    ROOT / "tpcds" / "README.md",
    ROOT / "tpcds" / "results" / "HISTORY.md",
]
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.name)
def test_every_block_runs_or_says_why(page) -> None:  # type: ignore[no-untyped-def]
    for block in blocks(page):
        assert block.language in LANGUAGES, f"{block.where}: a block needs one of {LANGUAGES}"
        reason = block.reason_not_run
        if block.language == "text":
            continue  # output
        if reason is not None:
            assert len(reason) >= 10, f"{block.where}: say why the block is not run"
            continue
        assert block.language != "text"
        if block.language == "bash":
            commands = rowops_commands(block)
            assert commands and all(c.startswith("rowops ") for c in commands), (
                f"{block.where}: a bash block that runs holds only rowops commands"
            )


def test_guide_pages_are_linked_from_the_readme_and_the_index() -> None:
    readme = (ROOT / "README.md").read_text()
    index = (ROOT / "docs" / "guide" / "index.md").read_text()
    for page in sorted((ROOT / "docs" / "guide").glob("*.md")):
        if page.name != "index.md":
            assert f"docs/guide/{page.name}" in readme, page.name
            assert f"]({page.name})" in index, page.name


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_name_existing_files(doc) -> None:  # type: ignore[no-untyped-def]
    text = re.sub(r"```.*?```|`[^`\n]*`", "", doc.read_text(), flags=re.S)  # code is not a link
    broken = [
        target
        for target in _LINK.findall(text)
        if "://" not in target and not target.startswith("mailto:") and not (doc.parent / target).exists()
    ]
    assert not broken, f"{doc.relative_to(ROOT)}: {broken}"


def test_docs_name_only_existing_results_files() -> None:
    """A results file the docs or the benchmark code name (``cases-sf1.json``, ``log-scale.{json,png}``)
    exists: superseded sets were removed from tpcds/results/ (smoke runs write elsewhere)."""
    results = ROOT / "tpcds" / "results"
    sources = [*DOCS, *(ROOT / "tpcds").glob("*.py"), ROOT / "Makefile"]
    named = re.compile(
        r"\b((?:cases|bench|metadata|log|false|listing|cleanup|manifests)-[\w-]*)\.(json|md|png|\{[\w,]+\})"
    )
    missing = set()
    for source in sources:
        for stem, ext in named.findall(source.read_text()):
            for one in ext.strip("{}").split(","):
                if not stem.endswith("-smoke") and not (results / f"{stem}.{one}").exists():
                    missing.add(f"{source.relative_to(ROOT)}: {stem}.{one}")
    assert not missing, sorted(missing)
