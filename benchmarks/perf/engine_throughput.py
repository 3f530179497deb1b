"""The engine against its ceiling and against the usual alternative, at 1,000 to 10,000 concurrent episodes.

A mock model server with a fixed latency (a real HTTP server in its own process, started afresh for each
client so none finds its caches warm) answers three clients, each at the same concurrency:

(a) spadework: `run_rollout` playing every episode for real (parse, step the world, store each record);
(b) the ceiling: a bare aiohttp load generator replaying exactly (a)'s requests, with no engine logic
    (and no world: (a) also pays for resetting and stepping the world, on the same cores);
(c) the usual alternative: an `asyncio.gather` over the default `AsyncOpenAI` client replaying the same
    requests (`chat.completions.create`, SDK defaults), stopped after `--alt-limit` seconds.

Printed per concurrency: turns/s; the engine's own overhead per turn (from a reply arriving to the next
request leaving: parse, world step, bookkeeping, event-loop wait) as p50/p99; RSS per live episode (peak
RSS minus the RSS after the client's set-up, for (a) after a 20-episode warm-up on other seeds, over the
most episodes in play at once: all of them for (b) and (c), which start everything together; for (a),
counted from reset to end, fewer when early episodes end before the last world is reset); and the ratios
a/b and a/c. (a) and (b) run `--repeats` times, alternating, and the
median run is shown: this machine is noisy. `--world toolworlds/examples/library.py:LibraryWorld` (a world whose
steps cost ~20 us) isolates the engine's own cost from the world's.

    python benchmarks/perf/engine_throughput.py --concurrency 1000 5000 10000 --latency 0.05
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from engine.settings import EpisodeSettings
from engine.store import read_records
from engine.trajectory import EPISODE_HEADER
from toolworlds.hosting.serving import launched_command

ROOT = Path(__file__).resolve().parents[2]


def _raise_fd_limit() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _peak_rss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


# -- the three clients, each run as `python engine_throughput.py --client X ...` --------------------


def run_spadework(url: str, out: Path, episodes: int, world: str) -> dict[str, Any]:
    import anyio

    from engine.endpoints import EndpointPool
    from engine.environments import playing
    from engine.rollout import RolloutPlan, run_rollout
    from engine.store import TrajectoryStore
    from toolworlds.episode import LocalWorld
    from toolworlds.registry import load_world

    settings = EpisodeSettings(request_timeout_s=600)
    plan = RolloutPlan(run="bench", world=world, tasks=episodes, settings=settings)
    # Seeds far from the measured ones, so the server's per-seed caches stay cold for the real run.
    warmup = RolloutPlan(run="warmup", world=world, tasks=20, first_seed=10**6, settings=settings)
    worlds = playing(LocalWorld(load_world(world)))

    async def play(plan: RolloutPlan, directory: Path) -> tuple[float, int]:
        with TrajectoryStore.open(directory, plan) as store:
            async with EndpointPool.open([url]) as pool:
                started = time.perf_counter()
                await run_rollout(plan, store, pool, worlds, concurrency=plan.tasks)
                return time.perf_counter() - started

    # A short warm-up first: imports and first-use allocations are the process's, not the episodes'.
    anyio.run(play, warmup, out.with_name(out.name + "-warmup"))
    baseline = _peak_rss_kb()
    wall = anyio.run(play, plan, out)
    peak_kb = _peak_rss_kb()  # before the records are read back below
    records = list(read_records(out))
    overheads = [
        later.started_s - (earlier.started_s + earlier.latency_s)
        for record in records
        for earlier, later in zip(record.turns, record.turns[1:], strict=False)
    ]
    return {
        "turns": sum(len(record.turns) for record in records),
        "failed": sum(record.status == "infra_error" for record in records),
        "wall_s": wall,
        "overhead_ms": [1000 * value for value in overheads],
        "rss_kb": peak_kb - baseline,
        "peak_live": peak_in_play(records),
    }


def peak_in_play(records: list[Any]) -> int:
    """Most episodes between their world's reset and their end at one moment (from the records' timings)."""
    events = []
    for record in records:
        if record.turns:
            events.append((record.started_at + record.turns[0].started_s, 1))
            events.append((record.started_at + record.duration_s, -1))
    live = peak = 0
    for _, change in sorted(events):
        live += change
        peak = max(peak, live)
    return peak


def replay_requests(out: Path) -> list[list[dict[str, Any]]]:
    """Every request (a) made, per episode: the bodies rebuilt from the stored conversations."""
    from toolworlds.registry import load_world
    from toolworlds.tool import FINISH_FUNCTION

    episodes = []
    tools: list[dict[str, Any]] | None = None
    for record in read_records(out):
        if tools is None:
            tools = [*load_world(record.key.world).openai_tools(), FINISH_FUNCTION]
        header = record.key.header(record.run)[EPISODE_HEADER]
        bodies = []
        for index, message in enumerate(record.messages):
            if message["role"] == "assistant":
                body = {"model": "default", "messages": record.messages[:index], "tools": tools, "max_tokens": 512}
                bodies.append({"header": header, "body": body})
        episodes.append(bodies)
    return episodes


async def run_aiohttp(url: str, out: Path) -> dict[str, Any]:
    import aiohttp

    episodes = replay_requests(out)
    baseline = _peak_rss_kb()
    turns = failed = 0
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))

    async def episode(requests: list[dict[str, Any]]) -> None:
        nonlocal turns, failed
        for request in requests:
            headers = {EPISODE_HEADER: request["header"], "Content-Type": "application/json"}
            async with session.post(url + "/chat/completions", data=json.dumps(request["body"]), headers=headers) as r:
                json.loads(await r.read())
                turns += 1
                failed += r.status != 200

    started = time.perf_counter()
    await asyncio.gather(*(episode(requests) for requests in episodes))
    wall = time.perf_counter() - started
    await session.close()
    return {"turns": turns, "failed": failed, "wall_s": wall, "rss_kb": _peak_rss_kb() - baseline}


async def run_openai(url: str, out: Path, limit_s: float) -> dict[str, Any]:
    import openai

    episodes = replay_requests(out)
    baseline = _peak_rss_kb()
    client = openai.AsyncOpenAI(base_url=url, api_key="none")
    turns = failed = 0

    async def episode(requests: list[dict[str, Any]]) -> None:
        nonlocal turns, failed
        for request in requests:
            body = request["body"]
            try:
                await client.chat.completions.create(
                    model=body["model"],
                    messages=body["messages"],
                    tools=body["tools"],
                    max_tokens=body["max_tokens"],
                    extra_headers={EPISODE_HEADER: request["header"]},
                )
                turns += 1
            except openai.OpenAIError:
                failed += 1
                return

    started = time.perf_counter()
    try:
        await asyncio.wait_for(asyncio.gather(*(episode(requests) for requests in episodes)), limit_s)
        finished = True
    except TimeoutError:
        finished = False
    wall = time.perf_counter() - started
    return {"turns": turns, "failed": failed, "wall_s": wall, "rss_kb": _peak_rss_kb() - baseline, "finished": finished}


def client_main(args: argparse.Namespace) -> None:
    _raise_fd_limit()
    out = Path(args.out)
    if args.client == "spadework":
        result = run_spadework(args.url, out, args.episodes, args.world)
    elif args.client == "aiohttp":
        result = asyncio.run(run_aiohttp(args.url, out))
    else:
        result = asyncio.run(run_openai(args.url, out, args.alt_limit))
    print(json.dumps(result))


# -- the comparison --------------------------------------------------------------------------------


def run_client(client: str, out: Path, episodes: int, args: argparse.Namespace) -> dict[str, Any]:
    """One client in its own process, against a fresh mock server (so no client finds its caches warm)."""
    known = ("--world", args.world) if ":" in args.world else ()
    with launched_command("mock-server", "--latency", str(args.latency), *known, "--port", "0") as url:
        command = [sys.executable, __file__, "--client", client, "--url", url, "--out", str(out)]
        command += ["--episodes", str(episodes), "--world", args.world, "--alt-limit", str(args.alt_limit)]
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=args.alt_limit + 900)
    if done.returncode != 0:
        raise SystemExit(f"client {client} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def turns_per_s(result: dict[str, Any]) -> float:
    return float(result["turns"]) / float(result["wall_s"])


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median turns/s (the machine is noisy: quote medians)."""
    return sorted(runs, key=turns_per_s)[len(runs) // 2]


def spread(runs: list[dict[str, Any]]) -> str:
    rates = [turns_per_s(run) for run in runs]
    return f"{len(runs)}: {min(rates):,.0f}-{max(rates):,.0f}"


def compare(args: argparse.Namespace) -> None:
    _raise_fd_limit()
    console = Console(width=150)
    table = Table(title=f"engine throughput: mock model with {args.latency * 1000:.0f} ms latency, world {args.world}")
    columns = ("episodes live", "client", "turns", "failed", "turns/s (median)", "runs (min-max)")
    for column in (*columns, "overhead p50 / p99 ms", "peak in play", "RSS / episode in play"):
        table.add_column(column, justify="right")
    table.add_column("ratio")
    for concurrency in args.concurrency:
        ours_runs: list[dict[str, Any]] = []
        ceiling_runs: list[dict[str, Any]] = []
        with tempfile.TemporaryDirectory() as scratch:
            for repeat in range(args.repeats):
                out = Path(scratch) / f"run{repeat}"
                console.log(f"{concurrency:,} episodes, repeat {repeat + 1}: (a) spadework, then (b) bare aiohttp")
                ours_runs.append(run_client("spadework", out, concurrency, args))
                ceiling_runs.append(run_client("aiohttp", out, concurrency, args))
            console.log(f"{concurrency:,} episodes: (c) gather + default AsyncOpenAI")
            usual = run_client("openai", out, concurrency, args)
        ours, ceiling = median_run(ours_runs), median_run(ceiling_runs)
        rate = {name: turns_per_s(r) for name, r in (("a", ours), ("b", ceiling), ("c", usual))}
        overhead = ours["overhead_ms"]
        p50, p99 = statistics.median(overhead) if overhead else float("nan"), percentile(overhead, 0.99)
        stopped = "" if usual.get("finished") else f" (stopped at {args.alt_limit:g} s)"
        rows = [
            ("(a) spadework", ours, spread(ours_runs), f"{p50:.2f} / {p99:.2f}", ""),
            ("(b) bare aiohttp", ceiling, spread(ceiling_runs), "-", f"a/b = {rate['a'] / rate['b']:.2f}"),
            (
                f"(c) gather + AsyncOpenAI{stopped}",
                usual,
                "1 run",
                "-",
                f"a/c = {rate['a'] / max(rate['c'], 1e-9):.1f}",
            ),
        ]
        for name, result, runs, overhead_text, ratio in rows:
            table.add_row(
                f"{concurrency:,}",
                name,
                f"{result['turns']:,}",
                f"{result['failed']:,}",
                f"{turns_per_s(result):,.0f}",
                runs,
                overhead_text,
                f"{result.get('peak_live', concurrency):,}",
                f"{result['rss_kb'] / result.get('peak_live', concurrency):,.1f} KB",
                ratio,
            )
        table.add_section()
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1000, 5000, 10000])
    parser.add_argument("--latency", type=float, default=0.05, help="Seconds the mock model takes per request.")
    parser.add_argument("--world", default="banking")
    parser.add_argument("--repeats", type=int, default=3, help="Runs of (a) and (b), alternating; medians shown.")
    parser.add_argument("--alt-limit", type=float, default=180.0, help="Seconds (c) may run before it is stopped.")
    parser.add_argument("--client", choices=["spadework", "aiohttp", "openai"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--episodes", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client_main(args)
    else:
        compare(args)


if __name__ == "__main__":
    main()
