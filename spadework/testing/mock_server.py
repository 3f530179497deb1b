"""A scripted OpenAI-compatible server on loopback: test and benchmark infrastructure, not a model.

It answers `/v1/chat/completions` as a tool-calling model would. Its "model" is a script that reads the
episode from the `X-Spadework-Episode` header the engine sends (`run/role/world/seed/hinted/sample`):

- `oracle` plays the world's reference solution, one call per turn (the turn is the number of earlier
  assistant replies that held a usable call, so an injected malformed reply is simply repeated);
- `random` calls random tools with schema-shaped arguments (`toolworlds.policies.RandomPolicy`);
- `malformed` only ever writes broken calls;
- `bfcl` answers BFCL v4 multi-turn entries (world `bfcl-v4`) with their ground truth, turn by turn
  (`benchmarks.bfcl.replay`; needs bfcl-eval); offered no tools, it writes them as bfcl-eval's prompting
  protocol asks, `[func(a=1)]`;
- `acebench` says the milestones of ACEBench Agent tasks (world `acebench`, the vendored data) and plays
  their user (`benchmarks.acebench.replay`).

Calls come back as native `tool_calls`, or as text in one of the protocols the engine parses (`--style`); a
request with a JSON-schema `response_format` (on `/v1/completions`: llama.cpp's `grammar` or `json_schema`)
gets the bare JSON object. Latency and faults (5xx, hangs past the client's deadline, dropped connections, a
200 with garbage for a body, malformed calls) are injected at configured rates. Like vLLM with
`return_token_ids`, it returns the prompt's and the completion's token ids and per-token logprobs, from a
byte-level "tokenizer" over a fixed chat template (`render`), so the engine's token accounting can be checked
exactly. `--drift` re-renders past tool-call arguments differently, as a server with a non-prefix-preserving
template would. Like vLLM with runtime LoRA updating, it takes `/v1/load_lora_adapter` (checking the PEFT
files are there); like vLLM in dev mode, `/collective_rpc` `reload_weights` (checking the safetensors file is
there) and `/reset_prefix_cache`; `/stats` says what was loaded, which model each request named and
which tools each request offered."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import logging
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from aiohttp import web

from engine.parsing import parse_constrained, parse_native, parse_text
from engine.templates import load_template
from engine.trajectory import EPISODE_HEADER, EpisodeKey
from toolworlds.core import Finish, ToolCall, ToolWorld, named_call
from toolworlds.hosting.serving import HostOption, bind
from toolworlds.policies import RandomPolicy
from toolworlds.registry import load_world, world_in_file
from toolworlds.tool import FINISH_TOOL

Script = Literal["oracle", "random", "malformed", "bfcl", "acebench"]
Style = Literal["native", "hermes", "json", "python"]
FAULTS = ("5xx", "hang", "drop", "garbage", "malformed")


@dataclass
class MockSettings:
    script: Script = "oracle"
    style: Style = "native"
    latency_s: float = 0.0
    fault_rate: float = 0.0
    faults: tuple[str, ...] = FAULTS
    hang_s: float = 3600.0
    drift: bool = False
    seed: int = 0
    worlds: tuple[str, ...] = ()
    tokenizer: str | None = None
    designs: tuple[str, ...] = ()  # world sources a designer request gets back, in turn


@dataclass
class MockStats:
    requests: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    models: Counter[str] = field(default_factory=Counter)  # the model each request named
    adapters: dict[str, dict[str, Any]] = field(default_factory=dict)  # LoRA name -> path, weights' sha256, loads
    reloads: list[dict[str, str]] = field(default_factory=list)  # full-weight reloads: path, weights' sha256
    prefix_cache_resets: int = 0
    offered: dict[str, list[list[str]]] = field(default_factory=dict)  # episode -> tool names sent, per request


# -- the byte-level template -----------------------------------------------------------------------


def _assistant_body(message: dict[str, Any], drift: bool = False) -> str:
    text = message.get("content") or ""
    for entry in message.get("tool_calls") or []:
        function = entry.get("function") or {}
        arguments = function.get("arguments") or ""
        if drift:
            with contextlib.suppress(json.JSONDecodeError):
                arguments = json.dumps(json.loads(arguments), sort_keys=True)
        text += f"<tool_call>{function.get('name')}:{arguments}</tool_call>"
    return text


def render(messages: list[dict[str, Any]], drift: bool = False) -> str:
    """The mock's chat template: `<|role|>body<|end|>` per message."""
    parts = []
    for message in messages:
        role = message.get("role", "user")
        body = _assistant_body(message, drift) if role == "assistant" else str(message.get("content") or "")
        parts.append(f"<|{role}|>{body}<|end|>")
    return "".join(parts)


