"""What /proc says about the processes alive now: for tests that check what a sandbox leaves behind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path


def process_stats() -> Iterator[tuple[int, list[str]]]:
    """`(pid, fields)` for every live process; `fields` are /proc/PID/stat's after the command name, so
    fields[0] is the state, fields[1] the parent, fields[3] the session."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                yield int(entry.name), (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # it ended while we looked
