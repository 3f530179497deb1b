"""The designer's turn: one prompt, one reply, through the same endpoints and clients as the agent's turns.

In `tokens` mode the reply comes with the ids the server sampled and their logprobs (the trace the
designer's GRPO update needs); in `chat` mode with whatever the server returns. An endpoint that fails is
recorded, never retried here beyond the pool's own retries, and the design counts as masked, not invalid.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from engine.clients import ChatClient, ModelClient, Route, TokensClient
from engine.endpoints import EndpointPool
from engine.messages import Message
from engine.settings import EpisodeSettings
from engine.templates import load_template
from engine.trajectory import EpisodeKey, TokenTrace, Turn
from engine.transport import EndpointFailure
from toolworlds.spec import spec_schema
from trainers.designer.budget import SPEC_BUDGET, SpecBudget
from trainers.designer.prompt import DesignFormat
from trainers.designer.stages import SpecStages


class DesignSample(BaseModel):
    """One designer turn as sampled: what it was asked, what it wrote, and the ids when kept."""

    key: str
    document: str = Field(description="Where the grounding document came from.")
    prompt_version: str
    messages: list[Message]
    reply: str | None = None
    failure: str | None = Field(default=None, description="Why no reply came back (an endpoint failure).")
    finish_reason: str | None = None
    tokens: TokenTrace | None = None
    latency_s: float = 0.0


def _bare_spec_schema() -> dict[str, Any]:
    """The published spec schema without its `$schema` and `$id` (a response format and a grammar want the body)."""
    return {key: value for key, value in spec_schema().items() if key not in ("$schema", "$id")}


def design_schema(budget: SpecBudget = SPEC_BUDGET) -> dict[str, Any]:
    """The schema a designer's spec is sampled under: the published one within `budget`."""
    schema = _bare_spec_schema()
    definitions = {"Spec": schema, **schema["$defs"]}
    for (definition, name), keywords in budget.limits().items():
        node = definitions[definition]["properties"][name]
        for target in node.get("anyOf", [node]):  # an optional list: cap the list, not the null
            if target.get("type") in ("array", "object"):
                target.update(keywords)
    _cap_strings(schema, budget.text)
    return schema


def _cap_strings(node: Any, length: int) -> None:
    if isinstance(node, dict):
        kinds = node.get("type")
        if kinds == "string" or (isinstance(kinds, list) and "string" in kinds):
            node["maxLength"] = min(node.get("maxLength", length), length)
        for value in node.values():
            _cap_strings(value, length)
    elif isinstance(node, list):
        for value in node:
            _cap_strings(value, length)


def design_constraint(design_format: str, tokens: bool) -> tuple[str | None, dict[str, Any]]:
    """(grammar, extra body) that hold a designer's reply to its format: a spec is sampled in stages in tokens
    mode (`sample_design` builds each stage's grammar: none here) and under a JSON-schema response format
    in chat mode; Python is left free."""
    if design_format != "spec" or tokens:
        return None, {}
    response_format = {"type": "json_schema", "json_schema": {"name": "toolworld_spec", "schema": design_schema()}}
    return None, {"response_format": response_format}


async def sample_design(
    pool: EndpointPool,
    settings: EpisodeSettings,
    run: str,
    seed: int,
    sample: DesignSample,
    design_format: DesignFormat = "python",
    stages: Callable[[], SpecStages] = SpecStages,
) -> DesignSample:
    """Ask for one world; fills `sample.reply` (or `sample.failure`) and the token trace. A spec in tokens mode
    is written in stages (`trainers.designer.stages`, a fresh machine from `stages` for each reply), each held
    by a grammar of what came before; with `task_text="derived"` its instruction and hint are worded from its
    plan (only there: a reply sampled whole cannot be held to a text that depends on what it wrote before)."""
    machine = stages()
    derived = [f"{what}=derived" for what, rule in (("task_text", machine.task_text), ("tool_text", machine.tool_text))
               if rule == "derived"] + (["key_choices"] if machine.key_choices else [])  # fmt: skip
    if derived and (design_format != "spec" or settings.mode != "tokens"):
        raise ValueError(
            f"{' and '.join(derived)} words a staged spec as it is written: it needs the spec format in tokens mode, "
            f"not {design_format!r} in {settings.mode!r} mode"
        )
    started = time.perf_counter()
    with pool.sticky() as endpoint:
        key = EpisodeKey(role="designer", world="design", seed=seed)
        route = Route(pool, endpoint, key.header(run), settings.request_timeout_s)
        client: ModelClient
        if settings.mode == "tokens":
            client = TokensClient(route, settings, [], load_template(settings.tokenizer or ""))
        else:
            client = ChatClient(route, settings, [])
        client.start(sample.messages)
        turn = Turn(index=0, endpoint=endpoint.url, started_s=0.0, latency_s=0.0, attempts=0)
        try:
            if isinstance(client, TokensClient) and design_format == "spec":
                message = await client.sample_stages(machine, turn)
            else:
                message, _ = await client.sample(sample.messages, turn)
        except EndpointFailure as failure:
            sample.failure = f"{failure.cause}: {failure.detail}"
        else:
            client.finish([*sample.messages, message])
            sample.reply = message.get("content") or ""
            sample.finish_reason = turn.finish_reason
            sample.tokens = client.tokens
    sample.latency_s = time.perf_counter() - started
    return sample
