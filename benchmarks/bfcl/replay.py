"""The ground truth as a model would say it, for a scripted server (`spadework mock-server --script bfcl`).

Played through the engine against a real HTTP server, the answers must score 100%: that checks the whole
model path (tool specs, call parsing, safe call source, turns, revealed functions, scoring) the way the
in-process `ground-truth` policy checks the loop. Ground-truth calls are Python source, some with
positional arguments (`sort('final_report.pdf')`); a model names every argument, so those are named from
the function's documented parameters, in order.
"""

from __future__ import annotations

import ast
from typing import Any

from benchmarks.bfcl.data import Entry
from engine.parsing import parse_constrained, parse_native
from toolworlds.tool import FINISH_TOOL

Call = tuple[str, dict[str, Any]]


def answer_calls(entry: Entry, turn: int) -> list[Call]:
    """The turn's ground-truth calls as (name, keyword arguments)."""
    docs = {doc["name"]: doc for doc in [*entry.functions, *(d for docs in entry.missed.values() for d in docs)]}
    calls = []
    for source in entry.ground_truth[turn]:
        node = ast.parse(source, mode="eval").body
        if not isinstance(node, ast.Call):
            raise ValueError(f"{entry.id}: ground truth {source!r} is not a call")
        name = ast.unparse(node.func)
        order = list(docs[name]["parameters"].get("properties", {}))
        arguments = {order[place]: ast.literal_eval(value) for place, value in enumerate(node.args)}
        arguments |= {keyword.arg: ast.literal_eval(keyword.value) for keyword in node.keywords if keyword.arg}
        calls.append((name, arguments))
    return calls


def where_in_dialogue(messages: list[dict[str, Any]], constrained: bool) -> tuple[int, int]:
    """(the user's turn, replies already given in it), read from the conversation: a turn ends with a reply
    that calls nothing (or calls `finish`, in constrained mode)."""
    turn = replies = 0
    for message in messages:
        if message.get("role") != "assistant":
            continue
        reply = parse_constrained(message.get("content") or "") if constrained else parse_native(message)
        ended = not reply.calls or any(call.name == FINISH_TOOL for call in reply.calls)
        turn, replies = (turn + 1, 0) if ended else (turn, replies + 1)
    return turn, replies


def scripted_calls(entry: Entry, messages: list[dict[str, Any]], constrained: bool) -> list[Call]:
    """This reply's calls ([] ends the turn): every call of the turn at once, or one per reply when constrained."""
    turn, replies = where_in_dialogue(messages, constrained)
    calls = answer_calls(entry, turn) if turn < len(entry.ground_truth) else []
    if constrained:
        return calls[replies : replies + 1]
    return calls if replies == 0 else []
