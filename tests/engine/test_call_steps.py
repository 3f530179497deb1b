"""`call_steps` splits the call grammar into appended text and sampled choices, and builds the same language.

Soundness: replies built by choosing at random inside each span's own grammar (walked byte by byte with
llguidance, the engine the trainer scores with) are all admitted by the whole-reply `call_grammar` and parse
as calls that satisfy their tool's schema (types, enums, required fields and string lengths: what the grammar
enforces; numeric bounds are the world's to refuse). Completeness: given calls of the reference worlds' tools, choosing
in each span what the call says rebuilds each call's text exactly.
"""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest

from engine.call_grammar import Glue, Span, call_grammar, call_steps
from engine.episode import FINISH_FUNCTION
from engine.parsing import parse_constrained
from engine.templates import byte_tokenizer
from toolworlds.registry import load_world

EXTRA = {"type": "function", "function": {"name": "set_status", "parameters": {"type": "object", "properties": {
    "ticket_id": {"type": "string", "maxLength": 6}, "status": {"enum": ["open", "on_hold", "closed"]},
    "priority": {"type": "integer"}, "notify": {"type": "boolean"},
    "tags": {"type": "array", "items": {"type": "string"}}, "note": {"type": "string"}},
    "required": ["ticket_id", "status"]}}}  # fmt: skip
KEPT = {"type", "enum", "const", "required", "maxLength", "minLength", "additionalProperties"}  # the grammar's share


def tools_of(world: str) -> list[dict[str, Any]]:
    return [*load_world(world).openai_tools(), FINISH_FUNCTION]


@pytest.fixture(scope="module")
def bytes_matcher() -> Any:
    """A function from a GBNF grammar to a fresh llguidance matcher over byte tokens."""
    import llguidance.hf
    from llguidance import LLMatcher
    from llguidance.gbnf_to_lark import any_to_lark

    lltokenizer = llguidance.hf.from_tokenizer(byte_tokenizer())

    def matcher(grammar: str) -> tuple[Any, Any]:
        compiled = LLMatcher.grammar_from_lark('%llguidance {"no_forcing": true}\n' + any_to_lark(grammar))
        return LLMatcher(lltokenizer, compiled), lltokenizer

    return matcher


def admits(bytes_matcher: Any, grammar: str, text: str) -> bool:
    """Whether `grammar` admits exactly `text`."""
    matcher, lltokenizer = bytes_matcher(grammar)
    for byte in text.encode():
        (token,) = lltokenizer.tokenize_bytes(bytes([byte]))
        if not matcher.consume_token(token):
            return False
    return bool(matcher.is_accepting())


def random_choice(bytes_matcher: Any, grammar: str, rng: random.Random) -> str:
    """A random text the span's grammar admits, chosen byte by byte among what it admits next."""
    matcher, lltokenizer = bytes_matcher(grammar)
    chosen = b""
    while True:
        if matcher.is_accepting() and (rng.random() < 0.3 or matcher.is_stopped()):
            return chosen.decode()
        mask = matcher.compute_bitmask()
        options = [b for b in range(32, 127) if _admitted(mask, lltokenizer.tokenize_bytes(bytes([b]))[0])]
        assert options, f"the span {grammar!r} admits nothing after {chosen!r} but is not complete"
        byte = rng.choice(options)
        matcher.consume_token(lltokenizer.tokenize_bytes(bytes([byte]))[0])
        chosen += bytes([byte])


def _admitted(mask: bytes, token: int) -> bool:
    return bool(mask[token // 8] >> (token % 8) & 1)


def build(tools: list[dict[str, Any]], choose: Any) -> tuple[str, str, list[str]]:
    """Drive `call_steps`: (the text it returns, the text appended and sampled in order, the span grammars)."""
    steps, sent, pieces, spans = call_steps(tools), None, [], []
    try:
        while True:
            step = steps.send(sent)
            if isinstance(step, Glue):
                pieces.append(step.text)
                sent = None
            else:
                assert isinstance(step, Span)
                spans.append(step.grammar)
                sent = choose(step.grammar, "".join(pieces))
                pieces.append(sent)
    except StopIteration as done:
        return done.value, "".join(pieces), spans


@pytest.mark.parametrize("world", ["banking", "orders", "ticketing", "extra"])
def test_every_reply_built_from_spans_is_a_call_the_whole_grammar_admits(bytes_matcher: Any, world: str) -> None:
    tools = [EXTRA, FINISH_FUNCTION] if world == "extra" else tools_of(world)
    schemas = {tool["function"]["name"]: tool["function"]["parameters"] for tool in tools}
    whole = call_grammar(tools)
    rng = random.Random(world)
    names = set()
    for _ in range(60):
        returned, text, spans = build(tools, lambda grammar, _: random_choice(bytes_matcher, grammar, rng))
        assert returned == text
        assert admits(bytes_matcher, whole, text), text
        reply = parse_constrained(text)
        assert not reply.problems and len(reply.calls) == 1, text
        validator = jsonschema.Draft202012Validator(schemas[reply.calls[0].name])
        broken = [error.message for error in validator.iter_errors(reply.calls[0].arguments) if error.validator in KEPT]
        assert not broken, (text, broken)
        assert all('"name"' not in span and '"arguments"' not in span for span in spans)
        names.add(reply.calls[0].name)
    assert len(names) > 1  # the walk reached more than one tool


@pytest.mark.parametrize("world", ["banking", "orders", "ticketing"])
def test_choosing_what_a_call_says_rebuilds_it(bytes_matcher: Any, world: str) -> None:
    env = load_world(world)()
    tools = tools_of(world)
    order = {tool["function"]["name"]: list(tool["function"]["parameters"]["properties"]) for tool in tools}
    calls = []
    for seed in range(5):
        env.reset(seed)
        for step in env.solution():
            if hasattr(step, "arguments"):  # in the declared order, the only one the grammar admits
                arguments = {key: step.arguments[key] for key in order[step.name] if key in step.arguments}
                calls.append(json.dumps({"name": step.name, "arguments": arguments}, ensure_ascii=False))
    calls += ['{"name": "finish", "arguments": {}}', '{"name": "finish", "arguments": {"answer": "4 items"}}']
    for call in calls:

        def longest(grammar: str, before: str, target: str = call) -> str:
            """The longest text the span admits that the call goes on with (the next glue must follow it)."""
            rest = target[len(before) :].encode()
            matcher, lltokenizer = bytes_matcher(grammar)
            end = 0
            for index, byte in enumerate(rest):
                if not matcher.consume_token(lltokenizer.tokenize_bytes(bytes([byte]))[0]):
                    break
                end = index + 1 if matcher.is_accepting() else end
            return rest[:end].decode()

        assert build(tools, longest)[1] == call


def test_a_single_tool_leaves_nothing_to_choose_but_its_values() -> None:
    tool = {"type": "function", "function": {"name": "get", "parameters": {
        "type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}}  # fmt: skip
    steps = call_steps([tool])
    assert next(steps) == Glue('{"name": "get", "arguments": ')
    assert steps.send(None) == Glue("{")
    assert steps.send(None) == Glue('"id": ')
    assert steps.send(None) == Glue('"')
    span = steps.send(None)
    assert isinstance(span, Span) and span.grammar.startswith("root ::= [^")
    assert steps.send('A-1"') == Glue("}")
    assert steps.send(None) == Glue("}")
    with pytest.raises(StopIteration) as done:
        steps.send(None)
    assert done.value.value == '{"name": "get", "arguments": {"id": "A-1"}}'
