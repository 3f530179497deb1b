"""GBNF read as llama.cpp reads it (`engine.gbnf.to_lark`), held to llama.cpp itself.

The differential tests draw grammars at random (every escape form, characters special in GBNF, Lark and
regex classes written raw and escaped, ranges, `-` and `^` anywhere in a class, `.`, every repetition,
comments, line breaks, recursion, and structures where a lexer that ends lexemes late reads otherwise),
some of them broken on purpose. llama.cpp's grammar sampler (`tests.llama_grammar`) must refuse exactly
the ones `to_lark` refuses, and walks through the others must find the trainer's admitted sets equal to
llama.cpp's at every position, over the embedded model's whole vocabulary.
"""

from __future__ import annotations

import random
import re
import string
from collections import Counter

import pytest

from engine.gbnf import (
    INCONSISTENT,
    Chars,
    GrammarUnreadable,
    Text,
    code_point,
    for_llama_cpp,
    literal,
    read_gbnf,
    to_lark,
)
from engine.local_models import default_gguf
from tests.grammar_walk import admits
from tests.llama_grammar import Agreement, LlamaCppGrammar


@pytest.fixture(scope="module")
def llama() -> LlamaCppGrammar:
    return LlamaCppGrammar(default_gguf())


@pytest.fixture(scope="module")
def agreement(llama: LlamaCppGrammar) -> Agreement:
    from transformers import AutoTokenizer

    from engine.hf_checkpoint import float_checkpoint

    return Agreement(llama, AutoTokenizer.from_pretrained(str(float_checkpoint(default_gguf()))))


@pytest.mark.parametrize(
    ("grammar", "text", "admitted"),
    [
        (r'root ::= "\u00b2"', "²", True),  # llguidance's own converter wrote `\ub2` here
        (r'root ::= [^"\u00b2]', "²", False),
        (r'root ::= [^"\u00b2]', "³", True),
        (r'root ::= "\U0001F600"', "😀", True),
        (r'root ::= "\x41\t\\\"\[\]"', 'A\t\\"[]', True),
        (r'root ::= [/]', "/", True),
        (r'root ::= [a-]', "-", True),  # a `-` before `]` is itself
        (r'root ::= [-a]', "-", True),
        (r'root ::= [\]]', "]", True),
        (r'root ::= [a^]', "^", True),
        (r'root ::= [--/&&~~]', ".", True),  # set operations in Rust regex classes, a range (- to /) in GBNF
        (r'root ::= "a.b*"', "a.b*", True),
        (r'root ::= .', "\n", True),  # `.` is any character, a line break too
        (r'root ::= [ab]{0,3} "b"', "ab", True),  # lexemes ended late would refuse this
        (r'root ::= "a" "bc" | "ab" "d"', "abc", True),
        (r'root ::= "x" "y"{0,0}', "x", True),  # llguidance refuses `{0,0}`
        ('root ::= ( "a"\n  | "b" ) # note\n', "b", True),
        ('root ::= "a" | # a comment ends a line\n  "b"', "b", True),
        ("root ::= x-y\nx-y ::= [0-9]+", "42", True),
        ("root ::= x\nx ::= \"a\" x | \"b\"", "aab", True),  # recursion: rules and one-character lexemes
        ('root ::= "a"\nroot ::= "b"', "b", True),  # a later rule replaces an earlier one, as in llama.cpp
    ],
)  # fmt: skip
def test_texts_are_read_as_llama_cpp_reads_them(bytes_matcher: object, grammar: str, text: str, admitted: bool) -> None:
    assert admits(bytes_matcher, grammar, text) is admitted


@pytest.mark.parametrize(
    ("grammar", "problem"),
    [
        (r'root ::= "\q"', "unknown escape \\q at line 1"),
        (r'root ::= "\u00b"', "expecting 4 hex digits after \\u"),
        ('root ::= "abc', "a literal is not closed"),
        ("root ::= [abc", "a character class is not closed"),
        ("root ::= ab_c", "expecting a line break or the end"),  # `_` is no name character in llama.cpp
        ("root ::= x", "the rule 'x' is used but never defined"),
        ('x ::= "a"', "no rule named 'root'"),
        ('root ::= * "a"', "expecting an item before the repetition"),
        ('root ::= "" *', "expecting an item before the repetition"),
        ('root ::= ("a"', "expecting ')'"),
        ('root ::= "a"{2', "expecting '}'"),
        ('root ::= "a"{3,1}', "at most 1 is fewer than at least 3"),  # llama.cpp runs out of memory on it
        ("root ::= <[12]>", "token references"),
        ("root ::= [z-a]", "a range whose end comes before its start"),
        ("root ::= [z-ab]", "a range whose end comes before its start"),
        (r'root ::= "\UFFFFFFFF"', "no character matches"),
        (r"root ::= [^\x00-\U0010FFFF]", "no character matches"),
        ('root := "a"', "expecting ::="),
    ],
)
def test_a_grammar_llama_cpp_refuses_is_refused_with_where(grammar: str, problem: str) -> None:
    with pytest.raises(GrammarUnreadable, match=re.escape(problem)):
        to_lark(grammar)


