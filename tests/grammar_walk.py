"""Walking a GBNF grammar byte by byte with llguidance (the engine the trainer scores with): whether a text is
admitted, and random texts that are. Tests of the grammars the engine and the designer sample under use it."""

from __future__ import annotations

import random
from typing import Any

import pytest

from engine.gbnf import to_lark
from engine.templates import byte_tokenizer


@pytest.fixture(scope="module")
def bytes_matcher() -> Any:
    """A function from a GBNF grammar to a fresh llguidance matcher over byte tokens, and a byte's token."""
    import llguidance.hf
    from llguidance import LLMatcher

    lltokenizer = llguidance.hf.from_tokenizer(byte_tokenizer())
    tokens = {byte: lltokenizer.tokenize_bytes(bytes([byte]))[0] for byte in range(256)}

    def matcher(grammar: str) -> tuple[Any, dict[int, int]]:
        compiled = LLMatcher.grammar_from_lark(to_lark(grammar))
        return LLMatcher(lltokenizer, compiled), tokens

    return matcher


def admits(bytes_matcher: Any, grammar: str, text: str) -> bool:
    matcher, tokens = bytes_matcher(grammar)
    return all(matcher.consume_token(tokens[byte]) for byte in text.encode()) and bool(matcher.is_accepting())


def random_reply(bytes_matcher: Any, grammar: str, rng: random.Random, close: float = 0.0) -> str:
    """A random text the grammar admits, chosen byte by byte among the printable bytes it admits next (a
    closing quote, where admitted, with probability `close` first: long grammars need strings to end)."""
    matcher, tokens = bytes_matcher(grammar)
    chosen = b""
    while not (matcher.is_accepting() and (matcher.is_stopped() or rng.random() < 0.3)):
        mask = matcher.compute_bitmask()
        options = [b for b in range(32, 127) if mask[tokens[b] // 8] >> (tokens[b] % 8) & 1]
        assert options, f"the grammar admits nothing after {chosen!r} but is not complete"
        byte = ord('"') if ord('"') in options and rng.random() < close else rng.choice(options)
        matcher.consume_token(tokens[byte])
        chosen += bytes([byte])
    return chosen.decode()
