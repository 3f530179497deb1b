"""The trainer reads every grammar spadework samples under exactly as llama.cpp reads it, whatever the text.

A property test of the grammars themselves, against the sampler that uses them: llama.cpp's grammar sampler,
called in the engine's own build (`tests.llama_grammar`), on the embedded model's vocabulary. Texts are
drawn from the whole of Unicode (every plane, characters special in GBNF, Lark and regex classes), from
the grounding corpus the designer reads and from the names, places and currencies of the corpora to come.
They become what the grammars are built from: the used names, keys and texts each designer stage must
avoid or repeat, a whole staged spec, and tools whose enums, constants and property names the agent's call
grammar spells out. Each grammar is walked token by token among what llama.cpp admits, along a text (a
used one, a near miss, the stage's own text) in random tokenisations, byte tokens that split a character
included, then at random; at every position the trainer's admitted set over the whole vocabulary must be
llama.cpp's. The one difference allowed is llama.cpp's lenient UTF-8 decoder: after a token that ends
inside a character, it also admits some bytes that cannot continue it as UTF-8 (an overlong form, a
surrogate, a code point past U+10FFFF); those are counted, and a reply that samples one is left out of
training (`test_a_row_the_trainer_cannot_read_costs_that_row_not_the_update`, in `test_constrained`).

Run with `-s` for the tally; `just test-slow` runs a walk about ten times as long.
"""

from __future__ import annotations

import json
import random
import string
from typing import Any

import pytest

from engine.call_grammar import call_grammar
from engine.gbnf import GrammarRules
from engine.local_models import default_gguf
from tests.llama_grammar import Agreement, LlamaCppGrammar
from trainers.corpus import PythonDocsSource
from trainers.designer.budget import SPEC_BUDGET
from trainers.designer.stages import FIRST, TEXT, SpecStages, key_except, name_except, text_except
from trainers.designer.vocabulary import Vocabulary

# The corpora to come: places, people, currencies, scripts (issue 34).
WORLD_TEXTS = ["São Paulo", "José Núñez", "Zürich", "€12,50", "東京都", "Łódź", "Ελλάδα", "Привет, мир", "😀🎉",
               "naïve café", "Straße", "الرياض", "עברית", "मुंबई", "ﬁne", "x²+y³", "Ω≈√∞", "🇧🇷", "é", "a\u2028b",
               "\ufeffBOM", "𝔘𝔫𝔦", "₹100", "¥", "Ærøskøbing", "İstanbul", "ǅ", "\U000e0041tag"]  # fmt: skip
SPECIAL = "\"\\[]^-/.*+?(){}|$&~#<>:=@!%,;'`"  # in GBNF, Lark or regex syntax
PLANES = [0, 0, 0, 1, 1, 2, 3, 14, 15, 16]


@pytest.fixture(scope="module")
def agreement() -> Agreement:
    from transformers import AutoTokenizer

    from engine.hf_checkpoint import float_checkpoint

    gguf = default_gguf()
    tokenizer = AutoTokenizer.from_pretrained(str(float_checkpoint(gguf)))  # the trainer's tokenizer
    return Agreement(LlamaCppGrammar(gguf), tokenizer)


@pytest.fixture(scope="module")
def corpus_texts() -> list[str]:
    """Spans of the built-in grounding corpus, half of them around its non-ASCII characters."""
    rng = random.Random(34)
    documents = PythonDocsSource().documents
    spans = []
    for document in rng.sample(documents, 40):
        text = document.text
        wide = [i for i, c in enumerate(text) if ord(c) > 0x7F]
        at = rng.choice(wide) - rng.randrange(8) if wide and rng.random() < 0.5 else rng.randrange(len(text))
        spans.append(text[max(0, at) : max(0, at) + rng.randint(3, 30)])
    return spans


