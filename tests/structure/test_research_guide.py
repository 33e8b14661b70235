"""docs/research-guide.md stays runnable: every ```python block runs, in order, in one namespace,
in a temporary directory (the blocks write files)."""

from __future__ import annotations

import re
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "research-guide.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def python_blocks(text: str) -> list[str]:
    return BLOCK.findall(text)


def test_block_extraction_finds_every_python_block():
    text = GUIDE.read_text()
    blocks = python_blocks(text)
    assert len(blocks) == text.count("```python") >= 8
    assert all(block.strip() for block in blocks)


def test_research_guide_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "research_guide"}
    for i, block in enumerate(python_blocks(GUIDE.read_text())):
        code = compile(block, f"{GUIDE.name}[python block {i}]", "exec")
        exec(code, namespace)  # a failing block names itself in the traceback
    assert (tmp_path / "sl" / "graph.json").is_file()