def test_episode_settings_keep_a_grammar_as_the_engine_sends_it_and_refuse_a_broken_one() -> None:
    from pydantic import ValidationError

    from engine.settings import EpisodeSettings

    settings = EpisodeSettings(mode="tokens", tokenizer="bytes", grammar='root ::= [^"\\U0001F600]+')
    assert settings.grammar == "root ::= [\\x00-\\x21\\x23-\\ud7ff\\ue000-\\U0001f5ff\\U0001f601-\\U0010ffff]{1,}"
    with pytest.raises(ValidationError, match=r"grammar\n  Value error, unknown escape \\q at line 1"):
        EpisodeSettings(mode="tokens", tokenizer="bytes", grammar='root ::= "\\q"')


def test_a_nul_ends_the_grammar_as_it_does_in_llama_cpp() -> None:
    assert read_gbnf('root ::= "a"\x00 garbage') == read_gbnf('root ::= "a"')


def test_written_literals_and_code_points_read_back_as_the_same_characters() -> None:
    rng = random.Random(5)
    for _ in range(300):
        points = [rng.choice([rng.randint(0, 0x7F), rng.randint(0x80, 0xD7FF), rng.randint(0x10000, 0x10FFFF)])
                  for _ in range(rng.randint(0, 6))]  # fmt: skip
        text = "".join(map(chr, points))
        assert read_gbnf(f"root ::= {literal(text)}")["root"] == ((Text(tuple(points)),),), text
        for c in text:
            assert read_gbnf(f"root ::= [^{code_point(c)}]")["root"] == ((Chars(((ord(c), ord(c)),), True),),)


# -- differential: random grammars against llama.cpp ------------------------------------------------------

SPECIAL = "\"\\[]^-/.*+?(){}|$&~#<>:=@!%,;' \t\n"