def token_ids(text: str) -> list[int]:
    return list(text.encode())


def fake_logprob(token: int) -> float:
    return -0.05 * (token % 13 + 1)


# -- the scripted model ----------------------------------------------------------------------------


@lru_cache(maxsize=64)
def _world_class(spec: str) -> type[ToolWorld[Any]]:
    """A world by spec; a bare `file.py` (what an engine names a model-written world by) is imported here.

    The mock trusts the files it is given: it is test infrastructure, never the engine."""
    if spec.endswith(".py") and ":" not in spec:
        return world_in_file(Path(spec))
    return load_world(spec)


@lru_cache(maxsize=16384)
def _plan(world_spec: str, seed: int) -> list[ToolCall | Finish]:
    world = _world_class(world_spec)()
    world.reset(seed)
    return world.solution()


def _bfcl_calls(
    episode: EpisodeKey, messages: list[dict[str, Any]], constrained: bool
) -> list[tuple[str, dict[str, Any]]]:
    from benchmarks.bfcl.play import all_entries
    from benchmarks.bfcl.replay import scripted_calls

    return scripted_calls(all_entries()[episode.seed], messages, constrained)


def _usable_turns(messages: list[dict[str, Any]], constrained: bool) -> int:
    count = 0
    for message in messages:
        if message.get("role") != "assistant":
            continue
        reply = parse_constrained(message.get("content") or "") if constrained else parse_native(message)
        if reply.calls and not reply.problems:
            count += 1
    return count


class MockRequestError(Exception):
    """A request the mock cannot answer (400)."""


