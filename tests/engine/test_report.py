"""The live progress line and the summary table show the counters a person watches."""

from __future__ import annotations

import io
import time

from rich.console import Console
from structlog.testing import capture_logs

from engine.report import live_progress, summary_table
from engine.rollout import RolloutStats


def test_live_progress_shows_done_failed_live_and_rates() -> None:
    stats = RolloutStats(planned=10)
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=160)
    with live_progress(stats, console, enabled=True):
        stats.statuses.update({"ok": 6, "infra_error": 1})
        stats.live, stats.turns, stats.completion_tokens = 3, 40, 900
        time.sleep(0.6)
    text = out.getvalue()
    assert "7/10" in text and "failed 1" in text and "live 3" in text and "turns/s" in text


def test_progress_off_a_terminal_is_a_log_line_every_few_seconds() -> None:
    stats = RolloutStats(planned=10)
    out = io.StringIO()
    with capture_logs() as logs, live_progress(stats, Console(file=out), enabled=True, label="eval", every_s=0.05):
        stats.statuses.update({"ok": 4, "infra_error": 1})
        stats.skipped, stats.live = 2, 3
        time.sleep(0.3)
    assert out.getvalue() == ""  # no bar drawn into a file
    lines = [line for line in logs if line["event"] == "eval"]
    assert len(lines) >= 2
    assert lines[-1] | {"done": 7, "planned": 10, "live": 3, "failed": 1} == lines[-1]


def test_disabled_progress_prints_nothing() -> None:
    out = io.StringIO()
    with live_progress(RolloutStats(planned=3), Console(file=out, force_terminal=True), enabled=False):
        pass
    assert out.getvalue() == ""


def test_summary_lists_statuses_causes_and_rates() -> None:
    stats = RolloutStats(planned=5, skipped=1)
    stats.statuses.update({"ok": 2, "truncated": 1, "infra_error": 1})
    stats.causes.update({"endpoint:http_503": 1, "turn_limit": 1})
    stats.reward_sum, stats.rewarded = 2.5, 3
    out = io.StringIO()
    Console(file=out, width=120).print(summary_table(stats))
    text = out.getvalue()
    for expected in ("already on disk (skipped)", "infra_error", "cause: endpoint:http_503", "0.833", "turns/s"):
        assert expected in text, expected
