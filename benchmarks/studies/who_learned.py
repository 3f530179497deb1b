"""Who learned in a self-play run: the designer, the agent, or both (a 2 x 2 cross of the run's policies).

One policy plays both roles, so when a self-play run's designer reward rises, the designer may write better
worlds, or the agent (trained on hinted plays too) may have learned to use hints, which raises regret on the
same worlds. The run alone cannot tell them apart: its last iterations' worlds were written and played by the
trained policy, its first by the untrained one. This crosses them. The untrained policy (the run's base
weights, exported to GGUF as the run exported its first served weights) and the trained one (the run's last
served GGUF) each write worlds on the same documents with the run's designer settings (`spadework train`'s
own `design_settings`, a fresh environment memory each), and each designer's valid worlds are played K times
each way by both agents (the designer's own plays, and `play_both_ways` with the other policy served). Then:

- the designer effect: worlds by the trained designer minus worlds by the untrained one, played by one agent
  (each of the two in turn): the designer's reward over its replies (an invalid one paid the penalty), and
  regret over valid worlds; independent samples, each resampled on its own;
- the agent effect: the same valid worlds played by the trained agent minus by the untrained one, paired by
  world, over both designers' worlds.

Decision rules, fixed before any cross ran (2026-12-05): "the designer learned" iff the designer effect on
the designer's mean reward, played by the untrained agent, has a 95% interval above zero; "the agent learned
to use hints" iff the agent effect on regret has a 95% interval above zero.

    python benchmarks/studies/who_learned.py --run runs/train-selfplay/<time>      # or: just who-learned RUN

A finished part (a designer's iterations, a world's plays by the other agent) is read back, not run again,
so a killed cross resumes. Written to OUT (default RUN/who-learned): `designer-<policy>/` (a `spadework
design` run directory each, the other agent's plays under `played-by-<policy>/`), `cross.json` and `cross.md`.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio
import typer

from engine.endpoints import EndpointPool
from engine.llama_server import EXACT_SAMPLING, EmbeddedServer, ServerSettings
from toolworlds.episode import LocalWorld
from toolworlds.registry import load_world
from toolworlds.sandbox import SandboxPool
from trainers.config import TrainConfig, resumed_config
from trainers.corpus import Corpus, open_source
from trainers.designer.loop import (
    DesignOutcome,
    DesignRun,
    DesignSettings,
    completed_iterations,
    play_both_ways,
    read_designs,
    run_iteration,
    world_file,
)
from trainers.designer.measures import at_frontier
from trainers.designer.memory import WorldMemory
from trainers.designer.regret import designer_reward
from trainers.run_settings import agent_settings, design_settings, policy_source
from trainers.run_state import WEIGHTS_DIR
from trainers.stats import bootstrap_difference, bootstrap_mean

POLICIES = ("untrained", "trained")


class CrossError(ValueError):
    """A run this cross cannot be made from; the message says why."""


@dataclass(frozen=True)
class Scored:
    """One designer reply as one agent's plays scored it: `reward` is the designer's (the penalty when the reply
    was invalid); the rest are None for an invalid reply."""

    key: str
    reward: float
    regret: float | None = None
    mean_plain: float | None = None
    mean_hinted: float | None = None

    @property
    def valid(self) -> bool:
        return self.regret is not None


Cells = dict[tuple[str, str], list[Scored]]  # (designer, agent) -> every scored reply of that designer


def cell_row(designs: Sequence[Scored]) -> dict[str, Any]:
    """One cell's figures: replies, valid worlds, the designer's mean reward, mean regret with its interval, the
    valid worlds' unaided and hinted means and how many sit at the agent's frontier."""
    valid = [design for design in designs if design.valid]
    regrets = [design.regret for design in valid if design.regret is not None]
    row: dict[str, Any] = {
        "replies": len(designs),
        "valid": len(valid),
        "designer reward": statistics.fmean(design.reward for design in designs) if designs else None,
        "mean regret": bootstrap_mean(regrets) if regrets else None,
        "unaided mean": statistics.fmean(d.mean_plain for d in valid if d.mean_plain is not None) if valid else None,
        "hinted mean": statistics.fmean(d.mean_hinted for d in valid if d.mean_hinted is not None) if valid else None,
        "at the frontier": sum(at_frontier(d.mean_plain or 0.0, d.regret or 0.0) for d in valid),
    }
    return row


def effects(cells: Cells) -> dict[str, tuple[float, float, float] | None]:
    """The designer's and the agent's effects with 95% bootstrap intervals (module docstring); None where a side
    has nothing to measure (no valid world, no reply)."""
    out: dict[str, tuple[float, float, float] | None] = {}
    for agent in POLICIES:
        trained, untrained = cells[("trained", agent)], cells[("untrained", agent)]
        out[f"designer effect on the designer's reward, {agent} agent"] = _difference(
            [d.reward for d in trained], [d.reward for d in untrained]
        )
        out[f"designer effect on regret, {agent} agent"] = _difference(
            [d.regret for d in trained if d.regret is not None], [d.regret for d in untrained if d.regret is not None]
        )
    for measure in ("regret", "reward"):
        paired = []
        for designer in POLICIES:
            by_trained = {d.key: d for d in cells[(designer, "trained")] if d.valid}
            for design in cells[(designer, "untrained")]:
                other = by_trained.get(design.key)
                if design.valid and other is not None:
                    paired.append(getattr(other, measure) - getattr(design, measure))
        out[f"agent effect on {measure}, both designers' worlds"] = bootstrap_mean(paired) if paired else None
    out["trained designer and agent minus untrained, the designer's reward"] = _difference(
        [d.reward for d in cells[("trained", "trained")]], [d.reward for d in cells[("untrained", "untrained")]]
    )
    return out


def verdicts(found: dict[str, tuple[float, float, float] | None]) -> dict[str, bool]:
    """The two pre-registered decisions (module docstring): an effect counts only with its interval above zero."""

    def above_zero(name: str) -> bool:
        effect = found[name]
        return effect is not None and effect[1] > 0

    return {
        "the designer learned": above_zero("designer effect on the designer's reward, untrained agent"),
        "the agent learned to use hints": above_zero("agent effect on regret, both designers' worlds"),
    }


def _difference(first: list[float], second: list[float]) -> tuple[float, float, float] | None:
    return bootstrap_difference(first, second) if first and second else None


def markdown(cells: Cells, found: dict[str, tuple[float, float, float] | None], decided: dict[str, bool]) -> str:
    """The cross as people compare it: a row per (designer, agent), then the effects and the decisions."""
    lines = [
        "| designer | agent | valid / replies | designer reward, mean | mean regret (95% CI) | unaided / hinted mean "
        "| at the frontier |",
        "|---|---|---|---|---|---|---|",
    ]
    for (designer, agent), designs in cells.items():
        row = cell_row(designs)
        lines.append(
            f"| {designer} | {agent} | {row['valid']} / {row['replies']} | {_number(row['designer reward'])} "
            f"| {_interval(row['mean regret'])} | {_number(row['unaided mean'])} / {_number(row['hinted mean'])} "
            f"| {row['at the frontier']} of {row['valid']} |"
        )
    lines += ["", "| effect | difference (95% CI) |", "|---|---|"]
    lines += [f"| {name} | {_interval(value)} |" for name, value in found.items()]
    lines += ["", *(f"- {name}: {'yes' if held else 'not shown'}" for name, held in decided.items())]
    return "\n".join(lines) + "\n"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _interval(value: tuple[float, float, float] | None) -> str:
    return "-" if value is None else f"{value[0]:+.3f} [{value[1]:+.3f}, {value[2]:+.3f}]"


def paid(design: DesignOutcome) -> Scored | None:
    """A reply as its designer's run paid it; None for one the endpoint never answered or whose plays were masked,
    which that run leaves out too."""
    if design.reward is None:
        return None
    if design.regret is None:  # invalid, or broken in play
        return Scored(design.sample.key, design.reward)
    return Scored(design.sample.key, design.reward, design.regret, design.mean_plain, design.mean_hinted)


def own_plays(designs: Sequence[DesignOutcome]) -> list[Scored]:
    """A designer's replies as its own plays scored them (the diagonal of the cross)."""
    return [scored for design in designs if (scored := paid(design)) is not None]


