"""The designer-against-agent cross of a self-play run (`benchmarks/studies/who_learned.py`): its effects on
hand-computed cells, its decision rules, what it reads from a run, and (slow) the whole cross on the
embedded model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.studies.who_learned import (
    Cells,
    CrossError,
    Scored,
    cell_row,
    claim,
    effects,
    main,
    own_plays,
    run_config,
    trained_weights,
    verdicts,
)
from engine.local_models import default_gguf
from trainers.config import load_config
from trainers.designer.generate import DesignSample
from trainers.designer.loop import DesignOutcome


def cells() -> Cells:
    """Two designers' replies as each agent scored them: the untrained designer wrote an invalid reply (a) and two
    valid worlds (b, c); the trained one two valid worlds (d, e)."""
    a, c = Scored("a", -1.0), Scored("c", 0.6, 0.25, 0.5, 0.75)
    return {
        ("untrained", "untrained"): [a, Scored("b", 0.0, 0.0, 0.0, 0.0), c],
        ("untrained", "trained"): [a, Scored("b", 1.0, 0.5, 0.0, 0.5), c],
        ("trained", "untrained"): [Scored("d", 0.6, 0.25, 0.5, 0.75), Scored("e", 1.0, 0.5, 0.5, 1.0)],
        ("trained", "trained"): [Scored("d", 1.0, 0.5, 0.5, 1.0), Scored("e", 1.0, 0.5, 0.5, 1.0)],
    }  # fmt: skip


def measured(found: dict[str, tuple[float, float, float] | None], name: str) -> tuple[float, float, float]:
    effect = found[name]
    assert effect is not None, name
    return effect


def test_effects_separate_the_designer_from_the_agent() -> None:
    found = effects(cells())
    # the trained designer's replies, played by the untrained agent: mean(0.6, 1.0) = 0.8 against
    # mean(-1, 0, 0.6) = -0.1333 (the invalid reply paid the penalty)
    assert measured(found, "designer effect on the designer's reward, untrained agent")[0] == pytest.approx(
        0.8 + 0.4 / 3
    )
    assert measured(found, "designer effect on regret, untrained agent")[0] == pytest.approx(0.375 - 0.125)
    assert measured(found, "designer effect on regret, trained agent")[0] == pytest.approx(0.5 - 0.375)
    # paired by world, over valid worlds only: b +0.5, c 0, d +0.25, e 0
    assert measured(found, "agent effect on regret, both designers' worlds")[0] == pytest.approx(0.1875)
    assert measured(found, "agent effect on reward, both designers' worlds")[0] == pytest.approx(
        (1.0 + 0 + 0.4 + 0) / 4
    )
    assert measured(found, "trained designer and agent minus untrained, the designer's reward")[0] == pytest.approx(
        1 + 0.4 / 3
    )
    low, high = measured(found, "agent effect on regret, both designers' worlds")[1:]
    assert 0.0 <= low <= 0.1875 <= high <= 0.5


def test_a_world_invalid_for_one_agent_is_left_out_of_the_pairs() -> None:
    crossed = cells()
    crossed[("trained", "trained")][0] = Scored("d", -1.0)  # broken in the trained agent's plays
    found = effects(crossed)
    assert measured(found, "agent effect on regret, both designers' worlds")[0] == pytest.approx((0.5 + 0 + 0) / 3)


def test_the_decisions_need_an_interval_above_zero() -> None:
    found = effects(cells())
    found["designer effect on the designer's reward, untrained agent"] = (0.2, 0.01, 0.4)
    found["agent effect on regret, both designers' worlds"] = (0.2, 0.0, 0.4)  # touches zero: not shown
    assert verdicts(found) == {"the designer learned": True, "the agent learned to use hints": False}
    found["designer effect on the designer's reward, untrained agent"] = None  # nothing valid to compare
    assert verdicts(found)["the designer learned"] is False


def test_a_cell_counts_its_valid_worlds_and_their_frontier() -> None:
    row = cell_row(cells()[("untrained", "untrained")])
    assert (row["replies"], row["valid"], row["at the frontier"]) == (3, 2, 1)  # c: unaided 0.5
    assert row["designer reward"] == pytest.approx(-0.4 / 3)
    assert row["mean regret"][0] == pytest.approx(0.125)
    assert (row["unaided mean"], row["hinted mean"]) == (0.25, 0.375)


def outcome(key: str, reward: float | None, regret: float | None = None) -> DesignOutcome:
    sample = DesignSample(key=key, document="d", prompt_version="v", messages=[])
    plain = None if regret is None else 0.25
    hinted = None if regret is None else 0.25 + regret
    return DesignOutcome(iteration=0, sample=sample, reward=reward, regret=regret, mean_plain=plain, mean_hinted=hinted)


def test_own_plays_keep_what_the_designers_run_paid_and_leave_out_masked_worlds() -> None:
    designs = [outcome("a", -1.0), outcome("b", None, 0.0), outcome("c", 0.5, 0.25)]
    assert own_plays(designs) == [Scored("a", -1.0), Scored("c", 0.5, 0.25, 0.25, 0.5)]


def test_the_trained_policy_is_the_last_served_version(tmp_path: Path) -> None:
    with pytest.raises(CrossError, match="no policy-v"):
        trained_weights(tmp_path)
    weights = tmp_path / "weights"
    weights.mkdir()
    for name in ("policy-v00009.gguf", "policy-v00010.gguf", "policy-v00010.gguf.partial", "base.gguf"):
        (weights / name).write_bytes(b"")
    assert trained_weights(tmp_path) == weights / "policy-v00010.gguf"


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [(["policy.lora_rank=4"], "LoRA adapter"), (["ablations.fixed_pool=true"], "no designer")],
)
def test_runs_the_cross_cannot_serve_are_refused_by_name(tmp_path: Path, overrides: list[str], reason: str) -> None:
    (tmp_path / "config.json").write_text(load_config("cpu-tiny", overrides).model_dump_json())
    with pytest.raises(CrossError, match=reason):
        run_config(tmp_path)
    assert main(["--run", str(tmp_path)]) == 2


@pytest.mark.slow
@pytest.mark.timeout(1800)  # two designers' worlds, each played by both policies, on 2 cores
def test_the_cross_on_the_embedded_model(tmp_path: Path) -> None:
    """A run directory holding the cpu-tiny config (one document, two designs, two plays a side) and, as its
    "trained" policy, the embedded default GGUF: both designers write, both agents play every valid world."""
    run = tmp_path / "run"
    (run / "weights").mkdir(parents=True)
    config = load_config("cpu-tiny", ["designer.documents=1", "designer.generations=2", "agent.plays=2",
                                      "designer.smoke_seeds=2"])  # fmt: skip
    (run / "config.json").write_text(config.model_dump_json())
    shutil.copy(default_gguf(), run / "weights" / "policy-v00002.gguf")
    assert main(["--run", str(run), "--iterations", "1"]) == 0
    out = run / "who-learned"
    crossed = json.loads((out / "cross.json").read_text())
    assert [(cell["designer"], cell["agent"]) for cell in crossed["cells"]] == [
        ("untrained", "untrained"), ("untrained", "trained"), ("trained", "untrained"), ("trained", "trained")
    ]  # fmt: skip
    assert all(cell["replies"] == 2 for cell in crossed["cells"])
    for designer, agent in (("untrained", "trained"), ("trained", "untrained")):
        valid = next(c for c in crossed["cells"] if (c["designer"], c["agent"]) == (designer, designer))["valid"]
        played = sorted((out / f"designer-{designer}" / f"played-by-{agent}").glob("*/episodes.jsonl"))
        assert len(played) == valid  # every valid world, played again by the other policy
        assert all(len(path.read_text().splitlines()) == 4 for path in played)  # 2 plays a side
    assert "the designer learned" in (out / "cross.md").read_text()
    stored = {path: path.stat().st_mtime_ns for path in out.rglob("*.jsonl")}
    assert main(["--run", str(run), "--iterations", "1"]) == 0
    assert {path: path.stat().st_mtime_ns for path in out.rglob("*.jsonl")} == stored  # read back, not played again


def test_a_cross_continues_only_for_the_run_and_seed_it_started_with(tmp_path: Path) -> None:
    out = tmp_path / "cross"
    claim(out, {"run": "/runs/a", "trained": "policy-v00010.gguf", "seed": 1})
    claim(out, {"run": "/runs/a", "trained": "policy-v00010.gguf", "seed": 1})  # the same cross, resumed
    with pytest.raises(CrossError, match="differs in: seed"):
        claim(out, {"run": "/runs/a", "trained": "policy-v00010.gguf", "seed": 2})
    assert json.loads((out / "plan.json").read_text())["seed"] == 1  # what was there stays
