"""`spadework report` on runs that have little to show: the page still renders, and a directory that is
not a run is named as such. (A real run's report is rendered in `test_train_run.py`.)"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.servers import SPADEWORK
from trainers.config import load_config
from trainers.designer.measures import TRENDS
from trainers.report import PLOTS, read_run, summary, summary_json, write_report


def test_a_run_killed_before_its_first_iteration_still_reports(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(load_config("cpu-tiny").model_dump_json())
    held = {"after_iteration": -1, "success_plain": {"banking": 0.0}, "success_hinted": {"banking": 0.5},
            "mean_plain": 0.0, "mean_hinted": 0.5, "seconds": 90.0}  # fmt: skip
    (tmp_path / "eval.jsonl").write_text(json.dumps(held) + "\n")
    page = write_report(read_run(tmp_path))
    assert page == tmp_path / "report" / "index.html"
    assert all((tmp_path / "report" / f"{name}.png").stat().st_size > 1000 for name in PLOTS)
    rows = dict(summary(read_run(tmp_path)))
    assert rows["iterations done"] == f"0 of {load_config('cpu-tiny').run.iterations}"
    assert rows["full reference tasks, success with hint"] == "50.0% (after -1) -> 50.0% (after -1)"


def test_a_run_that_played_no_full_reference_tasks_reports_without_them(tmp_path: Path) -> None:
    """`run.eval_seeds=0` (cpu-tiny): the held-out lines carry no full-task shares, and no row claims one."""
    (tmp_path / "config.json").write_text(load_config("cpu-tiny").model_dump_json())
    lines = [held_out_line(after, [0.0, 1.0], success_plain={}, success_hinted={}, mean_plain=None,
                           mean_hinted=None) for after in (-1, 0)]  # fmt: skip
    (tmp_path / "eval.jsonl").write_text("\n".join(lines) + "\n")
    write_report(read_run(tmp_path))
    rows = dict(summary(read_run(tmp_path)))
    assert not [what for what in rows if what.startswith("full reference tasks")]
    assert rows["lift in success (95% CI, paired over tasks)"] == "+0.0% [+0.0%, +0.0%]"


def test_a_directory_that_is_not_a_run_is_refused(tmp_path: Path) -> None:
    completed = subprocess.run([*SPADEWORK, "report", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 2 and "config.json is missing" in completed.stderr
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "train.jsonl").write_text('{"iteration": "zero"}\n')
    completed = subprocess.run([*SPADEWORK, "report", str(tmp_path)], capture_output=True, text=True, timeout=120,
                               env={**os.environ, "COLUMNS": "300"})  # fmt: skip
    assert completed.returncode == 2 and "train.jsonl: a record does not parse (iteration:" in completed.stderr


def held_out_line(after: int, rewards: list[float], **extra: object) -> str:
    tasks = [{"world": "banking", "seed": 10_000_000 + i, "reward": reward} for i, reward in enumerate(rewards)]
    line = {"after_iteration": after, "suite": "reference-lite/v1", "tasks": tasks,
            "success_plain": {"banking": 0.0}, "success_hinted": {"banking": 0.0}, "mean_plain": 0.0,
            "mean_hinted": 0.0, "seconds": 10.0, **extra}  # fmt: skip
    return json.dumps(line)


def test_summary_json_states_before_after_and_the_paired_lift(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(load_config("cpu-tiny").model_dump_json())
    before = [0.0, 0.5, 1.0, 0.0]  # one success of four; partial credit 0.375
    after = [1.0, 0.5, 1.0, None]  # two of the three scored tasks; the fourth failed (infra): left out
    lines = [held_out_line(-1, before, elapsed_s=60.0, peak_rss_gb=3.5),  # type: ignore[arg-type]
             held_out_line(0, after, elapsed_s=600.0, peak_rss_gb=4.25)]  # type: ignore[arg-type]  # fmt: skip
    (tmp_path / "eval.jsonl").write_text("\n".join(lines) + "\n")
    write_report(read_run(tmp_path))
    summary_file = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary_file["suite"] == "reference-lite/v1"
    assert summary_file["before"] == {"after_iteration": -1, "success": 0.25, "partial_credit": 0.375, "episodes": 4,
                                      "failed_episodes": 0}  # fmt: skip
    assert summary_file["after"] == {"after_iteration": 0, "success": round(2 / 3, 4),
                                     "partial_credit": round(2.5 / 3, 4), "episodes": 3,
                                     "failed_episodes": 1}  # fmt: skip
    # paired over the three tasks scored both times: differences +1, 0, 0 in success
    assert summary_file["lift"] == round(1 / 3, 4) and summary_file["lift_ci95"] == [0.0, 1.0]
    assert summary_file["partial_credit_lift"] == round(1 / 3, 4)
    assert summary_file["minutes"] == 10.0 and summary_file["peak_rss_gb"] == 4.25
    rows = dict(summary(read_run(tmp_path)))
    assert rows["lift in success (95% CI, paired over tasks)"] == "+33.3% [+0.0%, +100.0%]"


def design_line(key: str, valid: bool, plain: float | None = None, regret: float | None = None,
                reward: float = -1.0, grounding: float | None = None, solved: float | None = None) -> str:  # fmt: skip
    sample = {"key": key, "document": "tables:x", "prompt_version": "designer-spec-v5", "messages": [], "reply": "{}"}
    line = {"iteration": int(key.split("/")[1]), "sample": sample, "verdict": {"valid": valid}, "reward": reward,
            "mean_plain": plain, "mean_hinted": None if plain is None else plain + (regret or 0.0),
            "regret": regret, "grounding": grounding, "solved_plain": solved}  # fmt: skip
    return json.dumps(line)


def test_summary_json_states_the_designers_frontier_spread_and_grounding(tmp_path: Path) -> None:
    """Worlds whose answers are known: two groups of three designs, four valid worlds."""
    (tmp_path / "config.json").write_text(load_config("cpu-tiny").model_dump_json())
    designs = [
        design_line("designer/0/0/0", True, plain=0.0, regret=0.0, reward=0.0, grounding=0.8),  # too hard
        design_line("designer/0/0/1", True, plain=0.5, regret=0.25, reward=0.25, grounding=0.2),  # frontier
        design_line("designer/0/0/2", False),
        design_line("designer/0/1/0", True, plain=1.0, regret=0.0, reward=0.0, grounding=0.6),  # too easy
        design_line("designer/0/1/1", True, plain=0.0, regret=0.0, reward=0.0, grounding=0.5),  # too hard
        design_line("designer/0/1/2", False),
    ]
    (tmp_path / "designs.jsonl").write_text("\n".join(designs) + "\n")
    designer = json.loads((write_report(read_run(tmp_path)).parent / "summary.json").read_text())["designer"]
    assert designer["replies"] == 6 and designer["valid"] == 4 and designer["frontier"] == 1
    assert designer["groups"] == 2 and designer["groups_with_valid_spread"] == 1  # group 1 pays its valid all 0.0
    assert designer["regret_mean"] == 0.0625 and designer["regret_ci95"][0] == 0.0
    assert designer["grounded"] == 3 and designer["grounding_mean"] == round(2.1 / 4, 4)
    rows = dict(summary(read_run(tmp_path)))
    assert rows["valid worlds at the frontier; mean regret (95% CI)"].startswith("1 of 4; +0.062 [+0.000, ")
    assert rows["designer groups with reward spread among valid designs"] == "1 of 2"
    assert rows["valid worlds grounded in their document"] == "3 of 4"


def test_the_designer_per_iteration_and_the_trend_of_its_frontier_and_reward(tmp_path: Path) -> None:
    """Three iterations whose answers are known: the first third (iteration 0) has no world at the frontier,
    the last (iteration 2) has both of its valid worlds there, so the frontier share rises by exactly 1."""
    (tmp_path / "config.json").write_text(load_config("cpu-selfplay").model_dump_json())
    designs = [
        design_line("designer/0/0/0", True, plain=0.0, regret=0.0, reward=0.0, solved=0.0),  # too hard
        design_line("designer/0/0/1", True, plain=1.0, regret=0.0, reward=0.0, solved=1.0),  # too easy
        design_line("designer/0/0/2", False),  # paid -1
        design_line("designer/1/0/0", True, plain=0.5, regret=0.0, reward=0.6, solved=0.5),
        design_line("designer/1/0/1", False),
        design_line("designer/2/0/0", True, plain=0.25, regret=0.25, reward=0.9, solved=0.25),  # wins 20-80%
        design_line("designer/2/0/1", True, plain=0.75, regret=0.0, reward=0.6, solved=0.9),  # wins >80%
    ]
    (tmp_path / "designs.jsonl").write_text("\n".join(designs) + "\n")
    page = write_report(read_run(tmp_path))
    designer = json.loads((page.parent / "summary.json").read_text())["designer"]
    first, second, third = designer["per_iteration"]
    assert (first["valid"], first["replies"], first["frontier"], first["frontier_share"]) == (2, 3, 0, 0.0)
    assert first["unaided_win_rate"] == {"0": 1, "<20%": 0, "20-80%": 0, ">80%": 0, "1": 1}
    assert first["reward_mean"] == round(-1 / 3, 4) and first["plain_mean"] == 0.5 and first["hinted_mean"] == 0.5
    assert second["reward_mean"] == round((0.6 - 1.0) / 2, 4) and second["frontier_share"] == 1.0
    assert third["unaided_win_rate"] == {"0": 0, "<20%": 0, "20-80%": 1, ">80%": 1, "1": 0}
    assert third["regret_mean"] == 0.125 and third["reward_mean"] == 0.75
    frontier, reward = designer["trend"]["frontier_share"], designer["trend"]["designer_reward"]
    assert frontier["first_iterations"] == [0] and frontier["last_iterations"] == [2]
    assert (frontier["first"], frontier["last"], frontier["difference"], frontier["ci95"]) == (
        0.0,
        1.0,
        1.0,
        [1.0, 1.0],
    )
    assert frontier["samples"] == [2, 2]
    assert reward["difference"] == round(0.75 - (-1 / 3), 4) and reward["ci95"][0] > 0
    # the valid worlds' scores: regret 0 -> 0.125, hinted 0.5 -> 0.625, unaided 0.5 -> 0.5
    differences = {name: designer["trend"][name]["difference"] for name in ("regret", "hinted_mean", "unaided_mean")}
    assert differences == {"regret": 0.125, "hinted_mean": 0.125, "unaided_mean": 0.0}
    rows = dict(summary(read_run(tmp_path)))
    assert rows["trend: frontier share of valid worlds, last third - first third (95% CI)"] == (
        "0.000 -> 1.000, +1.000 [+1.000, +1.000]"
    )
    assert rows["trend: regret of valid worlds, last third - first third (95% CI)"].startswith("0.000 -> 0.125, +0.125")
    assert "unaided wins 20-80%" in page.read_text()


def test_fewer_than_three_designer_iterations_have_no_trend(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(load_config("cpu-tiny").model_dump_json())
    designs = [design_line("designer/0/0/0", True, plain=0.5, regret=0.0, reward=0.6, solved=0.5),
               design_line("designer/1/0/0", True, plain=0.0, regret=0.0, reward=0.0, solved=0.0)]  # fmt: skip
    (tmp_path / "designs.jsonl").write_text("\n".join(designs) + "\n")
    designer = summary_json(read_run(tmp_path))["designer"]
    assert set(designer["trend"]) == set(TRENDS) == {"frontier_share", "designer_reward", "regret", "hinted_mean",
                                                     "unaided_mean"}  # fmt: skip
    assert all(found is None for found in designer["trend"].values())
    assert [row["frontier"] for row in designer["per_iteration"]] == [1, 0]
