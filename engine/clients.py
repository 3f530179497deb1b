"""How an episode asks the model for its next turn: one client per mode, all behind `ModelClient`.

- `ChatClient` (`chat`, `constrained`): sends the conversation as messages to `/chat/completions`; the
  server renders it. When asked, keeps the prompt and completion ids the server returns (vLLM
  `return_token_ids`) and counts the turns where the server's prompt no longer extends the held ids.
- `TokensClient` (`tokens`): renders the conversation itself with a `TokenTemplate`, sends token ids to
  `/completions`, and appends: each sampled completion (loss mask 1, with its logprobs), then the ids of
  whatever follows it (mask 0). The trajectory is token-exact by construction.

A client reports a reply it cannot use as an `EndpointFailure` (not retried): a malformed answer is the
server's fault, and the episode becomes an `infra_error` rather than a score.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol, cast

from engine.call_grammar import call_grammar
from engine.endpoints import Answer, Endpoint, EndpointPool
from engine.messages import Message, OpenAITool
from engine.parsing import ParsedReply, constrained_response_format, parse_constrained, parse_native, parse_text
from engine.settings import EpisodeSettings
from engine.templates import TokenTemplate
from engine.trajectory import DriftEvent, SampledSpan, TokenTrace, Turn
from engine.transport import EndpointFailure


class ModelClient(Protocol):
    tokens: TokenTrace | None
    tokens_used: int

    def start(self, messages: list[Message]) -> None:
        """The opening messages (system, task) are known."""

    async def sample(self, messages: list[Message], turn: Turn) -> tuple[Message, ParsedReply]:
        """Ask for the next turn; fill `turn`; return the assistant message to keep and what it says."""
        ...

    def observe(self, new_messages: list[Message]) -> None:
        """Messages the engine added after the last assistant turn (tool results, feedback)."""

    def finish(self, messages: list[Message]) -> None:
        """The episode is over."""


def _first_choice(answer: Answer, turn: Turn, needs: str) -> dict[str, Any]:
    body = answer.body
    turn.latency_s, turn.attempts = answer.latency_s, answer.attempts
    try:
        choice: dict[str, Any] = body["choices"][0]
        choice[needs]  # presence check
    except (KeyError, IndexError, TypeError):
        raise EndpointFailure("bad_response", f"the answer has no choices[0].{needs}", retryable=False) from None
    turn.finish_reason = choice.get("finish_reason")
    usage = body.get("usage") or {}
    turn.prompt_tokens, turn.completion_tokens = usage.get("prompt_tokens"), usage.get("completion_tokens")
    return choice


def _reply_message(choice: dict[str, Any]) -> Message:
    """`choices[0].message`, if it has the shape OpenAI's API gives; otherwise the endpoint failed (a server
    bug, never the model's turn): content a string or null, `tool_calls` a list of calls, all of it text."""
    message = choice["message"]
    if not isinstance(message, dict):
        problem = f"choices[0].message is {type(message).__name__}, not an object"
    elif not isinstance(message.get("content"), str | None):
        problem = f"choices[0].message.content is {type(message['content']).__name__}, not a string or null"
    elif not _calls_shaped(message.get("tool_calls")):
        problem = "choices[0].message.tool_calls is not a list of calls, each with a function object"
    elif not _unicode(message):
        problem = "choices[0].message is not valid Unicode text (it holds a lone surrogate)"
    else:
        return cast(Message, message)  # its shape checked above
    raise EndpointFailure("bad_response", problem, retryable=False)


def _calls_shaped(calls: object) -> bool:
    return calls is None or (
        isinstance(calls, list) and all(isinstance(c, dict) and isinstance(c.get("function"), dict) for c in calls)
    )


def _unicode(value: object) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return False
    return True


