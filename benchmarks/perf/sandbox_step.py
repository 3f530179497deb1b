"""A tool step in the sandbox vs the same step in-process, steps/s across the whole pool, and what opening an
episode costs (a new episode of a loaded world, reset included) in each; then the issue's targets beside them.

    python benchmarks/perf/sandbox_step.py [--steps 3000] [--episodes 64] [--opens 200] [--repeats 3]

Two worlds: `echo` (a trivial tool: the overhead floor) and the `library` example (a realistic small world
with a list result). Every sandbox episode is a process of its own, so an open is measured two ways: from a
spare (a process that loaded the world ahead, as the pool keeps one per world; the pause that lets it
refill is not timed) and cold (the pool keeps no spares: fork, load the world, reset, every time). Prints
medians of `--repeats` runs; ratios are sandbox / in-process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import anyio
from rich.console import Console
from rich.table import Table

from toolworlds.core import ToolCall, ToolWorld
from toolworlds.examples import EXAMPLE_WORLD
from toolworlds.registry import load_world
from toolworlds.sandbox import SandboxPool, SandboxSettings

ECHO_WORLD = '''
import random
from pydantic import BaseModel
from toolworlds import Brief, Finish, Scorecard, ToolCall, ToolWorld, call, tool


class Counter(BaseModel):
    calls: int = 0


class EchoWorld(ToolWorld[Counter]):
    """Echo a number back: the cheapest tool there is."""

    name = "echo"
    max_steps = 1_000_000_000

    def build(self, rng: random.Random) -> Brief:
        self.state = Counter()
        return Brief(instruction="Echo 7.", hint="Call echo.")

    @tool
    def echo(self, value: int) -> int:
        """Return the value.

        Args:
            value: any integer.
        """
        self.state.calls += 1
        return value

    def grade(self) -> Scorecard:
        return Scorecard().goal("echoed", self.state.calls > 0)

    def solution(self) -> list[ToolCall | Finish]:
        return [call("echo", value=7), Finish()]
'''
WORLDS = {"echo": (ECHO_WORLD, ToolCall(name="echo", arguments={"value": 7})),
          "library": (EXAMPLE_WORLD, ToolCall(name="search", arguments={"title": "e"}))}  # fmt: skip


def in_process_median(source: str, action: ToolCall, steps: int, scratch: Path) -> float:
    path = scratch / "world.py"
    path.write_text(source)
    world: ToolWorld = load_world(f"{path}:{_class_name(source)}")()  # type: ignore[type-arg]
    world.reset(0)
    times = []
    for index in range(steps):
        start = time.perf_counter()
        world.step(action)
        times.append(time.perf_counter() - start)
        if world.done or index % 20 == 19:
            world.reset(index)
    return statistics.median(times)


def in_process_open_median(source: str, opens: int, scratch: Path) -> float:
    path = scratch / "world.py"
    path.write_text(source)
    world_class = load_world(f"{path}:{_class_name(source)}")
    times = []
    for seed in range(opens):
        start = time.perf_counter()
        world_class().reset(seed)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def sandbox_open_median(pool: SandboxPool, source: str, opens: int, refill: float) -> float:
    """A new episode of a loaded world, reset included; `refill` seconds (untimed) pass between opens."""
    world = await pool.load(source)
    times = []
    for seed in range(opens):
        await anyio.sleep(refill)
        start = time.perf_counter()
        episode = await pool.open(world)
        await episode.reset(seed)
        times.append(time.perf_counter() - start)
        await episode.close()
    await pool.unload(world)
    return statistics.median(times)


def _class_name(source: str) -> str:
    return next(
        line.split()[1].split("(")[0] for line in source.splitlines() if line.startswith("class ") and "World" in line
    )


async def sandbox_median(pool: SandboxPool, source: str, action: ToolCall, steps: int) -> float:
    world = await pool.load(source)
    episode = await pool.open(world)
    await episode.reset(0)
    times = []
    for index in range(steps):
        start = time.perf_counter()
        await episode.step(action)
        times.append(time.perf_counter() - start)
        if index % 20 == 19:
            await episode.reset(index)
    await episode.close()
    return statistics.median(times)


async def pool_rate(pool: SandboxPool, source: str, action: ToolCall, episodes: int, steps: int) -> float:
    world = await pool.load(source)
    handles = [await pool.open(world) for _ in range(episodes)]

    async def play(episode: object) -> None:
        await episode.reset(0)  # type: ignore[attr-defined]
        for index in range(steps):
            await episode.step(action)  # type: ignore[attr-defined]
            if index % 20 == 19:
                await episode.reset(index)  # type: ignore[attr-defined]

    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for handle in handles:
            group.start_soon(play, handle)
    elapsed = time.perf_counter() - start
    for handle in handles:
        await handle.close()
    return episodes * steps * 21 / 20 / elapsed


# (figure, label, an upper bound?, goal, unit, scale to the unit)
TARGETS = [
    ("in-process", "in-process step", True, 15e-6, "µs", 1e6),
    ("sandbox", "sandbox step round trip", True, 150e-6, "µs", 1e6),
    ("per core", "pool steps/s per core", False, 10_000, "", 1.0),
    ("open spare", "open, reset included", True, 3e-3, "ms", 1e3),
]


async def run(arguments: argparse.Namespace) -> None:
    console = Console(width=None if sys.stdout.isatty() else 160)  # a table piped to a file keeps its columns
    cores = os.cpu_count() or 1
    scratch = Path(os.environ.get("TMPDIR", "/tmp"))
    rows: dict[str, dict[str, list[float]]] = {name: {} for name in WORLDS}
    settings = SandboxSettings(zygotes=arguments.zygotes)
    async with SandboxPool(settings) as pool, SandboxPool(replace(settings, spares=0)) as cold:
        layers = ", ".join(sorted(pool.confinement["layers"]))
        console.print(
            f"pool: {len(pool.zygote_pids)} zygotes on {cores} cores, a process per episode; layers: {layers}"
        )
        for repeat in range(arguments.repeats):
            for name, (source, action) in WORLDS.items():
                figures = rows[name]
                figures.setdefault("in-process", []).append(in_process_median(source, action, arguments.steps, scratch))
                figures.setdefault("sandbox", []).append(await sandbox_median(pool, source, action, arguments.steps))
                rate = await pool_rate(pool, source, action, arguments.episodes, arguments.steps // 10)
                figures.setdefault("rate", []).append(rate)
                opens = arguments.opens
                figures.setdefault("open in-process", []).append(in_process_open_median(source, opens, scratch))
                figures.setdefault("open spare", []).append(await sandbox_open_median(pool, source, opens, 0.02))
                figures.setdefault("open cold", []).append(await sandbox_open_median(cold, source, opens, 0.0))
            console.print(f"repeat {repeat + 1}/{arguments.repeats} done")
    title = f"tool step, median of {arguments.repeats} runs ({arguments.backend})"
    rate_column = f"pool steps/s ({arguments.episodes} eps)"
    table = Table("world", "in-process µs", "round trip µs", "ratio", rate_column, "per core", "open in-process µs",
                  "open spare ms", "open cold ms", title=title)  # fmt: skip
    medians = {
        name: {key: statistics.median(values) for key, values in figures.items()} for name, figures in rows.items()
    }
    for name, figures in medians.items():
        figures["per core"] = figures["rate"] / cores
        table.add_row(name, f"{figures['in-process'] * 1e6:.1f}", f"{figures['sandbox'] * 1e6:.1f}",
                      f"{figures['sandbox'] / figures['in-process']:.1f}x", f"{figures['rate']:,.0f}",
                      f"{figures['per core']:,.0f}", f"{figures['open in-process'] * 1e6:.0f}",
                      f"{figures['open spare'] * 1e3:.2f}", f"{figures['open cold'] * 1e3:.2f}")  # fmt: skip
    console.print(table)
    console.print(targets_table(medians))


def targets_table(medians: dict[str, dict[str, float]]) -> Table:
    """The issue's targets beside the figures: a step in-process and round trip, a core's rate, an open."""
    table = Table("target", "goal", *medians, "met", title="targets (issue 18)")
    for key, label, most, goal, unit, scale in TARGETS:
        values = [figures[key] for figures in medians.values()]
        met = all(value <= goal if most else value >= goal for value in values)
        shown = [f"{value * scale:,.1f} {unit}".strip() for value in values]
        table.add_row(
            label, f"{'<=' if most else '>='} {goal * scale:,.0f} {unit}".strip(), *shown, "yes" if met else "NO"
        )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--zygotes", type=int, default=SandboxSettings().zygotes)
    parser.add_argument("--opens", type=int, default=200, help="episodes opened per world and run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    arguments = parser.parse_args()
    anyio.run(run, arguments, backend=arguments.backend)


if __name__ == "__main__":
    main()
