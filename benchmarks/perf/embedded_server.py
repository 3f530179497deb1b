"""The embedded model server: throughput with and without batching, and tool-call quality.

One `spadework serve` (llama.cpp via xllamacpp, SmolLM2-135M Q4_1 by default) with `--parallel` slots
answers, over real HTTP:

1. generation: N requests at once (1, 4, 8), each a short distinct prompt forced to generate exactly
   `--max-tokens` tokens (`ignore_eos`); aggregate generated tokens per wall second;
2. prompt reading: N requests at once, each a distinct ~`--prompt-tokens` prompt with one generated token
   and the prompt cache off; aggregate prompt tokens per wall second;
3. tool-call quality in the engine's `constrained` mode: for each reference world and seed, the engine's
   own opening (rules, tool list, task) and its JSON-schema `response_format`, one greedy reply, compared
   with the first call of the world's reference solution: well-formed (one call of a known tool, arguments
   an object), right tool, right tool with exactly the right arguments.

4. OpenMP waiting: generation at 1 and 4 requests at once, and the server's CPU use while idle, with
   llama.cpp's threads spinning before they sleep at each barrier (the default, `LLAMA_OPENMP_SPIN`) and
   sleeping at once (`GOMP_SPINCOUNT=0`: what the inherited `OMP_WAIT_POLICY=PASSIVE` gave before).

5. KV cache layout and attention kernel, at the context lengths the main job plays at: one KV cache per
   slot (the default) or one pool for all slots (`kv_unified`), with and without flash attention; the
   time of a decoding step with 1 and 4 slots busy, each on its own cached ~`--long-context`-token prompt,
   and of reading 60 new tokens on top of such a prompt (a tool result).

(1), (2), (4) and (5) run `--repeats` times and show medians; (1) and (2) also the ratio to one request at a time.

    python benchmarks/perf/embedded_server.py                  # or: just bench-embedded
    python benchmarks/perf/embedded_server.py --model path/to/other.gguf --quality-tasks 20
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from dataclasses import replace
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from engine.environments import opening_messages
from engine.llama_server import LLAMA_OPENMP_SPIN, EmbeddedServer, ServerSettings
from engine.local_models import resolve_gguf
from engine.parsing import constrained_response_format, parse_constrained
from toolworlds.core import ToolCall
from toolworlds.episode import LocalWorld
from toolworlds.registry import load_world
from toolworlds.tool import FINISH_FUNCTION

WORDS = [
    "harbour",
    "lantern",
    "quarry",
    "meadow",
    "glacier",
    "orchard",
    "canyon",
    "beacon",
    "archive",
    "compass",
    "ember",
    "falcon",
]


async def _burst(
    client: httpx.AsyncClient, url: str, bodies: list[dict[str, Any]]
) -> tuple[float, list[dict[str, Any]]]:
    started = time.perf_counter()
    responses = await asyncio.gather(*(client.post(url, json=body) for body in bodies))
    wall = time.perf_counter() - started
    for response in responses:
        response.raise_for_status()
    return wall, [response.json() for response in responses]


async def generation_rate(client: httpx.AsyncClient, base: str, at_once: int, max_tokens: int, salt: int) -> float:
    bodies = [
        {
            "model": "default",  # the served name vLLM asks for; llama.cpp serves one model and ignores it
            "messages": [{"role": "user", "content": f"Tell a story about a {WORDS[(salt + i) % len(WORDS)]} ({i})."}],
            "max_tokens": max_tokens,
            "temperature": 0.8,
            "ignore_eos": True,
        }
        for i in range(at_once)
    ]
    wall, answers = await _burst(client, base + "/chat/completions", bodies)
    return sum(answer["usage"]["completion_tokens"] for answer in answers) / wall


async def prompt_rate(client: httpx.AsyncClient, base: str, at_once: int, prompt_tokens: int, salt: int) -> float:
    filler = " ".join(WORDS[(salt + j) % len(WORDS)] for j in range(prompt_tokens))
    bodies = [
        {"prompt": f"{salt}-{i}: {filler}", "max_tokens": 1, "cache_prompt": False, "temperature": 0}
        for i in range(at_once)
    ]
    wall, answers = await _burst(client, base + "/completions", bodies)
    return sum(answer["usage"]["prompt_tokens"] for answer in answers) / wall


async def throughput(base: str, levels: list[int], repeats: int, max_tokens: int, prompt_tokens: int) -> Table:
    generated: dict[int, list[float]] = {level: [] for level in levels}
    read: dict[int, list[float]] = {level: [] for level in levels}
    async with httpx.AsyncClient(timeout=600) as client:
        await generation_rate(client, base, 1, 8, salt=99)  # warm-up
        for repeat in range(repeats):
            for level in levels:  # interleaved, so drift in machine load hits every level alike
                generated[level].append(await generation_rate(client, base, level, max_tokens, salt=repeat))
                read[level].append(await prompt_rate(client, base, level, prompt_tokens, salt=repeat * 7 + level))
    table = Table(title=f"throughput (median of {repeats})")
    for column in ("requests at once", "generated tok/s", "× one request", "prompt tok/s", "× one request"):
        table.add_column(column, justify="right")
    single_gen, single_read = statistics.median(generated[levels[0]]), statistics.median(read[levels[0]])
    for level in levels:
        gen, rd = statistics.median(generated[level]), statistics.median(read[level])
        table.add_row(str(level), f"{gen:.1f}", f"{gen / single_gen:.2f}", f"{rd:.1f}", f"{rd / single_read:.2f}")
    return table


async def tool_quality(base: str, worlds: list[str], tasks: int, max_tokens: int) -> Table:
    table = Table(title=f"constrained tool calls, first turn, greedy ({tasks} tasks per world)")
    for column in ("world", "well-formed", "right tool", "right tool + arguments", "s / reply"):
        table.add_column(column, justify="right")
    async with httpx.AsyncClient(timeout=600) as client:
        for name in worlds:
            world = LocalWorld(load_world(name))
            tools = [*world.openai_tools(), FINISH_FUNCTION]
            response_format = constrained_response_format(tools)
            known = {tool["function"]["name"] for tool in tools}
            formed = right_tool = right_arguments = 0
            started = time.perf_counter()
            for seed in range(tasks):  # one at a time: the slot keeps the shared rules + tool list cached
                task = await (await world.open()).reset(seed)
                expected = _first_call(name, seed)
                body = {
                    "messages": opening_messages(world, task, hinted=False, mode="constrained"),
                    "response_format": response_format,
                    "max_tokens": max_tokens,
                    "temperature": 0,
                }
                answer = (await client.post(base + "/chat/completions", json=body)).json()
                reply = parse_constrained(answer["choices"][0]["message"]["content"] or "")
                if reply.problems or len(reply.calls) != 1 or reply.calls[0].name not in known:
                    continue
                formed += 1
                call = reply.calls[0]
                if expected is not None and call.name == expected.name:
                    right_tool += 1
                    right_arguments += call.arguments == expected.arguments
            per_reply = (time.perf_counter() - started) / tasks
            row = [f"{100 * count / tasks:.0f}%" for count in (formed, right_tool, right_arguments)]
            table.add_row(name, *row, f"{per_reply:.1f}")
    return table


async def _generation_medians(base: str, levels: list[int], repeats: int, max_tokens: int) -> dict[int, float]:
    rates: dict[int, list[float]] = {level: [] for level in levels}
    async with httpx.AsyncClient(timeout=600) as client:
        await generation_rate(client, base, 1, 8, salt=99)  # warm-up
        for repeat in range(repeats):
            for level in levels:
                rates[level].append(await generation_rate(client, base, level, max_tokens, salt=repeat))
    return {level: statistics.median(values) for level, values in rates.items()}


def openmp_waiting(settings: ServerSettings, repeats: int, max_tokens: int, idle_s: float = 3.0) -> Table:
    """The same server under two OpenMP wait settings: generation speed and CPU burnt while idle."""
    levels = [1, 4]
    variants = {f"spin {LLAMA_OPENMP_SPIN['GOMP_SPINCOUNT']} (default)": None, "sleep at once (before)": "0"}
    table = Table(title=f"OpenMP waiting in the server (median of {repeats})")
    for column in ("threads wait by", *(f"{level} at once tok/s" for level in levels), "idle CPU s / s"):
        table.add_column(column, justify="right")
    saved = os.environ.get("GOMP_SPINCOUNT")
    try:
        for label, spin in variants.items():
            os.environ.pop("GOMP_SPINCOUNT", None)
            if spin is not None:
                os.environ["GOMP_SPINCOUNT"] = spin  # the child inherits it; the server's default yields to it
            with EmbeddedServer(settings) as server:
                rates = asyncio.run(_generation_medians(server.base_url, levels, repeats, max_tokens))
                idle = server.cpu_seconds()
                time.sleep(idle_s)
                idle = (server.cpu_seconds() - idle) / idle_s
            table.add_row(label, *(f"{rates[level]:.1f}" for level in levels), f"{idle:.2f}")
    finally:
        os.environ.pop("GOMP_SPINCOUNT", None)
        if saved is not None:
            os.environ["GOMP_SPINCOUNT"] = saved
    return table


async def _long_context_times(base: str, slots: int, context: int, repeats: int) -> dict[str, float]:
    """Median ms per decoding step with 1 and `slots` busy slots, and ms to read 60 new tokens, at `context`."""
    root = base.removesuffix("/v1")
    prompts = [
        " ".join(WORDS[(slot * 5 + j) % len(WORDS)] + str(j) for j in range(context // 3)) for slot in range(slots)
    ]
    steps: dict[str, list[float]] = {"1": [], str(slots): [], "read 60": []}
    async with httpx.AsyncClient(timeout=600) as client:

        async def complete(slot: int, prompt: str, tokens: int) -> dict[str, Any]:
            body = {"prompt": prompt, "n_predict": tokens, "id_slot": slot, "cache_prompt": True, "ignore_eos": True,
                    "temperature": 0.7, "top_k": 0, "top_p": 1.0, "min_p": 0.0}  # fmt: skip
            response = await client.post(f"{root}/completion", json=body)
            response.raise_for_status()
            return dict(response.json()["timings"])

        await asyncio.gather(*(complete(slot, prompt, 0) for slot, prompt in enumerate(prompts)))  # cached
        for repeat in range(repeats):
            for busy in (1, slots):
                started = time.perf_counter()
                await asyncio.gather(*(complete(slot, prompts[slot], 32) for slot in range(busy)))
                steps[str(busy)].append(1000 * (time.perf_counter() - started) / 32)
            extra = " ".join(f"{WORDS[(repeat + j) % len(WORDS)]}{repeat}" for j in range(20))
            timing = await complete(0, f"{prompts[0]} {extra}", 1)
            steps["read 60"].append(timing["prompt_ms"] * 60 / max(1, timing["prompt_n"]))
            await complete(0, prompts[0], 0)  # back to the cached prompt for the next repeat
    return {name: statistics.median(values) for name, values in steps.items()}


def kv_layout(settings: ServerSettings, repeats: int, context: int) -> Table:
    """Decoding and reading at long context under each KV layout and attention kernel."""
    slots = settings.parallel
    table = Table(title=f"KV cache and attention at ~{context} tokens of context (median of {repeats}, ms)")
    for column in ("KV cache", "flash attention", "step, 1 slot", f"step, {slots} slots", "read 60 tokens"):
        table.add_column(column, justify="right")
    for unified, flash in ((False, False), (False, True), (True, False), (True, True)):
        variant = replace(
            settings, kv_unified=unified, flash_attention=flash, context=max(settings.context, 2 * context)
        )
        with EmbeddedServer(variant) as server:
            times = asyncio.run(_long_context_times(server.base_url, slots, context, repeats))
        default = (unified, flash) == (ServerSettings.kv_unified, ServerSettings.flash_attention)
        layout = ("one pool" if unified else "per slot") + (" (default)" if default else "")
        table.add_row(layout, "on" if flash else "off", f"{times['1']:.0f}", f"{times[str(slots)]:.0f}",
                      f"{times['read 60']:.0f}")  # fmt: skip
    return table


def _first_call(world_name: str, seed: int) -> ToolCall | None:
    world = load_world(world_name)()
    world.reset(seed)
    return next((action for action in world.solution() if isinstance(action, ToolCall)), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="default", help="a local .gguf file, or 'default'")
    parser.add_argument("--parallel", type=int, default=8, help="server slots")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 4, 8], help="requests at once")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64, help="generated per request")
    parser.add_argument("--prompt-tokens", type=int, default=256, help="about this many words per prompt")
    parser.add_argument("--worlds", nargs="+", default=["banking", "ticketing", "orders"])
    parser.add_argument("--quality-tasks", type=int, default=10, help="seeds per world (0: skip)")
    parser.add_argument("--reply-tokens", type=int, default=512, help="max tokens per reply (the engine's default)")
    parser.add_argument("--no-openmp", action="store_true", help="skip the OpenMP waiting comparison")
    parser.add_argument("--long-context", type=int, default=1000, help="tokens per slot in the KV layout comparison")
    parser.add_argument("--no-kv", action="store_true", help="skip the KV layout comparison")
    args = parser.parse_args()
    console = Console()
    settings = ServerSettings(model=resolve_gguf(args.model), parallel=args.parallel, context=4096)
    with EmbeddedServer(settings) as server:
        console.print(f"model {settings.model.name}, {args.parallel} slots, {settings.threads} threads")
        table = asyncio.run(throughput(server.base_url, args.levels, args.repeats, args.max_tokens, args.prompt_tokens))
        console.print(table)
        if args.quality_tasks:
            console.print(
                asyncio.run(tool_quality(server.base_url, args.worlds, args.quality_tasks, args.reply_tokens))
            )
    if not args.no_openmp:
        console.print(openmp_waiting(replace(settings, parallel=4), args.repeats, args.max_tokens))
    if not args.no_kv:
        console.print(kv_layout(replace(settings, parallel=4), args.repeats, args.long_context))


if __name__ == "__main__":
    main()
