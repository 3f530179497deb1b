"""What a person watches while a rollout runs (a live line) and reads after it (a summary table)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import structlog
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from engine.rollout import RolloutStats

log = structlog.get_logger()


def _status_line(stats: RolloutStats) -> str:
    elapsed = max(stats.elapsed_s, 1e-9)
    return (
        f"live {stats.live:,}  failed {stats.statuses['infra_error']:,}  "
        f"turns/s {stats.turns / elapsed:,.0f}  tokens/s {stats.completion_tokens / elapsed:,.0f}"
    )


@contextmanager
def live_progress(
    stats: RolloutStats, console: Console, enabled: bool, label: str = "episodes", every_s: float = 10.0
) -> Iterator[None]:
    """What a person sees while `stats` fills: a live bar on a terminal; elsewhere (a log file, CI) one
    structured line every `every_s` seconds, so a long play is never silent. Fed by a small thread, so
    nothing runs on the event loop's path."""
    if not enabled:
        yield
        return
    if console.is_terminal:
        with _bar(stats, console, label):
            yield
    else:
        with _every(every_s, lambda: _log_line(stats, label)):
            yield


@contextmanager
def _every(seconds: float, action: Callable[[], None]) -> Iterator[None]:
    """Run `action` every `seconds` in a small thread while the block runs."""
    stop = threading.Event()

    def pump() -> None:
        while not stop.wait(seconds):
            action()

    thread = threading.Thread(target=pump, name="rollout-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _log_line(stats: RolloutStats, label: str) -> None:
    elapsed = max(stats.elapsed_s, 1e-9)
    log.info(label, done=stats.skipped + stats.done, planned=stats.planned, live=stats.live,
             failed=stats.statuses["infra_error"], turns_per_s=round(stats.turns / elapsed, 2),
             tokens_per_s=round(stats.completion_tokens / elapsed, 1), elapsed_s=round(elapsed))  # fmt: skip


@contextmanager
def _bar(stats: RolloutStats, console: Console, label: str) -> Iterator[None]:
    columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[status]}"))
    timing = (TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn())
    with Progress(*columns, *timing, console=console, refresh_per_second=4) as progress:
        handle = progress.add_task("rollout", total=stats.planned, status="")

        def update() -> None:
            progress.update(handle, completed=stats.skipped + stats.done, status=_status_line(stats))

        update()
        try:
            with _every(0.25, update):
                yield
        finally:
            update()


def summary_table(stats: RolloutStats) -> Table:
    table = Table(title="rollout", show_header=True)
    table.add_column("measure")
    table.add_column("value", justify="right")
    elapsed = max(stats.elapsed_s, 1e-9)
    mean = stats.mean_reward
    rows = [
        ("episodes planned", f"{stats.planned:,}"),
        ("already on disk (skipped)", f"{stats.skipped:,}"),
        ("finished now", f"{stats.done:,}"),
        ("  ok", f"{stats.statuses['ok']:,}"),
        ("  truncated", f"{stats.statuses['truncated']:,}"),
        ("  infra_error", f"{stats.statuses['infra_error']:,}"),
        ("mean reward (ok + truncated)", "-" if mean is None else f"{mean:.3f}"),
        ("turns", f"{stats.turns:,}"),
        ("tool calls", f"{stats.tool_calls:,}"),
        ("malformed turns", f"{stats.malformed_turns:,}"),
        ("token traces with drift", f"{stats.drifted:,}"),
        ("turns/s", f"{stats.turns / elapsed:,.1f}"),
        ("completion tokens/s", f"{stats.completion_tokens / elapsed:,.1f}"),
        ("wall time", f"{elapsed:.1f} s"),
    ]
    rows += [(f"cause: {cause}", f"{count:,}") for cause, count in sorted(stats.causes.items())]
    for name, value in rows:
        table.add_row(name, value)
    return table
