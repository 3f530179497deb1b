"""The paired replay of a run's worlds with today's hint (`benchmarks/studies/hint_rewording.py`): what it rewords,
its measures and decision rule on hand-made plays, what it refuses, and (slow) a replay on the embedded model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.studies.hint_rewording import Replayed, main, markdown, reworded, summary, worlds_to_replay
from benchmarks.studies.who_learned import CrossError
from engine.local_models import default_gguf
from trainers import journal
from trainers.config import load_config
from trainers.designer.generate import DesignSample
from trainers.designer.loop import DesignOutcome
from trainers.designer.regret import RewardSettings

LIBRARY = Path(__file__).parents[2] / "toolworlds" / "examples" / "library.json"


def test_only_the_hint_is_reworded_from_the_worlds_own_plan() -> None:
    spec = json.loads(LIBRARY.read_text())
    told = reworded(spec)
    assert spec["task"]["hint"].startswith("Search by title") and told["task"]["hint"] == "Use search, then borrow."
    assert {**told, "task": {**told["task"], "hint": spec["task"]["hint"]}} == spec


def test_regret_each_way_shares_the_plain_plays_and_the_rule_needs_an_interval_above_zero() -> None:
    plays = [
        Replayed("a", {}, [0.0, 0.5], {"recorded": [0.5, 0.5], "today": [1.0, 1.0]}),
        Replayed("b", {}, [0.0, 0.0], {"recorded": [0.0, 0.0], "today": [0.5, 0.5]}),
        Replayed("c", {}, [0.5, 0.5], {"recorded": [0.5, 0.5], "today": [1.0, 1.0]}),
    ]
    found = summary(plays, RewardSettings(mode="regret"))
    assert found["worlds"] == 3 and found["unaided_mean"] == pytest.approx((0.25 + 0 + 0.5) / 3)
    assert found["recorded"]["regret"][0] == pytest.approx((0.25 + 0 + 0) / 3)
    assert found["today"]["regret"][0] == pytest.approx((0.75 + 0.5 + 0.5) / 3)
    assert found["today"]["designer_reward"] == pytest.approx((0.75 + 0.5 + 0.5) / 3)
    assert found["difference"] == pytest.approx((0.5, 0.5, 0.5))  # every world gains 0.5 with today's hint
    assert found["today_stays"]
    one_gains = [*plays[:2], Replayed("c", {}, [0.5, 0.5], {"recorded": [0.5, 0.5], "today": [0.5, 0.5]})]
    assert not summary(one_gains, RewardSettings(mode="regret"))["today_stays"]  # a resample of c alone: 0
    swapped = [{"recorded": p.hinted["today"], "today": p.hinted["recorded"]} for p in plays]
    worse = [Replayed(p.key, {}, p.plain, hinted) for p, hinted in zip(plays, swapped, strict=True)]
    assert not summary(worse, RewardSettings(mode="regret"))["today_stays"]


def test_a_replay_with_no_world_judged_prints_dashes_not_a_crash() -> None:
    found = summary([Replayed("a", {}, [], {"recorded": [], "today": []})], RewardSettings(mode="regret"))
    assert found["worlds"] == 0 and not found["today_stays"]
    assert "0 worlds, unaided mean score -" in markdown(found, None)


def outcome(iteration: int, key: str, world_hash: str | None) -> DesignOutcome:
    sample = DesignSample(key=key, document="d", prompt_version="v", messages=[])
    valid = world_hash is not None
    return DesignOutcome(iteration=iteration, sample=sample, reward=0.5 if valid else -1.0, world_hash=world_hash,
                         regret=0.25 if valid else None, mean_plain=0.25 if valid else None,
                         mean_hinted=0.5 if valid else None)  # fmt: skip


def a_run(path: Path) -> Path:
    """A run directory with the cpu-tiny config, the library world as its one valid design of iteration 0, an
    invalid design, and a valid one of iteration 4 (after the main job's four)."""
    (path / "worlds").mkdir(parents=True)
    (path / "weights").mkdir()
    config = load_config("cpu-tiny", ["agent.plays=2"])
    (path / "config.json").write_text(config.model_dump_json())
    shutil.copy(LIBRARY, path / "worlds" / f"{'ab' * 8}.json")
    shutil.copy(LIBRARY, path / "worlds" / f"{'cd' * 8}.json")
    designs = [outcome(0, "designer/0/0/0", "ab" * 16), outcome(0, "designer/0/0/1", None),
               outcome(4, "designer/4/0/0", "cd" * 16)]  # fmt: skip
    journal.append(path / "designs.jsonl", designs)
    return path


def test_the_valid_worlds_of_the_first_iterations_are_replayed(tmp_path: Path) -> None:
    run = a_run(tmp_path / "run")
    assert worlds_to_replay(run, 4) == [("designer/0/0/0", run / "worlds" / f"{'ab' * 8}.json")]
    assert len(worlds_to_replay(run, 5)) == 2
    with pytest.raises(CrossError, match="no valid spec world in its first 0 iterations"):
        worlds_to_replay(run, 0)
    assert main(["--run", str(run), "--iterations", "0"]) == 2  # said, not raised


@pytest.mark.slow
@pytest.mark.timeout(900)  # one world, two versions, two plays a side each, on 2 cores
def test_a_replay_on_the_embedded_model(tmp_path: Path) -> None:
    run = a_run(tmp_path / "run")
    shutil.copy(default_gguf(), run / "weights" / "policy-v00001.gguf")
    assert main(["--run", str(run)]) == 0
    out = run / "hint-rewording"
    replayed = json.loads((out / "designer-0-0-0" / "replayed.json").read_text())
    assert replayed["hints"] == {"recorded": json.loads(LIBRARY.read_text())["task"]["hint"],
                                 "today": "Use search, then borrow."}  # fmt: skip
    assert len(replayed["plain"]) == 4 and all(len(replayed["hinted"][v]) == 2 for v in ("recorded", "today"))
    found = json.loads((out / "rewording.json").read_text())
    assert found["worlds"] == 1 and "today's wording" in (out / "rewording.md").read_text()
    stored = {path: path.stat().st_mtime_ns for path in out.rglob("*.jsonl")}
    assert main(["--run", str(run)]) == 0
    assert {path: path.stat().st_mtime_ns for path in out.rglob("*.jsonl")} == stored  # read back, not played again