def trained_weights(run: Path) -> Path:
    """The GGUF the run served last: its policy after its last update."""
    versions = sorted(
        (int(match.group(1)), path)
        for path in (run / WEIGHTS_DIR).glob("policy-v*.gguf")
        if (match := re.fullmatch(r"policy-v(\d+)\.gguf", path.name))
    )
    if not versions:
        raise CrossError(f"{run / WEIGHTS_DIR} holds no policy-v*.gguf: not a finished run on the embedded model")
    return versions[-1][1]


def run_config(run: Path) -> tuple[TrainConfig, Path]:
    """The run's config and the GGUF its policy started from, or why the cross cannot be made from it."""
    config = resumed_config(run / "config.json")
    if config.policy.endpoints or config.policy.lora_rank:
        raise CrossError(
            "the cross serves the run's GGUF files on the embedded server: a run on vLLM endpoints or "
            "with a LoRA adapter has none"
        )
    if config.designer.format != "spec":
        raise CrossError("the cross replays spec worlds in this process: the run's designer.format is not spec")
    if config.ablations.fixed_pool:
        raise CrossError("a fixed-pool run has no designer to cross")
    source = policy_source(config)
    if not isinstance(source, Path) or source.suffix != ".gguf":
        raise CrossError(f"the run's policy.model {config.policy.model!r} is not a GGUF the embedded server runs")
    return config, source


