"""Does today's hint help more than the one a run's worlds were written with? A paired replay.

A world's regret is the hint's help: the agent's mean score with it minus without. When trusted code words the
hint (`designer.task_text=derived`), how it is worded is spadework's choice, not the designer's, and it
decides how much regret any world can show. This replays the valid worlds of a finished run's first
iterations, each twice by the run's untrained policy (its base weights, served as the run served them): as
recorded, and with the hint worded by today's `derived_hint` from the world's own plan. Each
version is played K times each way (`play_both_ways`); the instruction is the same in both, so the 2K plain
plays are pooled as the unaided score of both. Printed: mean regret of the worlds with each hint and the
paired difference (hinted today minus hinted as recorded, per world), each with a 95% bootstrap interval over
worlds, and the designer's mean reward each way.

A candidate wording is tested by making it `derived_hint`'s and replaying worlds written before it; the rule,
fixed before the first replay (2026-12-06): it stays iff the paired difference has a 95% interval above zero.
The first candidate, "Use <tool>, then call finish.", did not (docs/runs.md): the agent finished at once twice
as often, and after the call no more often.

    python benchmarks/studies/hint_rewording.py --run runs/train-selfplay/<time>     # or: just hint-rewording RUN

A world's finished plays are read back, so a killed replay resumes. Written to OUT (default
RUN/hint-rewording): the two versions of each world and their plays under `<design key>/`, `rewording.json`
and `rewording.md`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio
import typer

from benchmarks.studies.who_learned import CrossError, export_untrained, run_config, serving
from toolworlds.episode import LocalWorld
from toolworlds.registry import load_world
from toolworlds.spec import Spec
from trainers.config import TrainConfig
from trainers.designer.loop import play_both_ways, read_designs, world_file
from trainers.designer.regret import Regret, RewardSettings, designer_reward
from trainers.designer.task_text import derived_hint
from trainers.stats import bootstrap_mean

VERSIONS = ("recorded", "today")


@dataclass(frozen=True)
class Replayed:
    """One world's plays: the plain scores of both versions, pooled, and each version's hinted scores."""

    key: str
    hints: dict[str, str]
    plain: list[float]
    hinted: dict[str, list[float]]

    def regret(self, version: str) -> Regret:
        return Regret(plain=self.plain, hinted=self.hinted[version], masked=0)


def reworded(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec with its hint worded by today's `derived_hint` from its own tools and plan."""
    task = dict(spec["task"], hint=derived_hint(Spec.model_validate(spec).tools, spec["task"]["plan"]))
    return dict(spec, task=task)


def worlds_to_replay(run: Path, iterations: int) -> list[tuple[str, Path]]:
    """(design key, world file) of every valid design of the run's first `iterations` iterations."""
    chosen = []
    for design in read_designs(run):
        path = world_file(run, design)
        if design.iteration < iterations and design.regret is not None and path is not None and path.suffix == ".json":
            chosen.append((design.sample.key, path))
    if not chosen:
        raise CrossError(f"{run} has no valid spec world in its first {iterations} iterations")
    return chosen


