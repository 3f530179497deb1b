"""`spadework bench NAME ...` in a subprocess, as a user runs it, and the results it writes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.servers import SPADEWORK

ENV = {**os.environ, "COLUMNS": "200"}  # rich wraps narrower output, and the tests read whole lines


def bench(name: str, *arguments: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SPADEWORK, "bench", name, *arguments], capture_output=True, text=True, timeout=timeout,
                          env=ENV)  # fmt: skip


def results(out: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((out / "results.json").read_text())
    return loaded