def export_untrained(source: Path, path: Path) -> Path:
    """The run's base weights as the run served them before any update (`GGUFReloadSync.start`: an f16 export,
    not the quantized base file)."""
    if path.exists():
        return path
    from trainers.checkpoint import load_policy
    from trainers.gguf_export import export_gguf, merged_weights

    model, _ = load_policy(source, None, None)
    with merged_weights(model) as weights:
        export_gguf(weights, source, path)
    return path


@asynccontextmanager
async def serving(config: TrainConfig, source: Path, gguf: Path) -> AsyncIterator[tuple[EndpointPool, DesignSettings]]:
    """`gguf` on the embedded server as the run served its policy, and the run's designer and agent settings."""
    tokenizer = config.policy.tokenizer or str(source)
    sampling = dict(EXACT_SAMPLING)
    with EmbeddedServer(ServerSettings(model=gguf, parallel=config.policy.parallel)) as server:
        name, context = config.policy.served_name, server.settings.context
        agent = agent_settings(config, name, tokenizer, sampling, "llama.cpp", context)
        settings = design_settings(config, agent, name, tokenizer, sampling, "llama.cpp", server.settings.parallel)
        async with EndpointPool.open([server.base_url]) as endpoints:
            yield endpoints, settings


async def design(config: TrainConfig, source: Path, gguf: Path, out: Path, iterations: int, seed: int) -> None:
    """`gguf` as designer: `iterations` iterations on the seed's documents, with an environment memory of its own
    under `out` (continuing a killed run)."""
    if completed_iterations(out) >= iterations:
        return
    documents = "none" if config.ablations.no_corpus else config.designer.corpus
    corpus = Corpus(open_source(documents, config.designer.text_field), max_tokens=config.designer.document_tokens)
    out.mkdir(parents=True, exist_ok=True)
    async with serving(config, source, gguf) as (endpoints, settings), SandboxPool() as sandbox:
        with WorldMemory.open(out / "memory.sqlite") as memory:
            run = DesignRun(uuid.uuid4().hex[:12], out, corpus, endpoints, sandbox, memory, settings, seed)
            for iteration in range(completed_iterations(out), iterations):
                await run_iteration(run, iteration)


