"""How fast a toolworld steps: in-process, over the HTTP session API, and over MCP (streamable HTTP).

The engine will drive worlds in-process (or in sandbox workers); users outside spadework drive them over
the exported APIs. This prints what each path costs, side by side in one run: oracle episodes per
repeat, steps per second as the median over repeats, and the ratio to in-process stepping.

    python benchmarks/perf/toolworld_steps.py --world banking --episodes 60 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Awaitable, Callable

import anyio
import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from rich.console import Console
from rich.table import Table

from toolworlds.core import Finish, ToolCall
from toolworlds.hosting.serving import launched
from toolworlds.play import play
from toolworlds.policies import OraclePolicy
from toolworlds.registry import load_world


def plans(world_name: str, episodes: int) -> list[tuple[int, list[ToolCall | Finish]]]:
    world = load_world(world_name)()
    out = []
    for seed in range(episodes):
        world.reset(seed)
        out.append((seed, world.solution()))
    return out


def in_process(world_name: str, episodes: int) -> int:
    world_class = load_world(world_name)
    return sum(len(play(world_class(), seed, OraclePolicy()).turns) for seed in range(episodes))


async def over_http(url: str, work: list[tuple[int, list[ToolCall | Finish]]], concurrency: int) -> int:
    limiter = anyio.CapacityLimiter(concurrency)
    steps = 0

    async def episode(client: httpx.AsyncClient, seed: int, plan: list[ToolCall | Finish]) -> None:
        nonlocal steps
        async with limiter:
            session = (await client.post("/sessions", json={"seed": seed})).json()["session_id"]
            for action in plan:
                if isinstance(action, ToolCall):
                    response = await client.post(f"/sessions/{session}/tools/{action.name}", json=action.arguments)
                else:
                    response = await client.post(f"/sessions/{session}/finish", json={"answer": action.answer})
                response.raise_for_status()
                steps += 1

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client, anyio.create_task_group() as tg:
        for seed, plan in work:
            tg.start_soon(episode, client, seed, plan)
    return steps


async def over_mcp(url: str, work: list[tuple[int, list[ToolCall | Finish]]], sessions: int) -> int:
    """`sessions` MCP sessions play the episodes between them, one episode at a time each."""
    steps = 0
    queue = list(work)

    async def worker() -> None:
        nonlocal steps
        async with streamable_http_client(f"{url}/mcp") as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            while queue:
                seed, plan = queue.pop()
                await session.call_tool("start_task", {"seed": seed})
                for action in plan:
                    if isinstance(action, ToolCall):
                        await session.call_tool(action.name, action.arguments)
                    else:
                        await session.call_tool("finish", {"answer": action.answer})
                    steps += 1

    async with anyio.create_task_group() as tg:
        for _ in range(sessions):
            tg.start_soon(worker)
    return steps


def measure(run: Callable[[], int], repeats: int) -> tuple[float, int]:
    rates, steps = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        steps = run()
        rates.append(steps / (time.perf_counter() - start))
    return statistics.median(rates), steps


def sync(make: Callable[[], Awaitable[int]]) -> Callable[[], int]:
    async def main() -> int:
        return await make()

    return lambda: anyio.run(main)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world", default="banking")
    parser.add_argument("--episodes", type=int, default=60, help="oracle episodes per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    work = plans(args.world, args.episodes)
    rows: list[tuple[str, str, float, int]] = []

    rate, steps = measure(lambda: in_process(args.world, args.episodes), args.repeats)
    rows.append(("in-process", "1", rate, steps))
    with launched(args.world) as url:
        for concurrency in (1, 8, 32):
            rate, steps = measure(sync(lambda c=concurrency: over_http(url, work, c)), args.repeats)  # type: ignore[misc]
            rows.append(("HTTP session API", str(concurrency), rate, steps))
    with launched(args.world, "--mcp") as url:
        for sessions in (1, 4):
            rate, steps = measure(sync(lambda s=sessions: over_mcp(url, work, s)), args.repeats)  # type: ignore[misc]
            rows.append(("MCP streamable HTTP", str(sessions), rate, steps))

    baseline = rows[0][2]
    table = Table(
        "path", "concurrency", "steps/repeat", "steps/s (median)", "vs in-process",
        title=f"{args.world}: {args.episodes} oracle episodes x {args.repeats} repeats",
    )  # fmt: skip
    for path, concurrency, rate, steps in rows:
        table.add_row(path, concurrency, str(steps), f"{rate:,.0f}", f"{rate / baseline:.4f}x")
    Console().print(table)


if __name__ == "__main__":
    main()
