"""Every Python snippet in the README runs as written (a user copies them; one that broke would be found
by the first reader, not by CI)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_the_readme_has_python_snippets() -> None:
    assert SNIPPETS, "the adapters' sections show their use as Python"


@pytest.mark.parametrize("code", SNIPPETS, ids=[f"snippet{i}" for i in range(len(SNIPPETS))])
def test_each_snippet_runs_as_written(code: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