class MockModel:
    def __init__(self, settings: MockSettings) -> None:
        self.settings = settings
        self.stats = MockStats()
        self._rng = random.Random(settings.seed)
        self._ids = itertools.count()
        # Known by name, and by file: an engine playing a model-written `file.py` names the world by its path.
        self._world_specs = {_world_class(spec).name: spec for spec in settings.worlds}
        self._world_specs |= {spec.rpartition(":")[0]: spec for spec in settings.worlds if ":" in spec}
        self.template = load_template(settings.tokenizer) if settings.tokenizer else None

    def _spec(self, world: str) -> str:
        return self._world_specs.get(world, world)

    def next_action(self, episode: EpisodeKey, turn: int) -> ToolCall | Finish:
        """What the script does at its `turn`-th usable reply."""
        seed, sample = episode.seed, episode.sample
        spec = self._spec(episode.world)
        if self.settings.script == "oracle":
            plan = _plan(spec, seed)
            return plan[turn] if turn < len(plan) else Finish()
        instance = _world_class(spec)()
        task = instance.reset(seed)
        # a digest, not `hash()`: Python salts string hashes per process, so the same episode played twice
        # (or a test's in another run) would draw other calls
        digest = hashlib.sha256(f"{seed}/{sample}/{turn}".encode()).digest()
        policy = RandomPolicy(seed=int.from_bytes(digest[:4], "big"))
        policy.start(instance, task)
        return policy.act(None)

    def design(self, episode: EpisodeKey, constrained: bool = False) -> str:
        """A designer's reply: one of the given world sources, chosen by the seed, in a fenced block (bare
        when the request constrains the reply, as a spec designer's is)."""
        if not self.settings.designs:
            raise MockRequestError("a designer request, but this mock was started without --design FILE")
        source = self.settings.designs[episode.seed % len(self.settings.designs)]
        if constrained:
            return source
        return f"Here is a toolworld grounded in the document.\n\n```python\n{source}```\n"

    def reply(self, episode: EpisodeKey, body: dict[str, Any], malformed: bool) -> dict[str, Any]:
        """The assistant message for this request."""
        constrained = (body.get("response_format") or {}).get("type") == "json_schema"
        if episode.role == "designer":
            return {"role": "assistant", "content": self.design(episode, constrained)}
        messages = body.get("messages") or []
        if malformed or self.settings.script == "malformed":
            return {"role": "assistant", "content": '<tool_call>{"name": "oops", "arguments": {"x": }</tool_call>'}
        if self.settings.script == "acebench":
            return self._acebench(episode, body, messages)
        if self.settings.script == "bfcl":
            calls = _bfcl_calls(episode, messages, constrained)
            if not calls:
                return self._message([(FINISH_TOOL, {})] if constrained else [], constrained)
            # Offered no tools, a BFCL model answers in bfcl-eval's prompting syntax (`[func(a=1)]`).
            return self._message(calls, constrained, None if body.get("tools") else "python")
        return self._message([named_call(self.next_action(episode, _usable_turns(messages, constrained)))], constrained)

    def _acebench(self, episode: EpisodeKey, body: dict[str, Any], messages: list[dict[str, Any]]) -> dict[str, Any]:
        from benchmarks.acebench import replay

        if episode.role == "user":
            return {"role": "assistant", "content": replay.user_reply(messages)}
        task = replay.vendored_tasks()[episode.seed]
        if not body.get("tools"):
            return {"role": "assistant", "content": replay.agent_prompt_reply(task, messages)}
        said = replay.agent_fc_reply(task, messages)
        return self._message(said, False) if isinstance(said, list) else {"role": "assistant", "content": said}

    def _message(
        self, calls: list[tuple[str, dict[str, Any]]], constrained: bool, style: Style | None = None
    ) -> dict[str, Any]:
        """An assistant message making `calls` in `style` (default: the configured one; no calls: a text answer)."""
        if not calls:
            return {"role": "assistant", "content": "Done."}
        if constrained:
            ((name, arguments),) = calls
            return {"role": "assistant", "content": json.dumps({"name": name, "arguments": arguments})}
        style = style or self.settings.style
        if style == "native":
            native = [
                {
                    "id": f"call_{next(self._ids)}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments, separators=(",", ":"))},
                }
                for name, arguments in calls
            ]
            return {"role": "assistant", "content": None, "tool_calls": native}
        if style == "hermes":
            text = "".join(
                f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"
                for name, arguments in calls
            )
        elif style == "json":
            objects = [{"name": name, "arguments": arguments} for name, arguments in calls]
            text = json.dumps(objects[0] if len(objects) == 1 else objects)
        else:
            listed = (
                f"{name}({', '.join(f'{key}={value!r}' for key, value in arguments.items())})"
                for name, arguments in calls
            )
            text = f"[{', '.join(listed)}]"
        return {"role": "assistant", "content": text}

    def completion(self, body: dict[str, Any], message: dict[str, Any]) -> dict[str, Any]:
        # Byte-level: a text's token ids are its UTF-8 bytes, so usage is a length and lists are built only on request.
        prompt = (render(body.get("messages") or [], self.settings.drift) + "<|assistant|>").encode()
        sampled = (_assistant_body(message) + "<|end|>").encode()
        choice: dict[str, Any] = {
            "index": 0,
            "message": message,
            "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
        }
        answer = self._envelope("chat.completion", body, choice, len(prompt), len(sampled))
        if body.get("return_token_ids"):
            answer["prompt_token_ids"] = list(prompt)
            choice["token_ids"] = list(sampled)
        if body.get("logprobs"):
            choice["logprobs"] = {
                "content": [
                    {"token": chr(t), "logprob": fake_logprob(t), "bytes": [t], "top_logprobs": []} for t in sampled
                ]
            }
        return answer

    def token_completion(self, episode: EpisodeKey, body: dict[str, Any], malformed: bool) -> dict[str, Any]:
        """`/v1/completions` with a token-id prompt, answered like vLLM with `return_token_ids`."""
        if self.template is None:
            raise MockRequestError("this mock serves /v1/completions only when started with --tokenizer")
        prompt = body.get("prompt")
        if not isinstance(prompt, list) or not all(isinstance(token, int) for token in prompt):
            raise MockRequestError("'prompt' must be a list of token ids")
        tokenizer = self.template.tokenizer
        text = tokenizer.decode(prompt, skip_special_tokens=False)
        turns = text.split("<|im_start|>assistant\n")[1:]
        constrained = bool({"grammar", "json_schema", "structured_outputs"} & body.keys())  # the reply is the bare call
        parse = parse_constrained if constrained else parse_text
        usable = sum(1 for turn in turns if (reply := parse(turn.split("<|im_end|>")[0])).calls and not reply.problems)
        if episode.role == "designer":
            reply_text = self.design(episode, constrained)
        elif malformed or self.settings.script == "malformed":
            reply_text = '<tool_call>{"name": "oops", "arguments": {"x": }</tool_call>'
        else:
            name, arguments = named_call(self.next_action(episode, usable))
            call = json.dumps({"name": name, "arguments": arguments})
            reply_text = call if constrained else f"<tool_call>\n{call}\n</tool_call>"
        sampled = [*tokenizer.encode(reply_text, add_special_tokens=False), self.template.eos_token_id]
        choice: dict[str, Any] = {
            "index": 0,
            "text": reply_text,
            "finish_reason": "stop",
            "token_ids": sampled,
            "prompt_token_ids": prompt,
        }
        if body.get("logprobs"):
            choice["logprobs"] = {"token_logprobs": [fake_logprob(token) for token in sampled]}
        return self._envelope("text_completion", body, choice, len(prompt), len(sampled))

    def _envelope(
        self, kind: str, body: dict[str, Any], choice: dict[str, Any], prompt_tokens: int, completion_tokens: int
    ) -> dict[str, Any]:
        """The OpenAI response around one choice, with usage counted in the mock's tokens."""
        return {
            "id": f"{kind}-{next(self._ids)}",
            "object": kind,
            "created": int(time.time()),
            "model": body.get("model", "mock"),
            "choices": [choice],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def draw_fault(self) -> str | None:
        if self.settings.fault_rate <= 0 or self._rng.random() >= self.settings.fault_rate:
            return None
        return self._rng.choice(self.settings.faults)


# -- HTTP ------------------------------------------------------------------------------------------


def _error(status: int, message: str) -> web.Response:
    body = {"error": {"message": message, "type": "invalid_request_error", "code": status}}
    return web.json_response(body, status=status)


def _adapter_request(body: Any) -> tuple[str, str, bool]:
    if not isinstance(body, dict) or not body.get("lora_name") or not body.get("lora_path"):
        raise MockRequestError("give lora_name and lora_path")
    return str(body["lora_name"]), str(body["lora_path"]), bool(body.get("load_inplace", False))


def _adapter_digest(directory: Path) -> str:
    """What vLLM reads from a PEFT adapter directory; the digest lets tests check which weights were loaded."""
    for required in ("adapter_config.json", "adapter_model.safetensors"):
        if not (directory / required).is_file():
            raise FileNotFoundError(f"no {required} in {directory}")
    return hashlib.sha256((directory / "adapter_model.safetensors").read_bytes()).hexdigest()


def _weights_digest(directory: Path) -> str:
    """What vLLM's `reload_weights` reads from a directory of full weights."""
    weights = directory / "model.safetensors"
    if not weights.is_file():
        raise FileNotFoundError(f"no model.safetensors in {directory}")
    return hashlib.sha256(weights.read_bytes()).hexdigest()


def build_app(settings: MockSettings) -> web.Application:
    model = MockModel(settings)

    async def answer(
        request: web.Request, respond: Callable[[EpisodeKey, dict[str, Any], bool], dict[str, Any]]
    ) -> web.StreamResponse:
        """Validate, wait the latency, inject a fault if one is drawn, else answer with `respond`."""
        model.stats.requests += 1
        try:
            body = json.loads(await request.read())
        except json.JSONDecodeError as error:
            return _error(400, f"the request body is not JSON: {error}")
        model.stats.models[str(body.get("model"))] += 1
        header = request.headers.get(EPISODE_HEADER, "")
        try:
            episode = EpisodeKey.from_header(header)[1]
        except ValueError as error:
            return _error(400, f"the mock model needs the {EPISODE_HEADER} header: {error}")
        names = [entry.get("function", {}).get("name") for entry in body.get("tools") or []]
        model.stats.offered.setdefault(header, []).append(names)
        if settings.latency_s:
            await asyncio.sleep(settings.latency_s)
        fault = model.draw_fault()
        if fault is not None:
            model.stats.faults[fault] += 1
        if fault == "5xx":
            return _error(503, "injected fault: server overloaded")
        if fault == "hang":
            await asyncio.sleep(settings.hang_s)
        if fault == "drop":
            assert request.transport is not None
            request.transport.abort()
            raise ConnectionResetError("injected fault: connection dropped")
        if fault == "garbage":
            return web.Response(body=b'{"choices": [{"mess', content_type="application/json")
        try:
            return web.json_response(respond(episode, body, fault == "malformed"))
        except MockRequestError as error:
            return _error(400, str(error))

    async def chat_completions(request: web.Request) -> web.StreamResponse:
        return await answer(
            request, lambda episode, body, malformed: model.completion(body, model.reply(episode, body, malformed))
        )

    async def completions(request: web.Request) -> web.StreamResponse:
        return await answer(request, model.token_completion)

    async def models(request: web.Request) -> web.Response:
        adapters = [{"id": name, "object": "model", "parent": "mock"} for name in model.stats.adapters]
        return web.json_response(
            {"object": "list", "data": [{"id": "mock", "object": "model", "owned_by": "spadework"}, *adapters]}
        )

    async def stats(request: web.Request) -> web.Response:
        stats = model.stats
        return web.json_response({"requests": stats.requests, "faults": dict(stats.faults),
                                  "models": dict(stats.models), "adapters": stats.adapters,
                                  "reloads": stats.reloads, "prefix_cache_resets": stats.prefix_cache_resets,
                                  "offered": stats.offered})  # fmt: skip

    async def load_lora_adapter(request: web.Request) -> web.Response:
        try:
            name, path, inplace = _adapter_request(await request.json())
        except (ValueError, MockRequestError) as error:
            return _error(400, f"bad load_lora_adapter request: {error}")
        if name in model.stats.adapters and not inplace:
            return _error(400, f"The lora adapter '{name}' has already been loaded.")
        try:
            digest = _adapter_digest(Path(path))
        except FileNotFoundError as error:
            return _error(404, f"Loading lora {name} failed: {error}")
        loads = model.stats.adapters.get(name, {}).get("loads", 0) + 1
        model.stats.adapters[name] = {"path": path, "sha256": digest, "loads": loads}
        return web.Response(text=f"Success: LoRA adapter '{name}' added successfully.")

    async def collective_rpc(request: web.Request) -> web.Response:
        body = await request.json()
        if not isinstance(body, dict) or body.get("method") != "reload_weights":
            return _error(400, "the mock's collective_rpc takes only method=reload_weights")
        path = str((body.get("kwargs") or {}).get("weights_path", ""))
        try:
            digest = _weights_digest(Path(path))
        except FileNotFoundError as error:
            return _error(500, f"reload_weights failed: {error}")
        model.stats.reloads.append({"path": path, "sha256": digest})
        return web.json_response({"results": [None]})

    async def reset_prefix_cache(request: web.Request) -> web.Response:
        model.stats.prefix_cache_resets += 1
        return web.Response(text="")

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/v1/completions", completions)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/stats", stats)
    # vLLM's runtime LoRA loading (VLLM_ALLOW_RUNTIME_LORA_UPDATING) and dev-mode prefix-cache reset.
    app.router.add_post("/v1/load_lora_adapter", load_lora_adapter)
    app.router.add_post("/collective_rpc", collective_rpc)  # dev mode: reload_weights only
    app.router.add_post("/reset_prefix_cache", reset_prefix_cache)
    app.router.add_get("/health", lambda request: web.json_response({"status": "ok"}))  # type: ignore[arg-type,return-value]
    return app


