"""README.md is a front door that works: every ```python block runs as written, in order, in
one fresh namespace (a block may use the names of the blocks before it, as a reader typing
them in one session would); ```bash blocks are not run.  Also checked: the README stays at
most 200 lines, keeps the set-up commands CI runs (``.ci/run``), and every relative link
points to a file of the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 200


def fenced_blocks(text: str, language: str) -> list[tuple[int, str]]:
    """``(first line number, source)`` of every fenced block of ``language``."""
    blocks, lines, k = [], text.splitlines(), 0
    while k < len(lines):
        if lines[k].strip() == "```" + language:
            start, body = k + 2, []
            k += 1
            while k < len(lines) and lines[k].strip() != "```":
                body.append(lines[k])
                k += 1
            if k == len(lines):
                raise AssertionError(f"README.md:{start - 1}: unterminated ```{language} block")
            blocks.append((start, "\n".join(body) + "\n"))
        k += 1
    return blocks


def test_readme_python_blocks_run_in_order(tmp_path, monkeypatch):
    blocks = fenced_blocks(README.read_text(encoding="utf-8"), "python")
    assert len(blocks) >= 4, "the tour has lost its snippets"
    monkeypatch.chdir(tmp_path)                  # anything a snippet writes stays here
    namespace = {"__name__": "__readme__"}
    for line, source in blocks:
        # the line numbers of a traceback point into README.md
        code = compile("\n" * (line - 1) + source, str(README), "exec")
        exec(code, namespace)


def test_readme_is_a_front_door():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_LINES
    bash = "".join(src for _, src in fenced_blocks(text, "bash"))
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for command in ('pip install -e ".[dev]"', "pytest"):
        assert command in bash and command in ci
    assert "workbench reproduce" in bash


@pytest.mark.parametrize("doc", ["README.md"] + sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")))
def test_relative_links_resolve(doc):
    path = ROOT / doc
    missing = []
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text(encoding="utf-8")):
        if "://" in target:
            continue
        if not (path.parent / target).exists():
            missing.append(target)
    assert not missing, f"{doc}: broken links {missing}"
