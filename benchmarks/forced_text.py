"""Decoding the call grammar's fixed text, or appending it: the same tasks played both ways, side by side.

With `call_schema` every reply is one call under a grammar, and most of its tokens are text the grammar
fixes (`{"name": "`, `", "arguments": {"`, a required property's name, closing braces): in the main job's
first evaluation 58% of the sampled tokens (`just bench-episodes`). Each is a full decoding step for no
choice of the model's. `append_forced` appends that text as glue and samples only the choices, each span
under its own grammar (`engine.call_grammar.call_steps`), at the price of one request and one closing
end-of-generation step per span.

This plays the same training-seed tasks of the main job's suite (never held-out ones) with the preset's
agent settings (`cpu-tiny`) through one embedded server, each mode in turn (`--rounds` of A then B, the
order alternating), and prints per mode: wall time, per episode turns, sampled and appended tokens, and
success. The server runs the GGUF it is given (the main job serves an f16 export of the same weights, a
little slower): the ratio between the modes is the figure to read.

    python benchmarks/forced_text.py --tasks 16          # or: just bench-forced
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from engine.endpoints import EndpointPool
from engine.episode import shared_opening
from engine.llama_server import EXACT_SAMPLING, EmbeddedServer, ServerSettings
from engine.local_models import resolve_gguf
from engine.rollout import run_rollout
from engine.settings import EpisodeSettings
from engine.store import TrajectoryStore, read_records
from engine.trajectory import EpisodeRecord
from toolworlds.registry import builtin_worlds
from trainers.config import load_config
from trainers.suite import SUITES, SuitePlan
from trainers.train_cli import agent_settings

MODES = {"decoded": False, "appended": True}


async def play(server: EmbeddedServer, settings: EpisodeSettings, seeds: dict[str, list[int]],
               out: Path, concurrency: int) -> tuple[float, list[EpisodeRecord]]:  # fmt: skip
    """Every world's seeds once, one world after another as the main job's evaluation plays them."""
    suite = SUITES["reference-lite"]
    records: list[EpisodeRecord] = []
    started = time.perf_counter()
    async with EndpointPool.open([server.base_url]) as pool:
        for world, world_seeds in seeds.items():
            worlds = suite.environments(world)
            env = worlds()
            prefix = shared_opening(env, settings)
            await env.close()
            await asyncio.to_thread(server.share_prefix, prefix)
            plan = SuitePlan(run="bench", suite=suite.label, world=world, seeds=world_seeds, settings=settings)
            with TrajectoryStore.open(out / world, plan) as store:
                await run_rollout(plan, store, pool, worlds, concurrency)
            records += read_records(out / world)
    return time.perf_counter() - started, records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=16, help="training-seed tasks per world, one play each")
    parser.add_argument("--rounds", type=int, default=1, help="each mode played this many times, alternating")
    parser.add_argument("--model", default="default", help="the GGUF to serve (default: the embedded model)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    config = load_config("cpu-tiny", [])
    suite = SUITES[config.agent.suite]
    rng = random.Random(args.seed)
    seeds = {world: [suite.training_seed(world, rng) for _ in range(args.tasks)] for world in sorted(builtin_worlds())}
    gguf = resolve_gguf(args.model)
    scratch = Path(tempfile.mkdtemp(prefix="bench-forced-"))
    server_settings = ServerSettings(model=gguf, parallel=config.policy.parallel, slot_dir=scratch / "slots")
    order = [mode for round_ in range(args.rounds) for mode in (list(MODES) if round_ % 2 == 0 else list(MODES)[::-1])]
    results: dict[str, list[tuple[float, list[EpisodeRecord]]]] = {mode: [] for mode in MODES}
    console = Console()
    (scratch / "slots").mkdir()
    with EmbeddedServer(server_settings) as server:
        for number, mode in enumerate(order):
            base = agent_settings(config, "default", str(gguf), dict(EXACT_SAMPLING), "llama.cpp",
                                  server_settings.context)  # fmt: skip
            settings = base.model_copy(update={"append_forced": MODES[mode]})
            wall, records = asyncio.run(
                play(server, settings, seeds, scratch / f"{number}-{mode}", config.policy.parallel)
            )  # the main job: one episode per slot
            console.print(f"{mode}: {len(records)} episodes in {wall:.0f} s")
            results[mode].append((wall, records))
    table = Table(title=f"the same {args.tasks * len(seeds)} tasks per round ({suite.label} training seeds), "
                        f"{args.rounds} round(s) per mode, medians over rounds")  # fmt: skip
    for column in ("mode", "wall s", "s / episode", "turns", "sampled", "appended in replies", "read between turns",
                   "success"):  # fmt: skip
        table.add_column(column, justify="left" if column == "mode" else "right")
    walls = {}
    for mode, runs in results.items():
        walls[mode] = statistics.median(wall for wall, _ in runs)
        episodes = [record for _, records in runs for record in records if record.tokens is not None]
        count = max(1, len(episodes))
        turns = sum(len(record.turns) for record in episodes) / count
        sampled = sum(sum(record.tokens.loss_mask) for record in episodes if record.tokens) / count
        in_replies = sum(turn.appended_tokens for record in episodes for turn in record.turns) / count
        read = sum(len(r.tokens.loss_mask) - sum(r.tokens.loss_mask) for r in episodes if r.tokens) / count - in_replies
        solved = sum((record.reward or 0.0) >= 1.0 for record in episodes)
        table.add_row(mode, f"{walls[mode]:.0f}", f"{walls[mode] / (count / len(runs)):.2f}", f"{turns:.2f}",
                      f"{sampled:.1f}", f"{in_replies:.1f}", f"{read:.1f}", f"{solved}/{len(episodes)}")  # fmt: skip
    console.print(table)
    console.print(f"appended / decoded wall time: {walls['appended'] / walls['decoded']:.2f}")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
