"""The run's peak memory counts the processes it started, not only its own."""

from __future__ import annotations

import subprocess
import sys
import time

from trainers.memory import PeakMemory, current_total_bytes


def test_a_childs_memory_is_in_the_peak_and_stays_there_after_it_ends() -> None:
    holds = "import time; block = bytearray(300_000_000); block[::4096] = b'x' * len(block[::4096]); time.sleep(3)"
    baseline = current_total_bytes()
    with PeakMemory(interval_s=0.2) as peak:
        child = subprocess.Popen([sys.executable, "-c", holds])
        time.sleep(2.0)
        during = current_total_bytes()
        child.wait(timeout=30)
        time.sleep(0.3)
    assert during - baseline > 250_000_000, "a child's touched pages count while it lives"
    assert peak.peak_gb * 1e9 >= baseline + 250_000_000, "and the peak keeps them once it has ended"
    assert current_total_bytes() < during - 250_000_000
