"""Partial credit: a scorecard of goals met and harms done, and tolerant answer matching."""

from __future__ import annotations

import re
from typing import TypeVar

from pydantic import BaseModel, Field


class Check(BaseModel):
    name: str
    passed: bool
    weight: float = Field(default=1.0, gt=0)


class Scorecard(BaseModel):
    """Goals earn credit in proportion to their weight; each harm done halves what was earned.

    A no-op play meets no goal and scores 0; a play that meets every goal but also does damage
    (money moved from the wrong account, the wrong ticket closed) keeps only part of its credit.
    """

    goals: list[Check] = Field(default_factory=list)
    harms: list[Check] = Field(default_factory=list)

    def goal(self, name: str, met: bool, weight: float = 1.0) -> Scorecard:
        self.goals.append(Check(name=name, passed=bool(met), weight=weight))
        return self

    def harm(self, name: str, done: bool) -> Scorecard:
        """Record a side effect the task forbids; `done=True` means it happened."""
        self.harms.append(Check(name=name, passed=not done))
        return self

    def untouched(self, before: BaseModel, after: BaseModel, allowed: set[str]) -> Scorecard:
        """Record as harm any edit to an existing record other than the `allowed` `collection/key`s."""
        return self.harm("changed records the task did not ask for", bool(changed_records(before, after) - allowed))

    @property
    def score(self) -> float:
        total = sum(check.weight for check in self.goals)
        if total <= 0:
            return 0.0
        earned = sum(check.weight for check in self.goals if check.passed) / total
        penalty = 0.5 ** sum(1 for check in self.harms if not check.passed)
        return round(earned * penalty, 6)

    def summary(self) -> str:
        marks = [f"{'+' if c.passed else '-'} {c.name}" for c in self.goals]
        marks += [f"! {c.name}" for c in self.harms if not c.passed]
        return "; ".join(marks)


# A number, but not the digits inside an identifier such as ACC-1042 or T7.
_NUMBER = re.compile(r"(?<![\w-])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w-])")
MAX_NUMBERS_IN_ANSWER = 3


def numbers_in(text: str | None) -> list[float]:
    """Every number written in a free-text answer ("$1,204.50" -> 1204.5), identifiers excluded."""
    if not text:
        return []
    return [float(match.replace(",", "")) for match in _NUMBER.findall(text)]


def mentions_amount(answer: str | None, expected: float, tolerance: float = 0.005) -> bool:
    """True when the answer states the expected amount (to the cent).

    An answer that lists more than a few distinct numbers is hedging, not answering, and fails:
    otherwise a policy could learn to recite every figure it saw.
    """
    values = numbers_in(answer)
    if len(set(values)) > MAX_NUMBERS_IN_ANSWER:
        return False
    return any(abs(value - expected) <= tolerance for value in values)


def mentions(answer: str | None, expected: str) -> bool:
    """True when the answer contains the expected text, ignoring case and surrounding spaces."""
    return bool(answer) and expected.strip().lower() in (answer or "").lower()


State = TypeVar("State", bound=BaseModel)


def copy_of(state: State) -> State:
    """A deep copy of a state, to compare against later.

    Round-trips through pydantic-core: measured here 0.2 ms for a banking state where
    `model_copy(deep=True)` takes 1.0 ms, and resets copy the state once per task.
    """
    return type(state).model_validate(state.model_dump())


def changed_records(before: BaseModel, after: BaseModel) -> set[str]:
    """`collection/key` for every record that was modified or removed between two states.

    Records are the values of the state's dict-valued fields that are pydantic models (accounts by id,
    tickets by id). New records are not listed: they are the visible effect of an action, which a
    scorer checks directly; edits to existing records are where collateral damage shows.
    """
    changed: set[str] = set()
    for field in type(before).model_fields:
        old, new = getattr(before, field), getattr(after, field)
        if not isinstance(old, dict) or not all(isinstance(v, BaseModel) for v in old.values()):
            continue
        changed.update(f"{field}/{key}" for key, record in old.items() if new.get(key) != record)
    return changed
