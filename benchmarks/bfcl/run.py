"""A BFCL v4 multi-turn run: entries played one by one into a resumable journal, then the accuracy per
category and overall (the unweighted mean of the categories, as the leaderboard computes it)."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.progress import Progress

from benchmarks.bfcl.data import Entry, load_category
from benchmarks.bfcl.episode import POLICIES, BFCLEpisode, Outcome

JOURNAL = "entries.jsonl"
RUN_FILE = "run.json"

# Published BFCL v4 multi-turn accuracy (%), leaderboard data of 2025-12-16 (gorilla gh-pages
# data_multi_turn.csv): overall, base, miss_func, miss_param, long_context.
ANCHORS = {
    "xLAM-2-8b-fc-r (FC)": (70.00, 76.0, 72.0, 65.0, 67.0),
    "Qwen3-8B (FC)": (41.75, 50.5, 42.0, 40.0, 34.5),
    "Qwen3-4B-Instruct-2507 (FC)": (22.12, 26.5, 21.0, 15.5, 25.5),
    "Llama-3.1-8B-Instruct (Prompt)": (11.12, 13.0, 9.0, 9.5, 13.0),
}


class RunMismatch(ValueError):
    """The output folder holds a run with other settings; the message says which."""


@dataclass(frozen=True)
class Summary:
    policy: str
    accuracy: dict[str, float]  # category -> share of entries correct
    entries: dict[str, int]
    overall: float
    seconds: float


def run_bfcl(out: Path, policy: str, categories: list[str], limit: int | None = None) -> Summary:
    """Play the first `limit` entries of each category (all 200 by default) with `policy`, resuming a run
    already in `out` (entries played before are not played again, whatever categories or limit it had);
    writes `results.json` and `results.md` there."""
    _claim(out, {"benchmark": "bfcl-v4-multi-turn", "policy": policy})  # categories and limit may grow
    done = {outcome.id: outcome for outcome in read_outcomes(out)}
    chosen = [entry for category in categories for entry in load_category(category)[:limit]]
    started = time.perf_counter()
    with Progress(transient=True) as progress, (out / JOURNAL).open("a") as journal:
        task = progress.add_task(f"BFCL v4 multi-turn, {policy}", total=len(chosen), completed=len(done))
        for entry in chosen:
            if entry.id in done:
                continue
            done[entry.id] = outcome = BFCLEpisode(entry).play(POLICIES[policy])
            journal.write(json.dumps(asdict(outcome)) + "\n")
            journal.flush()
            progress.advance(task)
    summary = _summary(policy, categories, chosen, done, time.perf_counter() - started)
    (out / "results.json").write_text(json.dumps(asdict(summary), indent=2))
    (out / "results.md").write_text(markdown(summary))
    return summary


def read_outcomes(out: Path) -> list[Outcome]:
    path = out / JOURNAL
    if not path.exists():
        return []
    return [Outcome(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def markdown(summary: Summary) -> str:
    """The run's row beside the published anchors; self-test policies are checks of the harness."""
    columns = ["base", "miss_func", "miss_param", "long_context"]
    header = "| model | overall | " + " | ".join(columns) + " |\n|---|---|" + "---|" * len(columns) + "\n"
    cells = [f"{summary.accuracy[c]:.1%} ({summary.entries[c]})" if c in summary.accuracy else "–" for c in columns]
    rows = f"| **this run: {summary.policy}** | **{summary.overall:.1%}** | " + " | ".join(cells) + " |\n"
    for name, (overall, *parts) in ANCHORS.items():
        rows += f"| {name} | {overall:.1f}% | " + " | ".join(f"{part:.1f}%" for part in parts) + " |\n"
    note = (
        "\nAnchors: BFCL leaderboard, 2025-12-16 data, all 200 entries per category. This run's numbers cover "
        "the entries in brackets; `ground-truth` and `none` replay the answer or call nothing (harness self-tests: "
        "they must give 100% and 0%).\n"
    )
    return header + rows + note


def _claim(out: Path, settings: Mapping[str, object]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    path = out / RUN_FILE
    if path.exists():
        held = json.loads(path.read_text())
        if held != settings:
            changed = ", ".join(f"{key}={held.get(key)!r}" for key in settings if held.get(key) != settings[key])
            raise RunMismatch(f"{out} holds a run with {changed}: resume it with those settings or give a new --out")
    else:
        path.write_text(json.dumps(settings, indent=2))


def _summary(policy: str, categories: list[str], chosen: list[Entry], done: dict[str, Outcome],
             seconds: float) -> Summary:  # fmt: skip
    accuracy, counts = {}, {}
    for category in categories:
        outcomes = [done[entry.id] for entry in chosen if entry.category == category]
        counts[category] = len(outcomes)
        accuracy[category] = sum(outcome.valid for outcome in outcomes) / len(outcomes) if outcomes else 0.0
    return Summary(policy, accuracy, counts, statistics.fmean(accuracy.values()), round(seconds, 3))
