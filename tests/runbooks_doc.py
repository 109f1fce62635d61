"""The command blocks of ``docs/runbooks.md``, as the tests read them.

A ``sh`` fenced block under a ``## `` heading is run by ``tests/integration/test_runbooks.py``;
one right after a ``<!-- not run by the tests: REASON -->`` line is only shown. A block's
commands are its lines, a heredoc (``<<'EOF'`` ... ``EOF``) being one command with its body;
a command ending in ``# keeps running`` starts a long-running process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

RUNBOOKS = Path(__file__).resolve().parents[1] / "docs" / "runbooks.md"
SECTION = re.compile(r"^## (.+)$", re.M)
FENCE = re.compile(
    r"(?:<!-- not run by the tests: (?P<reason>[^>]+?) -->\n)?```sh\n(?P<body>.*?)```", re.S
)
HEREDOC = re.compile(r"<<'(\w+)'\s*$")
KEEPS_RUNNING = "# keeps running"


@dataclass(frozen=True)
class Block:
    section: str
    text: str
    run: bool
    reason: str = ""

    def commands(self) -> list[str]:
        """The block's commands: one a line, a heredoc with its body."""
        out: list[str] = []
        lines = iter(self.text.splitlines())
        for line in lines:
            if not line.strip():
                continue
            heredoc = HEREDOC.search(line)
            if heredoc:
                body = [line]
                for more in lines:
                    body.append(more)
                    if more.strip() == heredoc.group(1):
                        break
                out.append("\n".join(body) + "\n")
            else:
                out.append(line)
        return out


def blocks(path: Path = RUNBOOKS) -> list[Block]:
    """Every ``sh`` block of the runbooks, in order, with the heading it is under."""
    text = path.read_text(encoding="utf-8")
    found: list[Block] = []
    headings = [(m.start(), m.group(1).strip()) for m in SECTION.finditer(text)]
    for fence in FENCE.finditer(text):
        section = ""
        for start, title in headings:
            if start < fence.start():
                section = title
        reason = fence.group("reason") or ""
        found.append(Block(section, fence.group("body"), run=not reason, reason=reason))
    return found


def run_blocks(section: str, path: Path = RUNBOOKS) -> list[Block]:
    """The blocks of one runbook that the tests run, in order."""
    return [b for b in blocks(path) if b.section == section and b.run]
