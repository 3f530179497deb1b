"""Every Python snippet in the README is a file in docs/examples/, and every example runs as written: a user
copies them, and one that broke would be found by the first reader, not by CI."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest

from toolworlds.hosting.serving import launched_command

ROOT = Path(__file__).parents[1]
EXAMPLES = sorted((ROOT / "docs" / "examples").glob("*.py"))
SNIPPETS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_each_readme_snippet_is_an_example_file() -> None:
    texts = {path.read_text().strip() for path in EXAMPLES}
    assert SNIPPETS, "the adapters' sections show their use as Python"
    assert all(snippet.strip() in texts for snippet in SNIPPETS), "a README snippet is not in docs/examples/"


@pytest.mark.parametrize("example", EXAMPLES, ids=[path.stem for path in EXAMPLES])
def test_each_example_runs_as_written(example: Path, tmp_path: Path) -> None:
    """An example that starts with `# first, in a shell: COMMAND` runs while COMMAND serves, as the reader would."""
    first = re.match(r"# first, in a shell: (spadework .*)\n", example.read_text())
    with ExitStack() as stack:
        if first:
            stack.enter_context(launched_command(*shlex.split(first.group(1))[1:], timeout=120))
        done = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, cwd=tmp_path, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