async def replay(run: Path, config: TrainConfig, source: Path, out: Path, iterations: int) -> list[Replayed]:
    """Each chosen world in both versions, K plays each way, by the run's untrained policy (`source`, served
    with the run's `config`); finished worlds are read back from `out`."""
    done, pending = [], []
    for key, path in worlds_to_replay(run, iterations):
        cached = out / key.replace("/", "-") / "replayed.json"
        if cached.exists():
            done.append(Replayed(**json.loads(cached.read_text())))
        else:
            pending.append((key, path))
    if not pending:
        return done
    gguf = export_untrained(source, out / "untrained.gguf")
    async with serving(config, source, gguf) as (endpoints, settings):
        play = uuid.uuid4().hex[:12]
        for key, path in pending:
            directory = out / key.replace("/", "-")
            recorded = json.loads(path.read_text())
            versions = {"recorded": recorded, "today": reworded(recorded)}
            plain: list[float] = []
            hinted: dict[str, list[float]] = {}
            for version, spec in versions.items():
                world = directory / f"{version}.json"
                world.parent.mkdir(parents=True, exist_ok=True)
                world.write_text(json.dumps(spec, indent=2) + "\n")
                opened = LocalWorld(load_world(str(world)))
                regret = (await play_both_ways(endpoints, settings, play, world, opened, directory / version)).regret
                plain += regret.plain
                hinted[version] = regret.hinted
            one = Replayed(key, {v: s["task"]["hint"] for v, s in versions.items()}, plain, hinted)
            (directory / "replayed.json").write_text(json.dumps(asdict(one), indent=2) + "\n")
            done.append(one)
    return done


def summary(replayed: list[Replayed], reward: RewardSettings) -> dict[str, Any]:
    """Mean regret and designer reward per version, and the paired difference of hinted scores, over worlds."""
    judged = [r for r in replayed if r.plain and all(r.hinted[v] for v in VERSIONS)]
    found: dict[str, Any] = {"worlds": len(judged), "unaided_mean": statistics.fmean(
        statistics.fmean(r.plain) for r in judged) if judged else None}  # fmt: skip
    for version in VERSIONS:
        regrets = [r.regret(version).value for r in judged]
        rewards = [designer_reward(r.regret(version), reward) for r in judged]
        found[version] = {
            "regret": bootstrap_mean(regrets) if regrets else None,
            "designer_reward": statistics.fmean(x for x in rewards if x is not None) if judged else None,
        }
    differences = [statistics.fmean(r.hinted["today"]) - statistics.fmean(r.hinted["recorded"]) for r in judged]
    found["difference"] = bootstrap_mean(differences) if differences else None
    found["today_stays"] = bool(differences) and found["difference"][1] > 0
    return found


def markdown(found: dict[str, Any], example: Replayed | None) -> str:
    def interval(value: tuple[float, float, float] | None) -> str:
        return "-" if value is None else f"{value[0]:+.3f} [{value[1]:+.3f}, {value[2]:+.3f}]"

    def number(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    lines = [
        f"{found['worlds']} worlds, unaided mean score {number(found['unaided_mean'])} (plain plays of both versions)",
        "",
        "| hint | mean regret (95% CI) | designer reward |",
        "|---|---|---|",
        *(f"| {v} | {interval(found[v]['regret'])} | {number(found[v]['designer_reward'])} |" for v in VERSIONS),
        "",
        f"Hinted score, today minus recorded, paired by world: {interval(found['difference'])}; "
        f"today's wording {'stays' if found['today_stays'] else 'does not stay'} by the rule.",
    ]
    if example is not None:
        lines += ["", f"For example ({example.key}): {example.hints['recorded']!r} -> {example.hints['today']!r}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, required=True, help="A finished `spadework train` run directory.")
    parser.add_argument("--out", type=Path, help="Where the replay is written (default: RUN/hint-rewording).")
    parser.add_argument("--iterations", type=int, default=4, help="Replay the worlds of the run's first N "
                        "iterations (default 4, the main job's).")  # fmt: skip
    args = parser.parse_args(argv)
    out: Path = args.out or args.run / "hint-rewording"
    try:
        config, source = run_config(args.run)
        out.mkdir(parents=True, exist_ok=True)
        replayed = anyio.run(replay, args.run, config, source, out, args.iterations)
    except (ValueError, typer.BadParameter) as error:  # a CrossError, ConfigError; the model not installed
        print(f"hint_rewording: {error}", file=sys.stderr)
        return 2
    found = summary(replayed, config.designer.rewards)
    table = markdown(found, next(iter(replayed), None))
    (out / "rewording.json").write_text(json.dumps(found, indent=2) + "\n")
    (out / "rewording.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