def _server_root(url: str) -> str:
    """The server's root URL from an OpenAI base URL (`http://host:port/v1` -> `http://host:port`)."""
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def _as_openai_completion(native: dict[str, Any]) -> dict[str, Any]:
    """llama.cpp's `/completion` answer in the shape of an OpenAI completion with vLLM's `token_ids`.

    `tokens` holds every sampled id. `completion_probabilities` has one entry per whole character: a token
    that ends mid-character (a UTF-8 lead byte) has no entry, and the entry that completes the character is
    the last token's, so an id without an entry gets an unknown logprob (None), never a guessed one.
    """
    if not isinstance(native.get("tokens"), list):
        raise EndpointFailure("bad_response", "llama.cpp's /completion answer has no tokens", retryable=False)
    sampled: list[int] = native["tokens"]
    entries = [e for e in native.get("completion_probabilities") or [] if isinstance(e, dict)]
    logprobs: list[float | None] = []
    position = 0
    for token in sampled:
        if position < len(entries) and entries[position].get("id") == token:
            logprobs.append(entries[position].get("logprob"))
            position += 1
        else:
            logprobs.append(None)
    finish = "length" if native.get("stop_type") == "limit" else "stop"
    return {
        "choices": [{"text": native.get("content", ""), "finish_reason": finish, "token_ids": sampled,
                     "logprobs": {"token_logprobs": logprobs}}],
        "usage": {"prompt_tokens": native.get("tokens_evaluated"), "completion_tokens": native.get("tokens_predicted")},
    }  # fmt: skip


def _sampled_ids_and_logprobs(choice: dict[str, Any]) -> tuple[list[int], list[float | None]]:
    """Sampled ids and their logprobs, as vLLM (`token_ids`, `logprobs.token_logprobs`) or llama.cpp
    (`logprobs.content[i].id` / `.logprob`) return them."""
    logprobs = choice.get("logprobs") or {}
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    sampled = choice.get("token_ids", choice.get("tokens"))
    if (
        sampled is None
        and isinstance(content, list)
        and all(isinstance(entry, dict) and "id" in entry for entry in content)
    ):
        sampled = [entry["id"] for entry in content]
    if not isinstance(sampled, list) or not all(isinstance(token, int) for token in sampled):
        raise EndpointFailure(
            "no_token_ids", "tokens mode needs the sampled ids (choices[0].token_ids)", retryable=False
        )
    if isinstance(content, list) and content:
        values = [entry.get("logprob") for entry in content if isinstance(entry, dict)]
    else:
        values = logprobs.get("token_logprobs") or [] if isinstance(logprobs, dict) else []
    return sampled, [None if value is None else float(value) for value in values]


class Stages(Protocol):
    """A reply written in stages (`TokensClient.sample_stages`): each stage's grammar from what came before."""

    def grammar(self, tokens_left: int) -> str | None:
        """The next stage's grammar, knowing how many of the reply's tokens are left; None when the reply is whole."""

    def wrote(self, text: str) -> None:
        """Take in the text the current stage sampled."""


@dataclass(frozen=True)
class Route:
    """Where an episode's requests go: its sticky endpoint, through the pool (limits, retries), with its headers."""

    pool: EndpointPool
    endpoint: Endpoint
    headers: dict[str, str]
    timeout_s: float

    async def post(self, path: str, body: dict[str, Any]) -> Answer:
        return await self.pool.post(self.endpoint, path, body, self.headers, self.timeout_s)


