"""The code blocks of the README and the guide pages, and which of them the docs tests run.

A fenced block is ``python`` (executed in order, one namespace and one lake per page), ``bash`` (every
line a ``rowops ...`` command, run against the page's lake), ``toml`` (compared with the file it shows),
or ``text`` (output, never run). A python or bash block that cannot run here (it needs a bucket, a
cluster, a server) says so on its first line: ``# not run by the docs tests: <reason>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GUIDE = ROOT / "docs" / "guide"
NOT_RUN = "# not run by the docs tests: "
LANGUAGES = ("python", "bash", "toml", "text")
_FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)


@dataclass(frozen=True)
class Block:
    page: Path
    language: str
    code: str
    line: int  # of the opening fence, 1-based

    @property
    def reason_not_run(self) -> str | None:
        """Why the block is not run (``text`` blocks: output), or None when it is run."""
        if self.language == "text":
            return "output"
        first = self.code.split("\n", 1)[0]
        return first[len(NOT_RUN) :].strip() if first.startswith(NOT_RUN) else None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, in order."""
    text = page.read_text()
    return [
        Block(page, m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1) for m in _FENCE.finditer(text)
    ]


def pages() -> list[Path]:
    """The README and every guide page."""
    return [README, *sorted(GUIDE.glob("*.md"))]


def rowops_commands(block: Block) -> list[str]:
    """The command lines of a run ``bash`` block (comments and blank lines skipped)."""
    lines = [line.strip() for line in block.code.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]