def _pick(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.35:
        return rng.choice(string.ascii_letters + string.digits)
    if kind < 0.6:
        return rng.choice(SPECIAL)
    plane = rng.choice([0, 0, 1, 2, 14, 16])
    point = rng.randint(0x80 if plane == 0 else plane << 16, (plane << 16) | 0xFFFF)
    return chr(point if not 0xD800 <= point <= 0xDFFF else 0xFFFD)


def _written(rng: random.Random, c: str, inside: str) -> str:
    """`c` in a literal (`inside` '"') or a class (']'), in a random form, now and then one llama.cpp refuses."""
    form = rng.random()
    if form < 0.5 and c not in inside + "\\" and c != "\n":
        return c
    if form < 0.6 and c in '\t\n\r\\"[]':
        return {"\t": "\\t", "\n": "\\n", "\r": "\\r"}.get(c, "\\" + c)
    if form < 0.7 and ord(c) < 0x100:
        return f"\\x{ord(c):02X}"
    if form < 0.85 and ord(c) < 0x10000:
        return f"\\u{ord(c):04x}"
    if form < 0.995:
        return f"\\U{ord(c):08x}"
    return rng.choice(["\\q", "\\x4", "\\u12", "\\"])  # refused


def _item(rng: random.Random, rules: list[str], depth: int) -> str:
    kind = rng.random()
    if kind < 0.35:
        item = '"' + "".join(_written(rng, _pick(rng), '"') for _ in range(rng.choice([0, *[1, 2, 3, 4] * 3]))) + '"'
    elif kind < 0.65:
        negated = "^" if rng.random() < 0.4 else ""
        parts = []
        for _ in range(rng.randint(1, 4)):
            if rng.random() < 0.3:  # a range, now and then reversed
                low, high = sorted((_pick(rng), _pick(rng)), reverse=rng.random() < 0.05)
                parts.append(_written(rng, low, "]") + "-" + _written(rng, high, "]"))
            else:
                parts.append(_written(rng, _pick(rng), "]"))
        item = f"[{negated}{''.join(parts)}]"
    elif kind < 0.72:
        item = "."
    elif kind < 0.82 and rules:
        item = rng.choice(rules)
    elif depth < 2:
        item = "(" + _alternatives(rng, rules, depth + 1, nested=True) + ")"
    else:
        item = '"z"'
    if rng.random() < (0.7 if item.startswith("(") else 0.5):
        return item
    return item + rng.choice(["*", "+", "?", "{2}", "{0}", "{1,3}", "{0,2}", "{2,}", "{0,0}", " {1, 2}"])


def _alternatives(rng: random.Random, rules: list[str], depth: int, nested: bool) -> str:
    sequences = []
    for _ in range(rng.randint(1, 3)):
        items = [_item(rng, rules, depth) for _ in range(0 if rng.random() < 0.1 else rng.randint(1, 3))]
        sequences.append(" ".join(items))
    glue = rng.choice([" | ", "|", " |\n  ", " | # why\n  "]) if nested else rng.choice([" | ", " |\n  "])
    return glue.join(sequences)


def random_grammar(rng: random.Random) -> str:
    names = [f"r-{i}" for i in range(rng.randint(0, 3))]
    lines = []
    for index, name in enumerate(names):
        later = names[index + 1 :]
        if rng.random() < 0.25:  # right recursion
            lines.append(f'{name} ::= {_item(rng, later, 1)} ("," {name})?')
        else:
            lines.append(f"{name} ::= {_alternatives(rng, later, 0, nested=False)}")
    lines.insert(0, f"root ::= {_alternatives(rng, names, 0, nested=False)}")
    grammar = "\n".join(lines) + rng.choice(["", "\n", "\n# the end\n"])
    if rng.random() < 0.1:  # broken on purpose
        at = rng.randrange(len(grammar))
        grammar = grammar[:at] + rng.choice(['"', "[", "(", ")", "\\", "{", "::="]) + grammar[at:]
    return grammar


def compare_random_grammars(agreement: Agreement, llama: LlamaCppGrammar, count: int, seed: int) -> Counter[str]:
    """Draw `count` grammars: each is read by both or refused by both, except one llama.cpp reads
    inconsistently (an element no character matches, a reversed range), which only `to_lark` refuses. Each one
    read is walked as written (where llama.cpp may refuse a token ending inside a character that a negated
    class could still admit) and as the engine sends it (`for_llama_cpp`: nothing may differ), and
    `for_llama_cpp` writes it the same way twice."""
    rng = random.Random(seed)
    seen: Counter[str] = Counter()
    for _ in range(count):
        grammar = random_grammar(rng)
        problem = llama.problem(grammar)
        try:
            to_lark(grammar)
            ours = None
        except GrammarUnreadable as error:
            ours = str(error)
        if problem is None and ours is not None and INCONSISTENT in ours:
            seen["refused here only: llama.cpp reads it inconsistently"] += 1
            continue
        assert (problem is None) == (ours is None), (grammar, problem, ours)
        if problem is not None:
            seen["refused by both"] += 1
            continue
        seen["read by both"] += 1
        sent = for_llama_cpp(grammar)
        assert llama.problem(sent) is None and for_llama_cpp(sent) == sent, (grammar, sent)
        agreement.walk(grammar, rng, longest=24, partial_refusals=True)
        before = agreement.tally.partial
        agreement.walk(sent, rng, longest=24)
        assert agreement.tally.partial == before
    return seen


def test_random_grammars_are_read_and_refused_as_llama_cpp_does(agreement: Agreement, llama: LlamaCppGrammar) -> None:
    seen = compare_random_grammars(agreement, llama, count=80, seed=34)
    tally = agreement.tally
    print(dict(seen), tally.line())
    assert not tally.disagreements, tally.disagreements[:5]
    assert not tally.unreadable, tally.unreadable[:5]
    assert seen["read by both"] >= 30 and seen["refused by both"] >= 20 and tally.positions >= 200


@pytest.mark.slow
def test_many_random_grammars_are_read_as_llama_cpp_does(agreement: Agreement, llama: LlamaCppGrammar) -> None:
    seen = compare_random_grammars(agreement, llama, count=1000, seed=340)
    tally = agreement.tally
    print(dict(seen), tally.line())
    assert not tally.disagreements, tally.disagreements[:5]