class ChatClient:
    def __init__(self, route: Route, settings: EpisodeSettings, tools: list[OpenAITool]) -> None:
        self.route, self.settings = route, settings
        self.tokens = TokenTrace() if settings.token_ids else None
        self.tokens_used = 0
        self._constrained = settings.mode == "constrained"
        self._tools = tools  # the episode's own list: a conversation adds to it as tools are revealed
        self._tool_field: dict[str, Any] = {}
        self._fielded = -1  # how many tools `_tool_field` was built for

    def _tool_fields(self) -> dict[str, Any]:
        """`tools`, or the constrained `response_format`, for the tools offered now; none for no tools."""
        if self._fielded != len(self._tools):
            self._fielded = len(self._tools)
            if not self._tools:  # a request without tools (the designer's) sends no tool fields at all
                self._tool_field = {}
            elif self._constrained:
                self._tool_field = {"response_format": constrained_response_format(self._tools)}
            else:
                self._tool_field = {"tools": list(self._tools)}
        return self._tool_field

    def start(self, messages: list[Message]) -> None:
        pass

    async def sample(self, messages: list[Message], turn: Turn) -> tuple[Message, ParsedReply]:
        settings = self.settings
        body: dict[str, Any] = {
            "model": settings.model,
            "messages": messages,
            "max_tokens": settings.max_tokens_per_turn,
            "temperature": settings.temperature,
            **self._tool_fields(),
        }
        if settings.token_ids:
            body["return_token_ids"] = True
            body["logprobs"] = True
        body.update(settings.extra_body)
        answer = await self.route.post("/chat/completions", body)
        choice = _first_choice(answer, turn, "message")
        message = _reply_message(choice)
        self.tokens_used = (turn.prompt_tokens or 0) + (turn.completion_tokens or 0)
        if self.tokens is not None:
            self._trace(answer.body, choice, turn)
        kept: Message = {"role": "assistant", "content": message.get("content")}
        if message.get("tool_calls"):
            kept["tool_calls"] = message["tool_calls"]  # verbatim: argument strings are never re-serialised
        if self._constrained:
            return kept, parse_constrained(message.get("content") or "")
        return kept, parse_native(message, strict=self.settings.calls == "native")

    def _trace(self, body: dict[str, Any], choice: dict[str, Any], turn: Turn) -> None:
        assert self.tokens is not None
        prompt_ids, sampled_ids = body.get("prompt_token_ids"), choice.get("token_ids")
        if not isinstance(prompt_ids, list) or not isinstance(sampled_ids, list):
            turn.problems.append("the server returned no token ids (prompt_token_ids / token_ids)")
            return
        content = (choice.get("logprobs") or {}).get("content") or []
        logprobs = [None if entry.get("logprob") is None else float(entry["logprob"]) for entry in content]
        self.tokens.add_turn(turn.index, prompt_ids, sampled_ids, logprobs)

    def observe(self, new_messages: list[Message]) -> None:
        pass

    def finish(self, messages: list[Message]) -> None:
        pass


