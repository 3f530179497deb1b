"""A weak model playing BFCL v4 multi-turn, scripted: the ground truth with one deterministic mistake per entry.

It serves `/v1/chat/completions` over real HTTP, and its replies depend only on the request (which entry the
first user message is, which turn and step the conversation is at), so spadework's harness and bfcl-eval's own
pipeline, pointed at the same server, are asked exactly the same questions and given exactly the same answers.
A request with `tools` is answered with `tool_calls` (bfcl-eval's FC protocol), one without in text, as
`[func(a=1)]` (its prompting protocol). Each mistake is one a weak model makes (`FC_MISTAKES`,
`PROMPT_MISTAKES`); the entry's mistake is applied at its first turn that expects calls (`held_out_early` at
turn 0). Every request is kept, by the model name it was sent for, so the two pipelines' requests can be
compared message for message.
"""

from __future__ import annotations

import json
import keyword
from collections.abc import Callable
from typing import Any

from benchmarks.bfcl.data import Entry, bfcl_modules
from benchmarks.bfcl.episode import REVEAL_MESSAGE
from benchmarks.bfcl.replay import answer_calls
from spadework.testing.mock_server import MockModel, MockSettings

Call = tuple[str, dict[str, Any]]
SHARED_MISTAKES = (
    "perfect",
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
FC_MISTAKES = (
    *SHARED_MISTAKES,
    "text_calls",  # the calls written as text in `content`, no `tool_calls`
    "empty_arguments",  # `"arguments": ""` on the first call
    "malformed_arguments",  # arguments that are not JSON
    "arguments_not_object",  # arguments that are JSON, but a list
)
PROMPT_MISTAKES = (
    *SHARED_MISTAKES,
    "fenced_python",  # the list in a ```python fence
    "fenced_plain",  # the list in a bare ``` fence
    "quoted_list",  # the list in single quotes
    "bare_calls",  # the calls without the brackets
    "json_calls",  # the calls as a JSON list of {"name", "arguments"}
    "positional_arguments",  # the first call's arguments by position
    "unclosed_list",  # the reply cut before its last parenthesis
    "class_prefix",  # the first call as Class.method(...)
    "nested_call",  # the first call's first argument is the call itself
    "empty_dict_argument",  # an extra argument `{}`
    "arithmetic_argument",  # a number written as a sum, a string as a concatenation
    "bare_identifier",  # string arguments that are identifiers written without quotes
    "unary_operator",  # a number written with a unary plus, a boolean with `not`
)
MISTAKES = {"fc": FC_MISTAKES, "prompt": PROMPT_MISTAKES}

bfcl_modules()
from bfcl_eval.constants.default_prompts import (  # noqa: E402
    DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING as PROMPTING_REVEAL,
)


def _position(entry: Entry, messages: list[dict[str, Any]]) -> tuple[int, int]:
    """(turn, step): the user's turns so far and the assistant replies since the last one began.

    A turn is a run of the entry's own user messages (as sent, or joined into one, or the reveal message):
    a harness may hand tool results back in user messages too, and those start nothing."""
    said = {REVEAL_MESSAGE} | {message["content"] for turn in entry.turns for message in turn}
    said |= {PROMPTING_REVEAL.format(functions=docs) for docs in entry.missed.values()}
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
        self.requests: dict[str, list[dict[str, Any]]] = {}  # model name -> request bodies, in arrival order
        self._envelope = MockModel(MockSettings())

    def entry_of(self, body: dict[str, Any]) -> Entry:
        first = next(message["content"] for message in body.get("messages") or [] if message.get("role") == "user")
        return self.by_question[first]

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        self.requests.setdefault(str(body.get("model")), []).append(body)
        messages = body.get("messages") or []
        entry = self.entry_of(body)
        turn, step = _position(entry, messages)
        mistake = self.plan[entry.id]
        answer = _Answer(prompting=not body.get("tools"), call_ids=f"call_{entry.id}_{turn}_{step}")
        expected = answer_calls(entry, turn) if turn < len(entry.ground_truth) else []
        target = 0 if mistake == "held_out_early" else next((t for t, g in enumerate(entry.ground_truth) if g), -1)
        if turn != target or mistake == "perfect":
            return answer.calls(expected) if step == 0 and expected else answer.text("Done.")
        return self._mistaken(answer, mistake, entry, expected, step)

    def _mistaken(self, answer: _Answer, mistake: str, entry: Entry, expected: list[Call], step: int) -> dict[str, Any]:
        if not expected and mistake != "held_out_early":
            return answer.text("Done.")
        first, rest = (expected[0], expected[1:]) if expected else (("", {}), [])
        if mistake == "step_limit_loop":
            return answer.calls([first])
        if mistake == "one_call_per_step":
            return answer.calls([expected[step]]) if step < len(expected) else answer.text("Done.")
        if mistake == "long_turn":
            if step < 12:
                return answer.calls([first])
            return answer.calls(rest) if step == 12 and rest else answer.text("Done.")
        if step > 0:
            return answer.text("Done.")
        if mistake == "drop_call":
            return answer.calls(expected[:-1]) if len(expected) > 1 else answer.text("Done.")
        if mistake == "swap_calls":
            return answer.calls(expected[::-1])
        if mistake == "extra_call":
            return answer.calls([first, *expected])
        if mistake == "changed_argument":
            return answer.calls([(first[0], _changed(first[1])), *rest])
        if mistake == "early_stop":
            return answer.text("I can't do that.")
        if mistake == "unknown_function":
            return answer.calls([("lookup_everything", {"query": "all"}), *expected])
        if mistake == "held_out_early":
            hidden = {doc["name"] for docs in entry.missed.values() for doc in docs}
            later = [call for turn in range(len(entry.ground_truth)) for call in answer_calls(entry, turn)]
            return answer.calls([*[call for call in later if call[0] in hidden][:1], *expected])
        if mistake == "text_and_calls":
            return answer.calls(expected, text="Let me take care of that.")
        if mistake == "text_calls":
            return answer.text(f"[{', '.join(_source(call) for call in expected)}]")
        if mistake in ("empty_arguments", "malformed_arguments", "arguments_not_object"):
            raw = {"empty_arguments": "", "malformed_arguments": '{"x": ', "arguments_not_object": "[1, 2]"}[mistake]
            return answer.calls(expected, raw_first=raw)
        return answer.text(_prompt_mistake(mistake, entry, expected))

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        """The reply in the scripted server's own OpenAI envelope (`spadework.testing.mock_server`)."""
        return self._envelope.completion(body, self.reply(body))


def _source(call: Call) -> str:
    name, arguments = call
    return f"{name}({', '.join(f'{key}={value!r}' for key, value in arguments.items())})"


def _prompt_mistake(mistake: str, entry: Entry, expected: list[Call]) -> str:
    """A reply in bfcl-eval's prompting syntax, written the way a weak model gets it wrong."""
    (name, arguments), rest = expected[0], [_source(call) for call in expected[1:]]
    listed, inner = ", ".join(_source(call) for call in expected), _source(expected[0])
    firsts: dict[str, str] = {
        "positional_arguments": f"{name}({', '.join(repr(value) for value in arguments.values())})",
        "class_prefix": f"{entry.involved_classes[0]}.{_source(expected[0])}",
        "nested_call": _written(name, arguments, lambda key, value, place: inner if place == 0 else None),
        "empty_dict_argument": _written(name, {**arguments, "options": {}}, lambda key, value, place: None),
        "arithmetic_argument": _written(name, arguments, _as_arithmetic),
        "bare_identifier": _written(name, arguments, lambda key, value, place: value if _bare(value) else None),
        "unary_operator": _written(name, arguments, _with_unary),
    }
    if mistake in firsts:
        return f"[{', '.join([firsts[mistake], *rest])}]"
    wrapped = {
        "fenced_python": f"```python\n[{listed}]\n```",
        "fenced_plain": f"```\n[{listed}]\n```",
        "quoted_list": f"'[{listed}]'",
        "bare_calls": listed,
        "json_calls": json.dumps([{"name": name, "arguments": arguments} for name, arguments in expected]),
        "unclosed_list": f"[{listed}]"[:-2],
    }
    if mistake in wrapped:
        return wrapped[mistake]
    raise ValueError(f"unknown mistake {mistake!r}")


def _written(name: str, arguments: dict[str, Any], spell: Callable[[str, Any, int], str | None]) -> str:
    """`name(k=v, ...)` with each argument written as `spell` says (None: as its `repr`)."""
    parts = []
    for place, (key, value) in enumerate(arguments.items()):
        spelled = spell(key, value, place)
        parts.append(f"{key}={value!r}" if spelled is None else f"{key}={spelled}")
    return f"{name}({', '.join(parts)})"


def _as_arithmetic(key: str, value: Any, place: int) -> str | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value - 1!r}+1"
    if isinstance(value, str) and len(value) > 1:
        return f"{value[:1]!r}+{value[1:]!r}"
    return None


