"""The run's peak memory counts the processes it started, not only its own.

The measurement runs in a fresh interpreter: inside pytest, the test process's own memory and the
children other tests left exiting move by hundreds of megabytes while it runs, more than the child it
watches holds.
"""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, subprocess, sys, time
from trainers.memory import PeakMemory, current_total_bytes

holds = "import time; block = bytearray(300_000_000); block[::4096] = b'x' * len(block[::4096]); time.sleep(3)"
baseline = current_total_bytes()
with PeakMemory(interval_s=0.2) as peak:
    child = subprocess.Popen([sys.executable, "-c", holds])
    time.sleep(2.0)
    during = current_total_bytes()
    child.wait(timeout=30)
    time.sleep(0.3)
after = current_total_bytes()
print(json.dumps({"baseline": baseline, "during": during, "after": after, "peak": peak.peak_gb * 1e9}))
"""


def test_a_childs_memory_is_in_the_peak_and_stays_there_after_it_ends() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["during"] - seen["baseline"] > 250_000_000, f"a child's touched pages count while it lives: {seen}"
    assert seen["peak"] >= seen["baseline"] + 250_000_000, f"and the peak keeps them once it has ended: {seen}"
    assert seen["after"] < seen["during"] - 250_000_000, f"the current total drops when it ends: {seen}"