def draw(rng: random.Random, longest: int, sources: list[str], writable: bool = True) -> str:
    """A text of 1..`longest` characters: from `sources`, or drawn character by character from every plane
    and the special characters. `writable`: only what a model writes inside a JSON string under the
    grammars (no quote, backslash or control character; a visible first character; no surrounding space)."""
    if sources and rng.random() < 0.4:
        text = rng.choice(sources)
    else:
        chars = []
        for _ in range(rng.randint(1, longest)):
            kind = rng.random()
            if kind < 0.3:
                chars.append(rng.choice(string.printable))
            elif kind < 0.5:
                chars.append(rng.choice(SPECIAL))
            else:
                plane = rng.choice(PLANES)
                point = rng.randint(0x80 if plane == 0 else plane << 16, (plane << 16) | 0xFFFF)
                chars.append(chr(point if not 0xD800 <= point <= 0xDFFF else 0xE000))
        text = "".join(chars)
    if writable:
        text = "".join(c if c not in '"\\' and ord(c) >= 0x20 and c != "\x7f" else "·" for c in text).strip()
        text = text if text and not text[0].isspace() else "·" + text
    return text[:longest]


def near_misses(used: set[str], rng: random.Random) -> list[str]:
    """Texts that share a used text's start: the walk goes down the grammar's trie of used texts."""
    texts = sorted(used)
    out = []
    for text in rng.sample(texts, min(3, len(texts))):
        cut = rng.randrange(len(text) + 1)
        out += [text, text[:cut], text[:cut] + draw(rng, 3, [])]
    return out


def test_texts_other_than_the_used_ones_are_read_alike(agreement: Agreement, corpus_texts: list[str]) -> None:
    """`text_except`, `key_except` and `name_except`: used texts from all of Unicode, walked along and off."""
    rng = random.Random(1)
    sources = corpus_texts + WORLD_TEXTS
    for _ in range(3):
        used = {draw(rng, 12, sources) for _ in range(rng.randint(1, 6))}
        rules = GrammarRules()
        grammars = [
            rules.grammar(text_except(used, FIRST, TEXT, 16, rules)),
            (r := GrammarRules()).grammar(key_except(used, r, SPEC_BUDGET.value)),
            (r := GrammarRules()).grammar(name_except(used | {"tbl", "tbl_2", "a1"}, r, 8)),
        ]
        for grammar in grammars:
            for target in near_misses(used, rng):
                agreement.walk(grammar, rng, '"' + target + '"')
    # A used text at the longest length: its last character is excluded and has no branch of its own, so a
    # token ending inside a character like it must be checked against the class alone.
    rules = GrammarRules()
    grammar = rules.grammar(text_except({"ab😀", "x𝔘é", "q€"}, FIRST, TEXT, 3, rules))
    for target in ("ab😁", "ab😀", "x𝔘ê", "x𝔙", "q₭"):
        agreement.walk(grammar, rng, '"' + target + '"')
    tally = agreement.tally
    print(tally.line())
    assert not tally.disagreements, tally.disagreements[:5]
    assert tally.positions > 400


