"""vLLM's CPU build against the embedded llama.cpp server, on the same model, side by side.

The embedded model's float checkpoint, served by:

- llama.cpp (`spadework serve`) on its f16 GGUF export: what the main job serves from its first weight sync on;
- vLLM's CPU build (`spadework vllm`) in float32 (the trainer's precision, what `policy.server=vllm` runs) and
  in bfloat16 (this CPU has AVX-512 BF16 and AMX).

For each, over real HTTP, one server at a time on the 2 cores:

1. generated tokens per wall second with 1, 4 and 16 requests at once (chat, distinct short prompts, exactly
   `--max-tokens` tokens each: `ignore_eos`);
2. time to first token on a ~1,000-token prompt: cold, then another prompt sharing its first ~900 tokens
   (the prefix cache: every episode of a world opens with the same rules and tools);
3. memory: the proportional set size of the server's whole process tree, after the runs.

Medians of `--repeats`. `just bench-serve` (installs vLLM's environment first).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

from benchmarks.perf.embedded_server import WORDS, generation_rate
from engine.hf_checkpoint import float_checkpoint
from engine.llama_server import EmbeddedServer, ServerSettings
from engine.local_models import default_gguf
from engine.vllm_server import VLLMServer, VLLMSettings


@dataclass
class Measured:
    generated: dict[int, float]  # requests at once -> generated tokens per second
    cold_ttft_s: float
    warm_ttft_s: float
    memory_gib: float
    start_s: float


async def first_token_s(client: httpx.AsyncClient, url: str, prompt: str) -> float:
    """Seconds until a one-token completion of `prompt` is back: reading the prompt, then one step."""
    started = time.perf_counter()
    body = {"model": "default", "prompt": prompt, "max_tokens": 1, "temperature": 0.0}
    response = await client.post(f"{url}/completions", json=body)
    response.raise_for_status()
    assert response.json()["usage"]["prompt_tokens"] > 800, response.json()["usage"]
    return time.perf_counter() - started


def long_prompt(salt: int, tail: int) -> str:
    """~1,000 tokens: ~900 shared by every prompt of this `salt`, then ~100 of its own (`tail`)."""
    shared = " ".join(f"{WORDS[(salt * 5 + j) % len(WORDS)]}-{salt}" for j in range(300))
    own = " ".join(f"{WORDS[(tail + j) % len(WORDS)]}{tail}" for j in range(50))
    return f"{shared}\n{own}"


async def measure(server: EmbeddedServer, levels: list[int], repeats: int, max_tokens: int, start_s: float) -> Measured:
    url = server.base_url
    generated: dict[int, list[float]] = {level: [] for level in levels}
    cold: list[float] = []
    warm: list[float] = []
    async with httpx.AsyncClient(timeout=900) as client:
        await generation_rate(client, url, 1, 8, salt=99)  # warm-up
        for repeat in range(repeats):
            for level in levels:
                generated[level].append(await generation_rate(client, url, level, max_tokens, salt=repeat))
            cold.append(await first_token_s(client, url, long_prompt(repeat + 1, tail=0)))
            warm.append(await first_token_s(client, url, long_prompt(repeat + 1, tail=1)))
    return Measured(
        generated={level: statistics.median(rates) for level, rates in generated.items()},
        cold_ttft_s=statistics.median(cold),
        warm_ttft_s=statistics.median(warm),
        memory_gib=server.memory_bytes() / 2**30,
        start_s=start_s,
    )


def f16_export(workdir: Path) -> Path:
    """The float checkpoint as llama.cpp serves it after the main job's first weight sync."""
    from trainers.checkpoint import load_policy
    from trainers.gguf_export import export_gguf, merged_weights

    model, _ = load_policy(default_gguf())
    with merged_weights(model) as weights:
        return export_gguf(weights, default_gguf(), workdir / "policy-f16.gguf", "f16")


def run(engines: dict[str, Callable[[], EmbeddedServer]], levels: list[int], repeats: int, max_tokens: int) -> Table:
    results: dict[str, Measured] = {}
    for name, make in engines.items():
        server = make()
        started = time.perf_counter()
        with server:
            start_s = time.perf_counter() - started
            results[name] = asyncio.run(measure(server, levels, repeats, max_tokens, start_s))
        Console(stderr=True).print(f"measured {name}")
    table = Table(title=f"serving the embedded model on this machine (median of {repeats})")
    table.add_column("")
    for name in results:
        table.add_column(name, justify="right")
    first = next(iter(results.values()))
    for level in levels:
        cells = [f"{m.generated[level]:.1f} ({m.generated[level] / first.generated[level]:.2f}x)"
                 for m in results.values()]  # fmt: skip
        table.add_row(f"generated tok/s, {level} at once", *cells)
    table.add_row("first token, 1,000-token prompt (s)", *(f"{m.cold_ttft_s:.2f}" for m in results.values()))
    table.add_row("... sharing its first 900 tokens (s)", *(f"{m.warm_ttft_s:.2f}" for m in results.values()))
    table.add_row("memory, PSS of the process tree (GiB)", *(f"{m.memory_gib:.2f}" for m in results.values()))
    table.add_row("start until healthy (s)", *(f"{m.start_s:.0f}" for m in results.values()))
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 4, 16], help="requests at once")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64, help="generated per request")
    parser.add_argument("--engines", nargs="+", default=["llama.cpp-f16", "vllm-float32", "vllm-bfloat16"])
    arguments = parser.parse_args()
    checkpoint = float_checkpoint(default_gguf())
    parallel = max(arguments.levels)
    with tempfile.TemporaryDirectory(prefix="spadework-bench-") as workdir:
        makers: dict[str, Callable[[], EmbeddedServer]] = {
            "llama.cpp-f16": lambda: EmbeddedServer(
                ServerSettings(model=f16_export(Path(workdir)), parallel=parallel, context=2048)
            ),
            "vllm-float32": lambda: VLLMServer(VLLMSettings(model=checkpoint, dtype="float32", max_model_len=2048)),
            "vllm-bfloat16": lambda: VLLMServer(VLLMSettings(model=checkpoint, dtype="bfloat16", max_model_len=2048)),
        }
        unknown = set(arguments.engines) - set(makers)
        if unknown:
            parser.error(f"unknown engines {sorted(unknown)}; choose from {sorted(makers)}")
        engines = {name: makers[name] for name in arguments.engines}
        Console().print(run(engines, arguments.levels, arguments.repeats, arguments.max_tokens))


if __name__ == "__main__":
    main()
