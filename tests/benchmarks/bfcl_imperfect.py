"""A weak model playing BFCL v4 multi-turn, scripted: the ground truth with one deterministic mistake per entry.

It serves `/v1/chat/completions` over real HTTP, and its replies depend only on the request (which entry the
first user message is, which turn and step the conversation is at), so spadework's harness and bfcl-eval's own
pipeline, pointed at the same server, are asked exactly the same questions and given exactly the same answers.
Each mistake is one a weak model makes (`MISTAKES`); the entry's mistake is applied at its first turn that
expects calls (`held_out_early` at turn 0).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from aiohttp import web

from benchmarks.bfcl.data import Entry
from benchmarks.bfcl.episode import REVEAL_MESSAGE
from benchmarks.bfcl.replay import answer_calls
from engine.mock_server import MockModel, MockSettings

Call = tuple[str, dict[str, Any]]
MISTAKES = (
    "perfect",
    "text_calls",  # the calls written as text in `content`, no `tool_calls`
    "empty_arguments",  # `"arguments": ""` on the first call
    "malformed_arguments",  # arguments that are not JSON
    "arguments_not_object",  # arguments that are JSON, but a list
    "drop_call",  # the turn's last call left out
    "swap_calls",  # the turn's calls in reverse order
    "extra_call",  # the first call made twice
    "changed_argument",  # one argument's value changed
    "early_stop",  # a text answer where calls were expected
    "unknown_function",  # a call to a function no one offered, beside the right ones
    "held_out_early",  # a held-out function called before it is revealed (miss_func)
    "one_call_per_step",  # the turn's calls one reply at a time
    "text_and_calls",  # text beside the calls in one reply
    "step_limit_loop",  # the first call again and again, past the 20-step limit
    "long_turn",  # the first call 12 more times, then the rest, within the limit
)


def _position(entry: Entry, messages: list[dict[str, Any]]) -> tuple[int, int]:
    """(turn, step): the user's turns so far and the assistant replies since the last one began.

    A turn is a run of the entry's own user messages (as sent, or joined into one, or the reveal message):
    a harness may hand tool results back in user messages too, and those start nothing."""
    said = {REVEAL_MESSAGE} | {message["content"] for turn in entry.turns for message in turn}
    said |= {"\n\n".join(message["content"] for message in turn) for turn in entry.turns}
    turn, step, previous_was_turn = -1, 0, False
    for message in messages:
        starts = message.get("role") == "user" and message.get("content") in said
        if starts and not previous_was_turn:
            turn, step = turn + 1, 0
        elif message.get("role") == "assistant":
            step += 1
        previous_was_turn = starts
    return max(turn, 0), step


def _changed(arguments: dict[str, Any]) -> dict[str, Any]:
    changed = dict(arguments)
    for key, value in arguments.items():
        if isinstance(value, bool):
            changed[key] = not value
        elif isinstance(value, str):
            changed[key] = value + "_x"
        elif isinstance(value, int | float):
            changed[key] = value + 1
        else:
            continue
        return changed
    return {**changed, "unexpected": 1}


class ImperfectModel:
    """Answers for the entries in `plan` (entry id -> mistake); the entry is found by its first user message."""

    def __init__(self, entries: list[Entry], plan: dict[str, str]) -> None:
        self.by_question: dict[str, Entry] = {}
        for entry in entries:
            if entry.id in plan:
                question = entry.turns[0][-1]["content"]
                if question in self.by_question:
                    raise ValueError(f"{entry.id} and {self.by_question[question].id} open with the same message")
                self.by_question[question] = entry
        self.plan = plan
        self._ids = itertools.count()
        self._envelope = MockModel(MockSettings())

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        first = next(message["content"] for message in messages if message.get("role") == "user")
        entry = self.by_question[first]
        turn, step = _position(entry, messages)
        mistake = self.plan[entry.id]
        expected = answer_calls(entry, turn) if turn < len(entry.ground_truth) else []
        target = 0 if mistake == "held_out_early" else next((t for t, g in enumerate(entry.ground_truth) if g), -1)
        if turn != target or mistake == "perfect":
            return self._calls(expected) if step == 0 and expected else self._text("Done.")
        return self._mistaken(mistake, entry, expected, step)

    def _mistaken(self, mistake: str, entry: Entry, expected: list[Call], step: int) -> dict[str, Any]:
        if not expected and mistake != "held_out_early":
            return self._text("Done.")
        first, rest = (expected[0], expected[1:]) if expected else (("", {}), [])
        if mistake == "step_limit_loop":
            return self._calls([first])
        if mistake == "one_call_per_step":
            return self._calls([expected[step]]) if step < len(expected) else self._text("Done.")
        if mistake == "long_turn":
            if step < 12:
                return self._calls([first])
            return self._calls(rest) if step == 12 and rest else self._text("Done.")
        if step > 0:
            return self._text("Done.")
        if mistake == "text_calls":
            listed = ", ".join(f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})" for name, args in expected)
            return self._text(f"[{listed}]")
        if mistake in ("empty_arguments", "malformed_arguments", "arguments_not_object"):
            raw = {"empty_arguments": "", "malformed_arguments": '{"x": ', "arguments_not_object": "[1, 2]"}[mistake]
            return self._calls(expected, raw_first=raw)
        if mistake == "drop_call":
            return self._calls(expected[:-1]) if len(expected) > 1 else self._text("Done.")
        if mistake == "swap_calls":
            return self._calls(expected[::-1])
        if mistake == "extra_call":
            return self._calls([first, *expected])
        if mistake == "changed_argument":
            return self._calls([(first[0], _changed(first[1])), *rest])
        if mistake == "early_stop":
            return self._text("I can't do that.")
        if mistake == "unknown_function":
            return self._calls([("lookup_everything", {"query": "all"}), *expected])
        if mistake == "held_out_early":
            hidden = {doc["name"] for docs in entry.missed.values() for doc in docs}
            later = [call for turn in range(len(entry.ground_truth)) for call in answer_calls(entry, turn)]
            return self._calls([*[call for call in later if call[0] in hidden][:1], *expected])
        if mistake == "text_and_calls":
            return self._calls(expected, text="Let me take care of that.")
        raise ValueError(f"unknown mistake {mistake!r}")

    def _calls(self, calls: list[Call], raw_first: str | None = None, text: str | None = None) -> dict[str, Any]:
        if not calls:
            return self._text("Done.")
        native = []
        for place, (name, arguments) in enumerate(calls):
            encoded = raw_first if place == 0 and raw_first is not None else json.dumps(arguments)
            native.append({"id": f"call_{next(self._ids)}", "type": "function",
                           "function": {"name": name, "arguments": encoded}})  # fmt: skip
        return {"role": "assistant", "content": text, "tool_calls": native}

    @staticmethod
    def _text(text: str) -> dict[str, Any]:
        return {"role": "assistant", "content": text}

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        """The reply in the scripted server's own OpenAI envelope (`engine.mock_server`)."""
        return self._envelope.completion(body, self.reply(body))


@contextmanager
def serving(model: ImperfectModel) -> Iterator[str]:
    """The model on a loopback port, in a thread of its own; yields the OpenAI base URL."""

    async def chat(request: web.Request) -> web.Response:
        return web.json_response(model.completion(await request.json()))

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "imperfect", "object": "model"}]})

    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", 0).start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.run_until_complete(runner.cleanup())
        loop.close()
