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

from tests.servers import served
from toolworlds.export import export_world
from toolworlds.registry import builtin_worlds

WORLDS = builtin_worlds()


@pytest.mark.parametrize("name", sorted(WORLDS))
def test_served_api_conforms_to_its_openapi_document(name: str, tmp_path: Path) -> None:
    export_world(WORLDS[name], tmp_path)
    with served(name) as url:
        result = subprocess.run(
            [sys.executable, "-m", "schemathesis.cli", "run", str(tmp_path / "openapi.json"), "--url", url,
             "--max-examples", "25", "--seed", "20261129", "--no-color"],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    assert result.returncode == 0, result.stdout[-6000:]
    assert "No issues found" in result.stdout