def unicode_spec(rng: random.Random, sources: list[str], copyable: bool = False) -> list[str]:
    """A sound staged spec (a small library) in its stages, every key, value and text drawn from Unicode
    (`copyable`: each record value a cell a document's table can hold, no '|', not opening on punctuation)."""

    def text(longest: int) -> str:
        return draw(rng, longest, sources)

    def j(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    keys: list[str] = []
    while len(keys) < 4:
        key = text(SPEC_BUDGET.value).replace("/", "·")
        key = key if key[0] not in string.punctuation else "K" + key[: SPEC_BUDGET.value - 1]  # names start so
        if key not in keys:
            keys.append(key)
    titles = [text(SPEC_BUDGET.value) for _ in range(4)]
    # A searched title opens on a letter or digit, as the search grammar holds it.
    titles = [t if t[0] not in string.punctuation + " " else "T" + t[: SPEC_BUDGET.value - 1] for t in titles]
    if copyable:
        keys, titles = ([name.replace("|", "¦") for name in names] for names in (keys, titles))

    def free(longest: int) -> str:  # text beside the quoted values, and a hint's: no single quote
        return text(longest).replace("'", "’")

    third = SPEC_BUDGET.text // 3  # the instruction names what the plan types, in quotes, in its order
    instruction = f"Please borrow the book{free(third)} '{titles[1]}'{free(third)} '{keys[1]}'{free(third)}"
    hint = "Use borrow" + free(SPEC_BUDGET.text)
    return [
        f'{{"spec_version": 1, "name": "library", "description": {j(text(SPEC_BUDGET.text))}, "tables": '
        '[{"name": "books", "fields": {"book_id": {"type": "string"}, ',
        '"title": {"type": "string"}, ',
        '"on_loan": {"type": "boolean", "default": false}}',
        f', "key": "book_id", "records": [{{"book_id": {j(keys[0])}, "title": {j(titles[0])}}}, ',
        f'{{"book_id": {j(keys[1])}, "title": {j(titles[1])}}}, ',
        f'{{"book_id": {j(keys[2])}, "title": {j(titles[2])}, "on_loan": true}}]}}, ',
        '{"name": "members", "fields": {"member_id": {"type": "string"}, ',
        '"name": {"type": "string"}}',
        f', "key": "member_id", "records": [{{"member_id": {j(keys[3])}, "name": {j(titles[3])}}}]}}]',
        f', "tools": [{{"kind": "search", "name": "search", "description": {j(text(SPEC_BUDGET.text))}, '
        '"table": "books", "field": "title"}, ',
        f'{{"kind": "update", "name": "borrow", "description": {j(text(SPEC_BUDGET.text))}, "table": "books", '
        '"field": "on_loan", "value": true, "transitions": [{"from": false, "to": true}]}]',
        f', "task": {{"plan": [{{"tool": "search", "arguments": {{"title": {j(titles[1])}}}}}, ',
        f'{{"tool": "borrow", "arguments": {{"book_id": {j(keys[1])}}}}}]',
        f', "instruction": {j(instruction)}',
        f', "hint": {j(hint)}, "untouched": [{j("books/" + keys[2])}]}}}}',
    ]


def walk_spec(
    agreement: Agreement, rng: random.Random, sources: list[str], parts: list[str] | None = None,
    vocabulary: Vocabulary | None = None,
) -> None:  # fmt: skip
    stages = SpecStages(vocabulary=vocabulary)
    for part in parts or unicode_spec(rng, sources):
        grammar = stages.grammar()
        assert grammar is not None, part
        written = agreement.walk(grammar, rng, part, longest=400)
        assert written == part.encode(), f"the stage's grammar stopped the walk at {written!r} of {part!r}"
        stages.wrote(part)
    assert stages.grammar() is None


def test_every_designer_stage_is_read_alike_for_a_spec_in_any_script(
    agreement: Agreement, corpus_texts: list[str]
) -> None:
    """A whole staged spec, stage by stage, each stage's grammar built from the Unicode written before it."""
    rng = random.Random(2)
    before = agreement.tally.positions
    walk_spec(agreement, rng, corpus_texts + WORLD_TEXTS)
    tally = agreement.tally
    print(tally.line())
    assert not tally.disagreements, tally.disagreements[:5]
    assert tally.positions - before > 300


def test_designer_stages_that_copy_from_a_document_are_read_alike(
    agreement: Agreement, corpus_texts: list[str]
) -> None:
    """The staged spec again, its names and values now copied from a document in any script that holds them
    (`designer.vocabulary=document`): the names and values are walks down a trie of the document's."""
    rng = random.Random(4)
    for _ in range(20):  # a draw the vocabulary cannot hold (a key drawn twice once '|' is replaced) is drawn again
        parts = unicode_spec(rng, corpus_texts + WORLD_TEXTS, copyable=True)
        tables = json.loads("".join(parts))["tables"]
        document = "Books and members.\n" + "\n\n".join(
            "\n".join([" | ".join(table["fields"])] + [" | ".join(str(record.get(field, "")) for field in
                       table["fields"]) for record in table["records"]])
            for table in tables
        )  # fmt: skip
        vocabulary = Vocabulary.of(document)
        held = [value in (vocabulary.keys(name) if name == table["key"] else vocabulary.values(name, "string"))
                for table in tables for record in table["records"] for name, value in record.items()
                if isinstance(value, str)]  # fmt: skip
        if all(held):
            break
    else:
        pytest.fail("no draw of values that a vocabulary holds")
    before = agreement.tally.positions
    walk_spec(agreement, rng, [], parts, vocabulary)
    tally = agreement.tally
    assert not tally.disagreements, tally.disagreements[:5]
    assert tally.positions - before > 200


def unicode_tools(rng: random.Random, sources: list[str]) -> tuple[list[dict[str, Any]], str]:
    """Tools whose enum values, constants and property names are drawn from Unicode (quotes, backslashes and
    control characters included: JSON escapes them), and the text of a call of the first."""
    names: list[str] = []
    while len(names) < 3:
        name = draw(rng, 10, sources, writable=False)
        if name not in names:
            names.append(name)
    choices = list(dict.fromkeys(draw(rng, 10, sources, writable=False) for _ in range(4)))
    constant = draw(rng, 10, sources, writable=False)
    properties = {names[0]: {"type": "string", "enum": choices}, names[1]: {"const": constant},
                  names[2]: {"type": "string"}, "n": {"type": "integer"}}  # fmt: skip
    tools = [
        {"type": "function", "function": {"name": "pay", "parameters": {
            "type": "object", "properties": properties, "required": [names[0]]}}},
        {"type": "function", "function": {"name": "finish", "parameters": {"type": "object", "properties": {}}}},
    ]  # fmt: skip
    arguments = {names[0]: rng.choice(choices), names[1]: constant, names[2]: draw(rng, 40, sources)}
    call = '{"name": "pay", "arguments": ' + json.dumps(arguments, ensure_ascii=False, separators=(", ", ": ")) + "}"
    return tools, call


def test_the_call_grammar_is_read_alike_for_tools_in_any_script(agreement: Agreement, corpus_texts: list[str]) -> None:
    rng = random.Random(3)
    before = agreement.tally.positions
    for _ in range(3):
        tools, call = unicode_tools(rng, corpus_texts + WORLD_TEXTS)
        grammar = call_grammar(tools)
        assert agreement.walk(grammar, rng, call, longest=200) == call.encode(), call
        agreement.walk(grammar, rng, call[: rng.randrange(len(call))])
    tally = agreement.tally
    print(tally.line())
    assert not tally.disagreements, tally.disagreements[:5]
    assert tally.positions - before > 150


@pytest.mark.slow
def test_a_long_walk_finds_no_disagreement(agreement: Agreement, corpus_texts: list[str]) -> None:
    """Ten staged specs, thirty tool sets and thirty sets of used texts more, for the closing tally."""
    rng = random.Random(34)
    sources = corpus_texts + WORLD_TEXTS
    for _ in range(10):
        walk_spec(agreement, rng, sources)
    for _ in range(30):
        used = {draw(rng, 12, sources) for _ in range(rng.randint(1, 6))}
        rules = GrammarRules()
        grammar = rules.grammar(text_except(used, FIRST, TEXT, 16, rules))
        for target in near_misses(used, rng):
            agreement.walk(grammar, rng, '"' + target + '"')
    for _ in range(30):
        tools, call = unicode_tools(rng, sources)
        agreement.walk(call_grammar(tools), rng, call, longest=200)
    tally = agreement.tally
    print(tally.line())
    assert not tally.disagreements, tally.disagreements[:5]