async def replay(config: TrainConfig, source: Path, gguf: Path, designer: Path, agent: str) -> list[Scored]:
    """Every valid world `designer` wrote, played K times each way by `gguf` (the policy `agent`); a world's plays
    already scored are read back. A world broken in these plays is invalid here; one whose plays were all lost
    to the endpoint is left out, as its designer's run leaves such worlds out."""
    out = designer / f"played-by-{agent}"
    scored: list[Scored] = []
    pending: list[tuple[str, Path]] = []
    for design in read_designs(designer):
        own, path = paid(design), world_file(designer, design)
        cached = out / design.sample.key.replace("/", "-") / "scored.json"
        if own is None:
            continue
        if not own.valid or path is None:
            scored.append(own)
        elif cached.exists():
            scored.append(Scored(**json.loads(cached.read_text())))
        else:
            pending.append((own.key, path))
    if not pending:
        return scored
    async with serving(config, source, gguf) as (endpoints, settings):
        run = uuid.uuid4().hex[:12]
        for key, path in pending:
            results = out / key.replace("/", "-")
            played = await play_both_ways(endpoints, settings, run, path, LocalWorld(load_world(str(path))), results)
            regret, broken = played.regret, played.broken
            reward = designer_reward(None if broken else regret, settings.knobs.rewards)
            if reward is None:
                continue
            one = Scored(key, reward) if broken else Scored(key, reward, regret.value, regret.mean_plain,
                                                            regret.mean_hinted)  # fmt: skip
            (results / "scored.json").write_text(json.dumps(asdict(one)))
            scored.append(one)
    return scored


def claim(out: Path, plan: dict[str, Any]) -> None:
    """A rerun continues the cross in `out` only for the same run, trained weights and seed (more iterations
    may be asked for): designs drawn otherwise would not be one cross."""
    path = out / "plan.json"
    if path.exists():
        changed = sorted(key for key, value in json.loads(path.read_text()).items() if plan.get(key) != value)
        if changed:
            raise CrossError(f"{out} holds a cross of another run or seed (differs in: {', '.join(changed)}); "
                             "give a new --out")  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(plan, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, required=True, help="A finished `spadework train` run directory.")
    parser.add_argument("--out", type=Path, help="Where the cross is written (default: RUN/who-learned).")
    parser.add_argument("--iterations", type=int, default=2, help="Designer iterations per policy (default 2).")
    parser.add_argument("--seed", type=int, help="Seed of the document draws (default: the run's seed + 1, so the "
                        "documents are drawn unlike the run's).")  # fmt: skip
    args = parser.parse_args(argv)
    out: Path = args.out or args.run / "who-learned"
    try:
        config, source = run_config(args.run)
        trained = trained_weights(args.run)
        seed = config.run.seed + 1 if args.seed is None else args.seed
        claim(out, {"run": str(args.run.resolve()), "trained": trained.name, "seed": seed})
    except (ValueError, typer.BadParameter) as error:  # a ConfigError or CrossError; the model not installed
        print(f"who_learned: {error}", file=sys.stderr)
        return 2
    weights = {"untrained": export_untrained(source, out / "untrained.gguf"), "trained": trained}
    for designer in POLICIES:
        anyio.run(design, config, source, weights[designer], out / f"designer-{designer}", args.iterations, seed)
    cells: Cells = {}
    for designer in POLICIES:
        for agent in POLICIES:
            designs = out / f"designer-{designer}"
            cells[(designer, agent)] = own_plays(read_designs(designs)) if agent == designer else anyio.run(
                replay, config, source, weights[agent], designs, agent)  # fmt: skip
    found = effects(cells)
    decided = verdicts(found)
    table = markdown(cells, found, decided)
    (out / "cross.md").write_text(table)
    (out / "cross.json").write_text(json.dumps({
        "run": str(args.run), "trained": str(trained), "seed": seed, "iterations": args.iterations,
        "cells": [{"designer": d, "agent": a, **cell_row(designs)} for (d, a), designs in cells.items()],
        "effects": found, "decisions": decided,
    }, indent=2) + "\n")  # fmt: skip
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
