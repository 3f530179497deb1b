"""BFCL v4 multi-turn played by a model through the engine, against real HTTP servers.

The scripted mock answers with the ground truth (`--script bfcl`): through the whole model path (tool
specs, parsing, safe call source, turns, revealed functions, the checker) that must score 100%. A server
that never stops calling shows the 21-step cut; the embedded model plays one real entry.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from aiohttp import web

from benchmarks.bfcl.calls import CallRefused, call_source
from benchmarks.bfcl.data import load_category
from benchmarks.bfcl.environment import ENGINE_MODES, WORLD, BFCLConversation, Style
from benchmarks.bfcl.episode import MAX_STEPS, REVEAL_MESSAGE
from benchmarks.bfcl.play import BFCLRun, all_entries
from benchmarks.bfcl.prompting import FAILED_CALL
from benchmarks.playing import Selection
from engine.conversation import UserTurn
from engine.endpoints import EndpointPool
from engine.rollout import run_rollout
from engine.settings import EpisodeSettings
from engine.store import TrajectoryStore, read_records
from engine.trajectory import EpisodeKey
from tests.benchmarks import runs
from tests.benchmarks.runs import results
from tests.engine.conftest import mock_model
from toolworlds.core import ToolCall
from toolworlds.hosting.serving import launched_command


def bench(*arguments: str) -> subprocess.CompletedProcess[str]:
    return runs.bench("bfcl-v4", "--no-progress", *arguments)


@pytest.fixture(scope="module")
def native_answers() -> Iterator[str]:
    with mock_model("--script", "bfcl") as url:
        yield url


@pytest.mark.parametrize(
    ("mode", "style", "limit", "note"),
    [("chat", "native", 12, "bfcl-eval's FC protocol"), ("text", "python", 12, "bfcl-eval's prompting protocol"),
     ("constrained", "native", 6, "not comparable")],
)  # fmt: skip
def test_the_ground_truth_said_by_a_server_scores_100_percent_in_every_mode(
    tmp_path: Path, mode: str, style: str, limit: int, note: str
) -> None:
    with mock_model("--script", "bfcl", "--style", style) as url:
        completed = bench("--endpoint", url, "--mode", mode, "--limit", str(limit), "--out", str(tmp_path))
        stats = httpx.get(url.removesuffix("/v1") + "/stats").json()
    assert completed.returncode == 0, completed.stderr[-2000:]
    summary = results(tmp_path)
    assert summary["entries"] == dict.fromkeys(["base", "miss_func", "miss_param", "long_context"], limit)
    assert summary["accuracy"] == dict.fromkeys(summary["entries"], 1.0), summary
    assert summary["label"] == f"default ({mode})" and summary["infra_errors"] == 0
    assert note in (tmp_path / "results.md").read_text()
    if mode == "chat":  # a held-out function is offered from its turn on, not before
        entry = next(e for e in load_category("miss_func") if e.missed)
        hidden = next(iter(entry.missed.values()))[0]
        offered = stats["offered"][f"{tmp_path.name}/agent/bfcl-v4/{all_entries().index(entry)}/plain/0"]
        assert hidden["name"] not in offered[0] and hidden["name"] in offered[-1]
    else:
        assert all(names == [] for names in next(iter(stats["offered"].values())))  # no `tools` field sent


def test_a_model_run_resumes_grows_and_refuses_other_settings(tmp_path: Path, native_answers: str) -> None:
    chosen = ("--endpoint", native_answers, "--categories", "base,miss_param", "--out", str(tmp_path))
    first = bench(*chosen, "--limit", "2")
    assert first.returncode == 0, first.stderr[-2000:]
    before = [record.key.seed for record in read_records(tmp_path)]
    assert sorted(before) == [0, 1, 400, 401]
    grown = bench(*chosen, "--limit", "3")
    assert grown.returncode == 0, grown.stderr[-2000:]
    seeds = [record.key.seed for record in read_records(tmp_path)]
    assert seeds[:4] == before and sorted(seeds[4:]) == [2, 402]  # only the new entries were played
    assert results(tmp_path)["entries"] == {"base": 3, "miss_param": 3}
    assert bench(*chosen, "--limit", "1").returncode == 0  # nothing to play: the results still cover the run
    assert results(tmp_path)["entries"] == {"base": 3, "miss_param": 3}
    other = bench("--endpoint", native_answers, "--mode", "text", "--limit", "3", "--out", str(tmp_path))
    assert other.returncode == 2 and re.search(r"differs in: [a-z_., ]*style", other.stderr)  # its settings differ too


def test_bad_arguments_are_named_before_anything_runs(tmp_path: Path) -> None:
    unknown = bench("--categories", "simple", "--endpoint", "http://127.0.0.1:9/v1", "--out", str(tmp_path))
    assert unknown.returncode == 2 and "unknown BFCL category simple" in unknown.stderr
    mode = bench("--mode", "tokens", "--out", str(tmp_path))
    assert mode.returncode == 2 and "tokens" in mode.stderr
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_model_calls_become_source_only_from_documented_names_and_json_values() -> None:
    documented = {"cd", "mkdir"}
    assert call_source("cd", {"folder": "it's"}, documented) == 'cd(folder="it\'s")'
    assert call_source("mkdir", {"dir_name": "a", "n": [1, 2.5, None, True, {"k": "v"}]}, documented) == (
        "mkdir(dir_name='a',n=[1, 2.5, None, True, {'k': 'v'}])"
    )
    refusals = [
        ("__import__('os').system", {}, "is not defined"),
        ("cd", {"folder)\nimport os;(x": "a"}, "is not an argument name"),
        ("cd", {"lambda": "a"}, "is not an argument name"),
        ("cd", {"folder": float("nan")}, "not a finite number"),
        ("cd", {"folder": {1: "a"}}, "keys must be strings"),
    ]
    for name, arguments, message in refusals:
        with pytest.raises(CallRefused, match=message):
            call_source(name, arguments, documented)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_refused_call_fails_as_bfcl_evals_executor_says_and_never_reaches_a_backend() -> None:
    entries = all_entries()
    seed = next(i for i, e in enumerate(entries) if "GorillaFileSystem" in e.involved_classes)
    dialogue = BFCLConversation(entries, "chat", anyio.CapacityLimiter(1))
    await dialogue.reset(seed)
    refused = await dialogue.step(ToolCall(name="__import__('os').system", arguments={"command": "touch x"}))
    assert refused.observation == "Error during execution: name \"__import__('os')\" is not defined"
    ran = await dialogue.step(ToolCall(name="pwd", arguments={}))
    assert isinstance(ran.observation, str) and json.loads(ran.observation)["current_working_directory"]
    # The checker replays the refused step as a call that fails without effect (a step it made, as in
    # bfcl-eval, where the unknown name fails to run), and the documented call as its source.
    assert dialogue._decoded == [[[FAILED_CALL], ["pwd()"]]]
    await dialogue.close()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_held_out_functions_are_revealed_on_their_turn_in_each_style() -> None:
    entries = all_entries()
    seed = next(i for i, e in enumerate(entries) if e.missed)
    entry = entries[seed]
    (turn, docs), *_ = entry.missed.items()
    for style in ("chat", "text"):
        dialogue = BFCLConversation(entries, style, anyio.CapacityLimiter(1))
        await dialogue.reset(seed)
        names = {tool["function"]["name"] for tool in dialogue.tools}
        assert not names & {doc["name"] for doc in docs} and (style == "text") == (not names)
        said: list[UserTurn | None] = [await dialogue.user_turn("done") for _ in range(turn)]
        reveal = said[-1]
        assert reveal is not None
        if style == "chat":
            assert reveal.content == REVEAL_MESSAGE and [t["function"]["name"] for t in reveal.tools] == [
                d["name"] for d in docs
            ]
        else:
            assert reveal.tools == [] and reveal.content.endswith(REVEAL_MESSAGE) and docs[0]["name"] in reveal.content
        rest = [await dialogue.user_turn("done") for _ in range(len(entry.turns) - turn)]
        assert rest[-1] is None and all(user is not None for user in rest[:-1])  # the dialogue ends after the last turn
        await dialogue.close()


async def always_ls(request: web.Request) -> web.Response:
    """A server whose every reply calls `ls()` (natively when offered tools, else as text): the turn never ends."""
    if (await request.json()).get("tools"):
        call = {"id": "c", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
    else:
        message = {"role": "assistant", "content": "[ls()]"}
    return web.json_response({"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # aiohttp's server
@pytest.mark.parametrize("style", ["chat", "text"])
async def test_a_turn_that_never_ends_is_cut_after_its_21st_calling_step(style: Style, tmp_path: Path) -> None:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", always_ls)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    entries = all_entries()
    seed = next(i for i, e in enumerate(entries) if "GorillaFileSystem" in e.involved_classes and len(e.turns) > 1)
    mode, calls = ENGINE_MODES[style]
    settings = EpisodeSettings(mode=mode, calls=calls, max_turns=200)
    spec = BFCLRun(run="cut", style=style, endpoint=url, settings=settings)
    try:
        with TrajectoryStore.open(tmp_path, spec) as store:
            async with EndpointPool.open([url]) as pool:
                selection = Selection(
                    spec.run, spec.settings, [EpisodeKey(world=WORLD, seed=seed, sample=0, hinted=False)]
                )
                await run_rollout(
                    selection, store, pool, lambda: BFCLConversation(entries, style, anyio.CapacityLimiter(1)), 1
                )
    finally:
        await runner.cleanup()
    (record,) = read_records(tmp_path)
    assert (record.status, record.cause, record.scorecard) == (
        "truncated",
        "user_turn_limit",
        "multi_turn:force_terminated",
    )
    assert len(record.turns) == MAX_STEPS + 1 == record.tool_calls  # bfcl-eval's count passes 20 on the 21st step


@pytest.mark.slow  # ~20 s of the real model reading a 4,000-token prompt: `just test-slow`
def test_the_embedded_model_plays_a_real_entry(tmp_path: Path) -> None:
    """The default endpoint: SmolLM2-135M on llama.cpp, one two-turn entry (its prompt is ~4,000 tokens)."""
    completed = bench("--ids", "multi_turn_base_100", "--max-tokens", "24", "--out", str(tmp_path))
    assert completed.returncode == 0, completed.stderr[-2000:]
    (record,) = read_records(tmp_path)
    summary = results(tmp_path)
    assert record.status in ("ok", "truncated") and record.reward in (0.0, 1.0), record.detail
    assert summary["endpoint"].startswith("the embedded server (") and summary["entries"] == {"base": 1}
    assert record.key.seed == next(i for i, e in enumerate(all_entries()) if e.id == "multi_turn_base_100")
    assert len(record.turns) >= 2 and all(turn.prompt_tokens for turn in record.turns)


def test_an_outage_fails_the_bench_and_a_rerun_plays_what_it_cost(tmp_path: Path) -> None:
    """Entries an unreachable endpoint cost are not results: the run exits 3 saying why, and the same command,
    once the endpoint is up, plays them (the results then have no infrastructure failures)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    command = ["--endpoint", url, "--ids", "multi_turn_base_0,multi_turn_base_1", "--out", str(tmp_path)]
    down = bench(*command)
    assert down.returncode == 3, down.stderr[-2000:]
    assert "2 of 2 episodes failed for infrastructure reasons (endpoint:connection 2)" in down.stderr
    assert results(tmp_path)["infra_errors"] == 2
    with launched_command("mock-server", "--script", "bfcl", "--port", str(port)):
        up = bench(*command)
    assert up.returncode == 0, up.stderr[-2000:]
    assert results(tmp_path)["infra_errors"] == 0 and results(tmp_path)["accuracy"] == {"base": 1.0}
