"""How long the trainer takes to rebuild a row's admitted sets, with the grammar read two ways.

`engine.gbnf.to_lark` (llama.cpp's reading, one lexeme for a grammar without recursion) against llguidance
1.9.1's own `gbnf_to_lark.any_to_lark` (lexemes per terminal rule; wrong on non-ASCII escapes and on
greedy lexeme boundaries), on the same rows, which are ASCII so that both can read them: a designer row
(the library spec of `tests/trainers/test_spec_stages.py`, one grammar per stage) and agent rows under the
call grammars of the reference worlds. Each row's restriction (`AdmittedTokens.restriction`) is timed from
a cold grammar cache `--repeats` times; medians side by side and their ratio.

    python benchmarks/perf/grammar_reading.py          # or: just bench-grammars
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from engine.call_grammar import call_grammar
from engine.gbnf import to_lark
from engine.local_models import default_gguf
from engine.trajectory import SampledSpan
from tests.trainers.test_spec_stages import LIBRARY_STAGES  # a sound spec, split at its stage boundaries
from toolworlds.registry import load_world
from toolworlds.tool import FINISH_FUNCTION
from trainers.designer.stages import SpecStages

FINISH = '{"name": "finish", "arguments": {"answer": "It is done, as you asked."}}<|im_end|>'

Row = tuple[str, list[int], list[int], list[SampledSpan]]


def rows(tokenizer: Any) -> dict[str, Row]:
    stages, ids, spans = SpecStages(), [], []
    for part in LIBRARY_STAGES:
        grammar = stages.grammar()
        assert grammar is not None
        spans.append(SampledSpan(start=len(ids), grammar=grammar))
        ids += tokenizer.encode(part)
        stages.wrote(part)
    out: dict[str, Row] = {f"designer, {len(spans)} stages": ("", ids, [1] * len(ids), spans)}
    reply = tokenizer.encode(FINISH)
    for world in ("banking", "orders", "ticketing"):
        grammar = call_grammar([*load_world(world).openai_tools(), FINISH_FUNCTION])
        out[f"{world}, 4 calls"] = (grammar, reply * 4, [1] * len(reply) * 4, [])
    return out


def timed(tokenizer: Any, read: Callable[[str], str], row: Row, repeats: int) -> float:
    import trainers.constrained as constrained

    constrained.to_lark = read  # the reading under test
    admitted = constrained.AdmittedTokens(tokenizer)
    times = []
    for _ in range(repeats):
        admitted._compiled.cache_clear()
        started = time.perf_counter()
        restriction = admitted.restriction(*row)
        times.append(time.perf_counter() - started)
        assert not restriction.refused
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    from llguidance.gbnf_to_lark import any_to_lark
    from transformers import AutoTokenizer

    from engine.hf_checkpoint import float_checkpoint

    tokenizer = AutoTokenizer.from_pretrained(str(float_checkpoint(default_gguf())))
    readings = {
        "any_to_lark": lambda grammar: '%llguidance {"no_forcing": true}\n' + any_to_lark(grammar),
        "engine.gbnf": to_lark,
    }
    print(f"{'row':22} {'tokens':>6} {'any_to_lark':>12} {'engine.gbnf':>12} {'ratio':>6}   (median of {args.repeats})")
    for name, row in rows(tokenizer).items():
        old, new = (timed(tokenizer, read, row, args.repeats) for read in readings.values())
        print(f"{name:22} {len(row[1]):>6} {old * 1000:>10.1f}ms {new * 1000:>10.1f}ms {new / old:>6.2f}")


if __name__ == "__main__":
    main()