def _with_unary(key: str, value: Any, place: int) -> str | None:
    if isinstance(value, bool):
        return f"not {not value!r}"
    if isinstance(value, int | float):
        return f"+{value!r}"
    return None


def _bare(value: Any) -> bool:
    return isinstance(value, str) and value.isidentifier() and not keyword.iskeyword(value)


class _Answer:
    """A reply in the protocol the request asked for: `tool_calls` (FC), or `[func(a=1)]` text (prompting)."""

    def __init__(self, prompting: bool, call_ids: str) -> None:
        self.prompting, self.call_ids = prompting, call_ids  # ids from the position: both pipelines see the same

    def calls(self, calls: list[Call], raw_first: str | None = None, text: str | None = None) -> dict[str, Any]:
        if not calls:
            return self.text("Done.")
        if self.prompting:
            listed = f"[{', '.join(_source(call) for call in calls)}]"
            return self.text(listed if text is None else f"{text} {listed}")
        native = []
        for place, (name, arguments) in enumerate(calls):
            encoded = raw_first if place == 0 and raw_first is not None else json.dumps(arguments)
            native.append({"id": f"{self.call_ids}_{place}", "type": "function",
                           "function": {"name": name, "arguments": encoded}})  # fmt: skip
        return {"role": "assistant", "content": text, "tool_calls": native}

    @staticmethod
    def text(text: str) -> dict[str, Any]:
        return {"role": "assistant", "content": text}