def command(
    script: Annotated[Script, typer.Option(help="What the scripted model plays.")] = "oracle",
    style: Annotated[Style, typer.Option(help="native tool_calls, or text: hermes, json, python.")] = "native",
    latency: Annotated[float, typer.Option(min=0.0, help="Seconds before each answer.")] = 0.0,
    fault_rate: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of requests given a fault.")] = 0.0,
    faults: Annotated[str, typer.Option(help=f"Comma-separated fault kinds: {', '.join(FAULTS)}.")] = ",".join(FAULTS),
    hang: Annotated[float, typer.Option(min=0.0, help="How long a 'hang' fault waits.")] = 3600.0,
    drift: Annotated[bool, typer.Option(help="Re-render past tool calls differently (token drift).")] = False,
    world: Annotated[list[str], typer.Option(help="Extra worlds to know (file.py:Class).")] = [],  # noqa: B006
    seed: Annotated[int, typer.Option(help="Seed of the fault draws.")] = 0,
    tokenizer: Annotated[str | None, typer.Option(help="Serve /v1/completions over this tokenizer ('bytes').")] = None,
    design: Annotated[
        list[Path], typer.Option(exists=True, dir_okay=False, help="World files designer requests get, in turn.")
    ] = [],  # noqa: B006
    host: HostOption = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to bind; 0 picks a free one.")] = 8800,
) -> None:
    """A scripted OpenAI-compatible model server for tests and benchmarks (not a model)."""
    if tokenizer is not None:
        try:
            load_template(tokenizer)
        except (ValueError, OSError) as error:
            raise typer.BadParameter(str(error), param_hint="--tokenizer") from None
    kinds = tuple(kind.strip() for kind in faults.split(",") if kind.strip())
    for kind in kinds:
        if kind not in FAULTS:
            raise typer.BadParameter(f"{kind!r} is not one of {', '.join(FAULTS)}", param_hint="--faults")
    settings = MockSettings(
        script=script,
        style=style,
        latency_s=latency,
        fault_rate=fault_rate,
        faults=kinds,
        hang_s=hang,
        drift=drift,
        seed=seed,
        worlds=tuple(world),
        tokenizer=tokenizer,
        designs=tuple(path.read_text() for path in design),
    )
    # Injected faults drop connections and outlive client deadlines on purpose; aiohttp would log each as an error.
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    application = build_app(settings)  # its worlds are loaded before it says it is serving
    sock = bind(host, port, backlog=16384)  # thousands of clients connect at once in the benchmarks
    bound_host, bound_port = sock.getsockname()[:2]
    print(f"serving mock model on http://{bound_host}:{bound_port}/v1", flush=True)
    web.run_app(application, sock=sock, print=None, access_log=None, handle_signals=True)
