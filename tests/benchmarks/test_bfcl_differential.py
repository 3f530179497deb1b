"""Per-entry agreement with bfcl-eval's own pipeline on imperfect play, for both comparable modes.

One scripted weak model (`bfcl_imperfect`: the ground truth with one deterministic mistake per entry) over
real HTTP; `spadework bench bfcl-v4 --mode chat|text` and bfcl-eval's `generate` + `evaluate` (its OpenAI
handler in FC or prompting mode, `bfcl_official`) both play it. Every entry's verdict must agree, and every
request the two pipelines sent must be the same: the same messages (system prompt, turns, reveal messages,
replies, tool results as each protocol returns them) and the same tools, request for request. Entries of
all four categories, each mistake on at least one entry of each category it applies to.
"""

from __future__ import annotations

import importlib.metadata
import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.bfcl.data import CATEGORIES
from benchmarks.bfcl.play import all_entries
from benchmarks.bfcl.run import agreement
from engine.store import read_records
from tests.benchmarks import runs
from tests.benchmarks.bfcl_imperfect import MISTAKES, ImperfectModel
from tests.benchmarks.scripted import serving

ROOT = Path(__file__).resolve().parents[2]
PROTOCOLS = {"chat": "fc", "text": "prompt"}  # spadework's mode -> bfcl-eval's handler mode
OURS, THEIRS = "default", "imperfect"  # the model names each pipeline sends, which tell their requests apart


def plan(protocol: str) -> dict[str, str]:
    """Entry id -> mistake: per category, one entry per mistake (held_out_early only where functions are
    held out), entries chosen in data order among those whose first message is unique in the plan."""
    entries = all_entries()
    chosen: dict[str, str] = {}
    seen: set[str] = set()
    for category in CATEGORIES:
        pool = iter(entry for entry in entries if entry.category == category)
        for mistake in MISTAKES[protocol]:
            if mistake == "held_out_early" and category != "miss_func":
                continue
            entry = next(entry for entry in pool if entry.turns[0][-1]["content"] not in seen)
            seen.add(entry.turns[0][-1]["content"])
            chosen[entry.id] = mistake
    return chosen


def spadework_verdicts(url: str, mode: str, ids: list[str], out: Path) -> dict[str, bool]:
    completed = runs.bench("bfcl-v4", "--no-progress", "--endpoint", url, "--mode", mode, "--ids", ",".join(ids),
                           "--out", str(out), "--concurrency", "8", timeout=600)  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    entries = all_entries()
    records = {entries[record.key.seed].id: record for record in read_records(out)}
    assert all(record.status != "infra_error" for record in records.values()), "an entry failed for infrastructure"
    return {entry: records[entry].reward == 1.0 for entry in ids}


def official_verdicts(url: str, protocol: str, ids: list[str], root: Path) -> dict[str, bool]:
    completed = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.bfcl_official", "--url", url, "--root", str(root), "--protocol",
         protocol, "--ids", ",".join(ids)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    verdicts: dict[str, bool] = json.loads(completed.stdout)
    return verdicts


def request_differences(model: ImperfectModel) -> tuple[int, list[str]]:
    """(requests compared, where the two pipelines' requests for an entry first differ): each entry's requests
    are sent one after another, so they pair up in order."""
    by_entry: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for name in (OURS, THEIRS):
        for body in model.requests.get(name, []):
            by_entry.setdefault(model.entry_of(body).id, {}).setdefault(name, []).append(body)
    compared, differences = 0, []
    for entry, sent in sorted(by_entry.items()):
        ours, theirs = sent.get(OURS, []), sent.get(THEIRS, [])
        if len(ours) != len(theirs):
            differences.append(f"{entry}: {len(ours)} requests here, {len(theirs)} from bfcl-eval")
            continue
        for step, (mine, official) in enumerate(zip(ours, theirs, strict=True)):
            compared += 1
            for part in ("messages", "tools"):
                if mine.get(part) != official.get(part):
                    differences.append(f"{entry}, request {step}: {part} differ:\n  here:     "
                                       f"{json.dumps(mine.get(part))[:1500]}\n  bfcl-eval: "
                                       f"{json.dumps(official.get(part))[:1500]}")  # fmt: skip
                    break
            else:
                continue
            break
    return compared, differences


@pytest.mark.timeout(900)
# chat in the default run; text (15 s of it, the same checker behind another prompt format) in `just test-slow`
@pytest.mark.parametrize(
    "mode", [mode if mode == "chat" else pytest.param(mode, marks=pytest.mark.slow) for mode in sorted(PROTOCOLS)]
)
def test_every_verdict_and_request_agrees_with_bfcl_evals_own_pipeline(mode: str, tmp_path: Path) -> None:
    protocol = PROTOCOLS[mode]
    chosen = plan(protocol)
    ids = list(chosen)
    model = ImperfectModel(list(all_entries()), chosen)
    with serving(model.completion) as url:
        ours = spadework_verdicts(url, mode, ids, tmp_path / "spadework")
        theirs = official_verdicts(url, protocol, ids, tmp_path / "official")
    word = {True: "PASS", False: "FAIL"}
    disagreements = [f"{entry} ({chosen[entry]}): spadework {word[ours[entry]]}, bfcl-eval {word[theirs[entry]]}"
                     for entry in ids if ours[entry] != theirs[entry]]  # fmt: skip
    assert not disagreements, f"{len(disagreements)} of {len(ids)} verdicts differ:\n" + "\n".join(disagreements)
    compared, differences = request_differences(model)
    assert not differences, f"requests differ for {len(differences)} entries:\n" + "\n".join(differences[:5])
    # The mistakes are real: some entries pass and some fail, in both pipelines; every entry was asked.
    assert 0 < sum(theirs.values()) < len(ids)
    assert compared >= 5 * len(ids)
    # What results files quote as this mode's agreement is what was just measured, for the installed bfcl-eval.
    recorded = agreement(mode)
    assert recorded is not None
    measured = (len(ids), len(ids), len(MISTAKES[protocol]), compared, compared)
    assert (recorded["entries"], recorded["agreed"], recorded["mistakes"], recorded["requests"],
            recorded["identical_requests"]) == measured  # fmt: skip
    assert f"bfcl-eval {importlib.metadata.version('bfcl-eval')}:" in str(recorded["against"])


def test_results_files_say_which_bfcl_eval_and_how_comparable_the_mode_is(tmp_path: Path) -> None:
    chosen = dict(itertools.islice(plan("fc").items(), 4))
    with serving(ImperfectModel(list(all_entries()), chosen).completion) as url:
        spadework_verdicts(url, "chat", list(chosen), tmp_path)
    written = runs.results(tmp_path)
    assert written["bfcl_eval"] == importlib.metadata.version("bfcl-eval")
    assert "OpenAICompletionsHandler" in written["comparability"]
    assert written["agreement"] == agreement("chat")
