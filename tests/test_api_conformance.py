"""Property-based conformance of the served session API to its exported `openapi.json` (schemathesis).

Schemathesis generates valid and invalid requests from the document, chains them statefully (create a
session, then use its id), and fails on any response that contradicts the document: a status it does not
list, a body that breaks its schema, a valid request refused or an invalid one accepted, or a 5xx.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from toolworlds.hosting.export import export_world
from toolworlds.hosting.serving import launched
from toolworlds.registry import builtin_worlds

WORLDS = builtin_worlds()


def _schemathesis(name: str, folder: Path, examples: int, seed: int) -> None:
    export_world(WORLDS[name], folder)
    with launched(name) as url:
        result = subprocess.run(
            [sys.executable, "-m", "schemathesis.cli", "run", str(folder / "openapi.json"), "--url", url,
             "--max-examples", str(examples), "--seed", str(seed), "--no-color"],
            capture_output=True, text=True, timeout=1200, cwd=folder,
        )  # fmt: skip
    assert result.returncode == 0, result.stdout[-6000:]
    assert "No issues found" in result.stdout


# One world in the default run (the worlds share the server and the export); the others, 37 s of it, in `just
# test-slow` with the longer fuzz.
@pytest.mark.parametrize(
    "name", [name if name == "banking" else pytest.param(name, marks=pytest.mark.slow) for name in sorted(WORLDS)]
)
def test_served_api_conforms_to_its_openapi_document(name: str, tmp_path: Path) -> None:
    _schemathesis(name, tmp_path, examples=25, seed=20261129)  # fewer leaves an operation unreached


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WORLDS))
def test_served_api_conforms_under_a_longer_fuzz(name: str, tmp_path: Path) -> None:
    _schemathesis(name, tmp_path, examples=200, seed=7)
