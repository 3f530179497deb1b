"""The training run's peak memory: this process and every process it started (the model server, the sandbox
workers), summed, sampled in a background thread.

Resident set sizes double-count pages that processes share, so each process counts its proportional set
size (PSS: shared pages split between the processes that map them). A transient peak between two samples
is caught for this process by the kernel's own high-water mark (`ru_maxrss`), which is the floor.
"""

from __future__ import annotations

import contextlib
import resource
import threading

import psutil


def _pss(process: psutil.Process) -> int:
    with contextlib.suppress(psutil.Error):
        return int(process.memory_full_info().pss)
    return 0


def current_by_process() -> dict[str, int]:
    """PSS of this process and of each of its descendants now, by `name:pid` (for the run's log)."""
    me = psutil.Process()
    return {f"{process.name()}:{process.pid}": _pss(process) for process in [me, *me.children(recursive=True)]}


def current_total_bytes() -> int:
    """PSS of this process and all its descendants now."""
    return sum(current_by_process().values())


class PeakMemory:
    """Samples `current_total_bytes` every `interval_s` until stopped; `peak_gb` is the largest seen."""

    def __init__(self, interval_s: float = 2.0) -> None:
        self.interval_s = interval_s
        self._peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="peak-memory", daemon=True)

    def __enter__(self) -> PeakMemory:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _sample(self) -> None:
        self._peak = max(self._peak, current_total_bytes())

    def _watch(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    @property
    def peak_gb(self) -> float:
        own_high_water = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KB on Linux
        return max(self._peak, own_high_water) / 1e9
