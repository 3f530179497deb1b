"""A BFCL v4 multi-turn run, then the accuracy per category and overall (the unweighted mean of the
categories, as the leaderboard computes it), as `results.json` and a Markdown table beside the anchors.

Self-test policies play in this process into a journal of their own (`entries.jsonl`); a model plays through
the engine into a trajectory store (`benchmarks.bfcl.play`). Both resume."""

from __future__ import annotations

import importlib.metadata
import json
import statistics
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.progress import Progress

from benchmarks.bfcl.data import CATEGORIES, Entry
from benchmarks.bfcl.episode import MAX_STEPS, POLICIES, BFCLEpisode, Outcome
from benchmarks.bfcl.play import BFCLRun, all_entries, play_bfcl, seeds_of

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
    policy: str  # a self-test policy, or "model"
    accuracy: dict[str, float]  # category -> share of entries correct
    entries: dict[str, int]
    overall: float
    seconds: float
    model: str | None = None  # for model runs: what played, how, and against which server
    style: str | None = None
    endpoint: str | None = None
    infra_errors: int = 0
    force_terminated: int = 0  # entries cut after 21 calling steps in a turn (failed, unless it was the last)
    temperature: float | None = None
    max_tokens: int | None = None  # per reply

    @property
    def label(self) -> str:
        return self.policy if self.model is None else f"{self.model} ({self.style})"


def run_bfcl(out: Path, policy: str, chosen: list[Entry]) -> Summary:
    """Play the `chosen` entries with `policy`, resuming a run already in `out` (entries played before are
    not played again, whatever entries it chose then), and write `results.json` and `results.md` there."""
    _claim(out, {"benchmark": "bfcl-v4-multi-turn", "policy": policy})  # categories and limit may grow
    done = {outcome.id: outcome for outcome in read_outcomes(out)}
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
    verdicts = [(entry.category, done[entry.id].valid) for entry in chosen]
    summary = Summary(policy, *_accuracy(verdicts), round(time.perf_counter() - started, 3))
    write_results(out, summary)
    return summary


def run_bfcl_model(out: Path, spec: BFCLRun, urls: list[str], chosen: list[Entry], concurrency: int,
                   progress: bool = True) -> Summary:  # fmt: skip
    """Play the `chosen` entries with the model behind `urls` (resuming `out`), score them, write the results."""
    played = play_bfcl(out, spec, urls, seeds_of(chosen), concurrency, progress)
    entries = all_entries()
    verdicts = [(entries[seed].category, record.reward == 1.0) for seed, record in sorted(played.records.items())]
    summary = Summary(
        "model",
        *_accuracy(verdicts),
        round(played.seconds, 3),
        model=spec.settings.model,
        style=spec.style,
        endpoint=spec.endpoint,
        infra_errors=sum(record.status == "infra_error" for record in played.records.values()),
        force_terminated=sum(record.cause == "user_turn_limit" for record in played.records.values()),
        temperature=spec.settings.temperature,
        max_tokens=spec.settings.max_tokens_per_turn,
    )
    write_results(out, summary)
    return summary


def write_results(out: Path, summary: Summary) -> None:
    """`results.json` (the summary, with the bfcl-eval version, what the mode is comparable to, and the last
    differential test against bfcl-eval's own pipeline) and `results.md`."""
    provenance = {
        "bfcl_eval": importlib.metadata.version("bfcl-eval"),
        "comparability": COMPARABILITY[summary.style],
        "agreement": agreement(summary.style),
    }
    (out / "results.json").write_text(json.dumps({**asdict(summary), "label": summary.label, **provenance}, indent=2))
    (out / "results.md").write_text(markdown(summary))


def read_outcomes(out: Path) -> list[Outcome]:
    path = out / JOURNAL
    if not path.exists():
        return []
    return [Outcome(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


AGREEMENT_FILE = Path(__file__).with_name("agreement.json")


def agreement(style: str | None) -> dict[str, object] | None:
    """The last per-entry comparison of this mode with bfcl-eval's own pipeline on imperfect play
    (`tests/benchmarks/test_bfcl_differential.py` checks it is still true); None for a mode never compared."""
    recorded: dict[str, dict[str, object]] = json.loads(AGREEMENT_FILE.read_text())
    return recorded.get(style or "")


COMPARABILITY = {
    None: "`ground-truth` and `none` replay the answer or call nothing (harness self-tests: they must give 100% "
    "and 0%).",
    "chat": "`chat` is bfcl-eval's FC protocol as its OpenAICompletionsHandler plays it (its tools, no system "
    "prompt, only `tool_calls` are calls, a reply that cannot be decoded ends the turn), comparable to the (FC) rows "
    "when all 200 entries per category are played.",
    "text": "`text` is bfcl-eval's prompting protocol as its OpenAICompletionsHandler plays it (its system prompt, "
    "`[func(a=1)]` replies decoded by its rules, its results message), comparable to the (Prompt) rows when all 200 "
    "entries per category are played; calls naming anything but the entry's functions, and argument expressions "
    "beyond arithmetic on literals, are never run here (bfcl-eval evals them).",
    "constrained": "`constrained` forces every reply into one JSON call and ends a turn with `finish`: spadework's "
    "own protocol, not comparable to the leaderboard.",
}


def markdown(summary: Summary) -> str:
    """The run's row beside the published anchors, with what makes it comparable or not."""
    columns = ["base", "miss_func", "miss_param", "long_context"]
    header = "| model | overall | " + " | ".join(columns) + " |\n|---|---|" + "---|" * len(columns) + "\n"
    cells = [f"{summary.accuracy[c]:.1%} ({summary.entries[c]})" if c in summary.accuracy else "–" for c in columns]
    rows = f"| **this run: {summary.label}** | **{summary.overall:.1%}** | " + " | ".join(cells) + " |\n"
    for name, (overall, *parts) in ANCHORS.items():
        rows += f"| {name} | {overall:.1f}% | " + " | ".join(f"{part:.1f}%" for part in parts) + " |\n"
    note = (
        "\nAnchors: BFCL leaderboard, 2025-12-16 data, all 200 entries per category. This run's numbers cover the "
        f"entries in brackets. {COMPARABILITY[summary.style]}\n"
    )
    if summary.model is not None:
        note += (
            f"\nServed by {summary.endpoint}, temperature {summary.temperature:g}, at most {summary.max_tokens} tokens "
            f"per reply; {summary.seconds:.0f} s. "
            f"Infrastructure failures (counted wrong): {summary.infra_errors}; entries cut after "
            f"{MAX_STEPS + 1} steps in a turn: {summary.force_terminated}.\n"
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


Verdicts = list[tuple[str, bool]]  # (category, correct) per entry


def _accuracy(verdicts: Verdicts) -> tuple[dict[str, float], dict[str, int], float]:
    """Per category played: the share correct and the count; and their unweighted mean (the leaderboard's)."""
    accuracy, counts = {}, {}
    for category in CATEGORIES:
        outcomes = [valid for where, valid in verdicts if where == category]
        if outcomes:
            counts[category] = len(outcomes)
            accuracy[category] = sum(outcomes) / len(outcomes)
    return accuracy, counts, statistics.fmean(accuracy.values()) if accuracy else 0.0
