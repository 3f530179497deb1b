"""The Vendi score of generated worlds: 1 for copies, n for unrelated worlds, in between otherwise."""

from __future__ import annotations

import pytest

from toolworlds.registry import builtin_worlds
from trainers.designer.diversity import schema_words, vendi_score


def tools_of(name: str) -> list[dict[str, object]]:
    world = builtin_worlds()[name]
    return [{"name": s.name, "description": s.description, "input_schema": s.input_schema} for s in world.tools()]


def test_copies_score_one_and_unrelated_worlds_score_their_count() -> None:
    bank = tools_of("banking")
    assert vendi_score([bank, bank, bank]) == pytest.approx(1.0)
    unrelated = [[{"name": "alpha_beta"}], [{"name": "gamma_delta"}], [{"name": "epsilonZeta"}]]
    assert vendi_score(unrelated) == pytest.approx(3.0)
    assert vendi_score([]) == 0.0


def test_the_reference_worlds_are_diverse_but_share_some_vocabulary() -> None:
    score = vendi_score([tools_of("banking"), tools_of("ticketing"), tools_of("orders")])
    assert 1.5 < score < 3.0
    assert schema_words([{"name": "getAccount_balance"}]) == {"get": 1, "account": 1, "balance": 1}
