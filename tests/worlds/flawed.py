"""Worlds that break the contract on purpose, one flaw each: `check_world` must name the flaw."""

import random

from toolworlds import Brief, Scorecard, call, tool
from toolworlds.core import Finish, ToolCall
from toolworlds.examples.library import LibraryWorld

_unseeded = random.Random()


class WrongPlan(LibraryWorld):
    """The reference plan borrows the wrong book."""

    def solution(self) -> list[ToolCall | Finish]:
        other = next(b for b in self.state.books.values() if b.title != self.wanted)
        return [call("borrow", book_id=other.book_id), Finish()]


class Unseeded(LibraryWorld):
    """Draws its task from a generator the seed does not control."""

    def build(self, rng: random.Random) -> Brief:
        return super().build(random.Random(_unseeded.random()))


class LeakyHint(LibraryWorld):
    """The hint gives away the book id the plan types."""

    def build(self, rng: random.Random) -> Brief:
        brief = super().build(rng)
        book = next(b for b in self.state.books.values() if b.title == self.wanted)
        return Brief(instruction=brief.instruction, hint=f"The book you want is {book.book_id}.")


class FreeLunch(LibraryWorld):
    """Scores full marks for doing nothing."""

    def grade(self) -> Scorecard:
        return Scorecard().goal("showed up", True)


class FragileTool(LibraryWorld):
    """A tool the reference plan never uses crashes on every call."""

    @tool
    def renew(self, book_id: str) -> str:
        """Renew a loan.

        Args:
            book_id: the id of a book on loan.
        """
        return self.state.books[book_id + "?"].title
