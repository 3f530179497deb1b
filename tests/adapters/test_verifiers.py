"""The verifiers adapter against the real library (verifiers 0.4): `load_environment(...)`, run through
verifiers' own evaluation (`run_eval`, what `vf-eval` runs) against a scripted OpenAI-compatible endpoint over
real HTTP, for a reference world, a trusted Python file, a spec file and a model-written file (sandboxed). The
reward is the world's own grade: 1.0 for its reference solution, the world's partial credit otherwise."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from toolworlds.adapters.blocking import BlockingWorld
from toolworlds.adapters.verifiers import load_environment
from toolworlds.core import Finish, ToolCall, named_call
from toolworlds.examples import EXAMPLE_SPEC, EXAMPLE_WORLD
from toolworlds.tool import FINISH_TOOL

EXAMPLES = Path(__file__).parents[2] / "toolworlds" / "examples"
Plans = dict[str, list[tuple[str, dict[str, Any]]]]  # a task's instruction -> the calls the script makes


def _plans(world: str, seeds: range) -> Plans:
    """Each task's reference solution, keyed by its instruction (what the scripted model is shown)."""
    plans: Plans = {}
    with BlockingWorld(world) as opened:
        for seed in seeds:
            episode = opened.open()
            task = episode.reset(seed)
            assert task.instruction not in plans, "the script tells tasks apart by their instructions"
            plans[task.instruction] = [named_call(call) for call in episode.solution()]
            episode.close()
    return plans


class Scripted(BaseHTTPRequestHandler):
    """A chat-completions endpoint that plays each task's plan, one call per turn, and records what it was sent."""

    plans: ClassVar[Plans] = {}
    requests: ClassVar[list[dict[str, Any]]] = []
    base_url: ClassVar[str] = ""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append(body)
        instruction = next(m["content"] for m in body["messages"] if m["role"] == "user").split("\n\nHint: ")[0]
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        plan = self.plans.get(instruction, [(FINISH_TOOL, {})])
        name, arguments = plan[turn] if turn < len(plan) else (FINISH_TOOL, {})
        call = {"id": f"call_{turn}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)}}  # fmt: skip
        choice = {"index": 0, "finish_reason": "tool_calls",
                  "message": {"role": "assistant", "content": None, "tool_calls": [call]}}  # fmt: skip
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        answer = json.dumps({"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0,
                             "model": body["model"], "choices": [choice], "usage": usage}).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[Scripted]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("SCRIPTED_API_KEY", "sk-scripted")
    Scripted.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    Scripted.plans, Scripted.requests = {}, []
    yield Scripted
    server.shutdown()


def _evaluate(world: str, seeds: range, base_url: str, out: Path, hinted: bool = False) -> list[Any]:
    """verifiers' own evaluation of the environment: every rollout's trace."""
    import verifiers.v1 as vf
    from verifiers.v1.cli.eval.runner import run_eval
    from verifiers.v1.configs.cli.eval import EvalConfig

    environment = load_environment(world, tasks=len(seeds), first_seed=seeds.start, hinted=hinted, max_turns=12)
    config = EvalConfig(env=environment.config, model="scripted", client=vf.EvalClientConfig(
        base_url=base_url, api_key_var="SCRIPTED_API_KEY"), num_rollouts=1, max_concurrent=2, push=False, rich=None,
        output_dir=str(out))  # fmt: skip
    episodes = asyncio.run(run_eval(config))
    return [trace for episode in episodes for trace in episode.traces]


def _written(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("kind", ["reference", "python-file", "spec-file", "model-written", "plugin"])
def test_verifiers_own_evaluation_pays_the_worlds_grade(kind: str, endpoint: type[Scripted], tmp_path: Path) -> None:
    world = {"reference": lambda: "orders",
             "plugin": lambda: "tau2-telecom",  # an installed package's world: tau2's, the phone's tools included
             "python-file": lambda: f"{EXAMPLES / 'library.py'}:LibraryWorld",
             "spec-file": lambda: _written(tmp_path / "library.json", EXAMPLE_SPEC),
             "model-written": lambda: _written(tmp_path / "written.py", EXAMPLE_WORLD)}[kind]()  # fmt: skip
    traces = []
    for seed in (0, 2):  # one evaluation each: the script tells tasks apart by instruction, and seeds can share one
        endpoint.plans = _plans(world, range(seed, seed + 1))
        traces += _evaluate(world, range(seed, seed + 1), endpoint.base_url, tmp_path / "out")
    assert len(traces) == 2
    for trace in traces:
        assert trace.reward == 1.0 and trace.rewards["world_grade"].score == 1.0, trace.errors
        assert trace.info["scorecard"] and not trace.errors
        last = trace.messages[-1]  # verifiers records each model call: the last is the call that ended the episode
        assert last.role == "assistant" and last.tool_calls[-1].name == FINISH_TOOL
    offered = {tool["function"]["name"] for tool in endpoint.requests[0]["tools"]}
    with BlockingWorld(world) as opened:
        assert offered == {t["function"]["name"] for t in opened.world.openai_tools()} | {FINISH_TOOL}
    assert list((tmp_path / "out").rglob("traces.jsonl")), "verifiers wrote its results as it does for vf-eval"


def test_a_rollout_that_stops_early_gets_the_worlds_partial_credit(endpoint: type[Scripted], tmp_path: Path) -> None:
    plans = _plans("orders", range(1))
    endpoint.plans = {instruction: plan[:1] for instruction, plan in plans.items()}  # one call, then finish
    [trace] = _evaluate("orders", range(1), endpoint.base_url, tmp_path / "out", hinted=True)
    with BlockingWorld("orders") as opened:
        episode = opened.open()
        task = episode.reset(0)
        name, arguments = next(iter(plans.values()))[0]
        episode.step(ToolCall(name=name, arguments=arguments))
        expected = episode.step(Finish()).reward
        episode.close()
    assert trace.reward == expected < 1.0
    assert f"Hint: {task.hint}" in endpoint.requests[0]["messages"][1]["content"], "hinted: the prompt shows the hint"
