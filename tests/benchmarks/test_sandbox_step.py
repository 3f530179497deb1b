"""`just bench-sandbox` runs end to end on tiny sizes and prints every figure it promises, for both worlds."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "perf" / "sandbox_step.py"


def test_the_benchmark_prints_steps_rates_and_episode_opens() -> None:
    arguments = ["--repeats", "1", "--steps", "40", "--episodes", "4", "--opens", "5", "--zygotes", "1"]
    completed = subprocess.run([sys.executable, str(SCRIPT), *arguments], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr[-2000:]
    out = completed.stdout
    for column in ("in-process µs", "round trip µs", "open in-process µs", "open spare ms", "open cold ms", "targets"):
        assert column in out, column
    for world in ("echo", "library"):
        row = next(line for line in out.splitlines() if line.strip("│ ").startswith(world))
        figures = [float(value.replace(",", "").rstrip("x")) for value in re.findall(r"[\d,]+\.?\d*x?", row)]
        assert len(figures) == 8 and all(value > 0 for value in figures), row
    for target in ("in-process step", "sandbox step round trip", "pool steps/s per core", "open, reset included"):
        row = next(line for line in out.splitlines() if line.strip("│ ").startswith(target))
        assert row.rstrip(" │").endswith(("yes", "NO")), row