class TokensClient:
    def __init__(
        self, route: Route, settings: EpisodeSettings, tools: list[OpenAITool], template: TokenTemplate
    ) -> None:
        self.route, self.settings = route, settings
        self.template = template
        self.tokens: TokenTrace | None = TokenTrace()
        self.tokens_used = 0
        self._tools = tools
        self._last_sampled: list[int] = []
        self._last_truncated = False
        self._grammar = ""  # settings.grammar, or with call_schema the call grammar of the tools in the opening

    @property
    def _trace(self) -> TokenTrace:
        assert self.tokens is not None
        return self.tokens

    def start(self, messages: list[Message]) -> None:
        self._tools = list(self._tools)  # rendered once, into the opening: tools revealed later arrive as text
        self._trace.prompt_ids = self.template.opening(messages, self._tools)
        if self.settings.grammar is not None:
            self._grammar = self.settings.grammar
        elif self.settings.call_schema:
            self._grammar = call_grammar(self._tools)
        self._trace.grammar = self._grammar
        self.tokens_used = len(self._trace.prompt_ids)

    async def sample(self, messages: list[Message], turn: Turn) -> tuple[Message, ParsedReply]:
        sampled, truncated = await self._sample_span(self._grammar, self.settings.max_tokens_per_turn, turn)
        self._last_sampled, self._last_truncated = sampled, truncated
        text = self.template.reply_text(sampled)
        reply = parse_constrained(text) if self.settings.call_schema else parse_text(text)
        return {"role": "assistant", "content": text}, reply

    async def sample_stages(self, stages: Stages, turn: Turn) -> Message:
        """One reply sampled in stages, each its own request under the grammar `stages` builds from what the
        earlier ones wrote. Every id is the server's (mask 1), each stage's start and grammar recorded as a
        span; the stages share the turn's token budget; a stage's closing end-of-generation step (the only
        token its finished grammar allowed) is dropped when another stage follows."""
        trace, budget = self._trace, self.settings.max_tokens_per_turn
        reply: list[int] = []
        usage = [0, 0]
        truncated = False
        grammar = stages.grammar(budget)
        while grammar is not None:
            if len(reply) >= budget:
                truncated = True
                break
            trace.spans.append(SampledSpan(start=len(trace.completion_ids), grammar=grammar))
            sampled, truncated = await self._sample_span(grammar, budget - len(reply) + 1, turn, usage)
            ended = bool(sampled) and sampled[-1] in self.template.stop_ids
            stages.wrote(self.template.reply_text(sampled))
            grammar = stages.grammar(budget - len(reply) - len(sampled) + 1)  # the stage's end step is dropped
            if len(reply) + len(sampled) > budget:  # the step past the budget (room for a stage's end) is not kept
                self._drop_last()
                reply.extend(sampled[:-1])
                truncated = True
                break
            if truncated or not ended:
                reply.extend(sampled)
                truncated = True
                break
            if grammar is None:  # the last stage: its end is the reply's
                reply.extend(sampled)
                break
            self._drop_last()
            reply.extend(sampled[:-1])
        turn.finish_reason = "length" if truncated else "stop"
        self._last_sampled, self._last_truncated = reply, truncated
        return {"role": "assistant", "content": self.template.reply_text(reply)}

    async def _sample_span(
        self, grammar: str, max_tokens: int, turn: Turn, usage: list[int] | None = None
    ) -> tuple[list[int], bool]:
        """Sample from the held ids under `grammar`; append the sampled ids (mask 1) to the trace."""
        settings, trace = self.settings, self._trace
        body: dict[str, Any] = {
            "model": settings.model,
            "prompt": trace.prompt_ids + trace.completion_ids,
            "max_tokens": max_tokens,
            "temperature": settings.temperature,
            "logprobs": 1,
            "return_token_ids": True,
            "skip_special_tokens": False,
            **settings.extra_body,
        }
        if grammar:  # llama.cpp's field (its own API and its OpenAI one); vLLM ignores it and reads its own
            body["grammar"] = grammar
            if settings.completions == "openai":
                body["structured_outputs"] = {"grammar": grammar}  # xgrammar reads llama.cpp's GBNF as is
        if settings.completions == "llama.cpp":
            body["return_tokens"] = True
            body["n_probs"] = 1
            answer = await self.route.post(_server_root(self.route.endpoint.url) + "/completion", body)
            answer.body = _as_openai_completion(answer.body)
        else:
            answer = await self.route.post("/completions", body)
        latency, attempts = turn.latency_s, turn.attempts
        choice = _first_choice(answer, turn, "text")
        if usage is not None:  # one turn of several requests: the turn reports their sums (and the most retries)
            turn.latency_s, turn.attempts = turn.latency_s + latency, max(turn.attempts, attempts)
            usage[0] += turn.prompt_tokens or 0
            usage[1] += turn.completion_tokens or 0
        sampled, logprobs = _sampled_ids_and_logprobs(choice)
        if turn.completion_tokens is not None and turn.completion_tokens != len(sampled):
            # llama.cpp's OpenAI API reports the tokens of one character as one entry: ids are missing.
            turn.problems.append(
                f"the server sampled {turn.completion_tokens} tokens but returned {len(sampled)} ids "
                "(a llama.cpp server needs completions='llama.cpp')"
            )
            trace.drift.append(DriftEvent(turn=turn.index, position=len(trace.prompt_ids) + len(trace.completion_ids)))
        if len(logprobs) != len(sampled):
            turn.problems.append(f"the server returned {len(logprobs)} logprobs for {len(sampled)} tokens")
            logprobs = [None] * len(sampled)
        if usage is not None:
            turn.prompt_tokens, turn.completion_tokens = usage
        self._append(sampled, logprobs, 1)
        return sampled, choice.get("finish_reason") == "length"

    def _append(self, ids: list[int], logprobs: list[float | None], mask: int) -> None:
        trace = self._trace
        trace.completion_ids.extend(ids)
        trace.loss_mask.extend([mask] * len(ids))
        trace.logprobs.extend(logprobs)
        self.tokens_used = len(trace.prompt_ids) + len(trace.completion_ids)

    def _drop_last(self) -> None:
        """Forget a stage's end-of-generation step: the grammar allowed nothing else, and a stage follows."""
        trace = self._trace
        del trace.completion_ids[-1], trace.loss_mask[-1], trace.logprobs[-1]
        self.tokens_used -= 1

    def observe(self, new_messages: list[Message]) -> None:
        glue = self.template.continuation(self._last_sampled, self._last_truncated, new_messages)
        self._append(glue, [0.0] * len(glue), 0)

    def finish(self, messages: list[Message]) -> None:
        """Compare the held ids with a one-shot rendering of the whole conversation; a difference is drift."""
        trace = self._trace
        held = trace.prompt_ids + trace.completion_ids
        rendered = self.template.render(messages, self._tools)
        trace.rerender_matches = rendered[: len(held)] == held
