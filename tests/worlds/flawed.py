"""Worlds that break the contract on purpose, one flaw each: `check_world` must name the flaw."""

import random

from toolworlds import Brief, Scorecard, call, tool
from toolworlds.core import Finish, ToolCall
from toolworlds.examples.library import LibraryWorld, Shelf

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


class DigitHint(LibraryWorld):
    """The plan types a one-digit shelf number, and the hint gives it away."""

    def build(self, rng: random.Random) -> Brief:
        brief = super().build(rng)
        self.shelf = rng.randint(1, 9)
        return Brief(instruction=brief.instruction + " Then file it on its shelf.",
                     hint=f"The number you need is {self.shelf}.")  # fmt: skip

    @tool
    def file_on_shelf(self, shelf: int) -> str:
        """File the borrowed book's card on a shelf.

        Args:
            shelf: the shelf number.
        """
        self.filed = shelf
        return "filed"

    def solution(self) -> list[ToolCall | Finish]:
        return [*super().solution()[:-1], call("file_on_shelf", shelf=self.shelf), Finish()]


class SetOrder(LibraryWorld):
    """Lists titles from a set: the same in one process, in another order in another (hash randomisation)."""

    @tool
    def titles(self) -> list[str]:
        """Every title on the shelf."""
        return list({book.title for book in self.state.books.values()})

    def solution(self) -> list[ToolCall | Finish]:
        return [call("titles"), *super().solution()]


class GradeCrash(LibraryWorld):
    """Its scorer has a bug."""

    def grade(self) -> Scorecard:
        raise KeyError("on_loan")


class CodeInDescription(LibraryWorld):
    """Tells the agent about a constant it cannot see."""

    description = "A small library: members may hold `MAX_LOANS` books at a time; borrow the one asked for."


class CodeInHint(LibraryWorld):
    """Points the hint at the world's own state."""

    def build(self, rng: random.Random) -> Brief:
        brief = super().build(rng)
        return Brief(instruction=brief.instruction, hint="Look the title up in self.state.books first.")


class CodeInToolDoc(LibraryWorld):
    """A tool's docstring names a module constant."""

    @tool
    def renew(self, book_id: str) -> str:
        """Renew a loan, at most RENEWAL_LIMIT times.

        Args:
            book_id: the id of a book on loan.
        """
        return "renewed"


class FineInDollars(LibraryWorld):
    """The plan pays a fine of 2.5; the hint says "$2.50"."""

    def build(self, rng: random.Random) -> Brief:
        brief = super().build(rng)
        self.fine = rng.choice([2.5, 7.5])
        return Brief(instruction=brief.instruction + " Pay my fine too.", hint=f"The fine is ${self.fine:.2f}.")

    @tool
    def pay_fine(self, amount: float) -> str:
        """Pay a library fine.

        Args:
            amount: the fine, in dollars.
        """
        return "paid"

    def solution(self) -> list[ToolCall | Finish]:
        return [*super().solution()[:-1], call("pay_fine", amount=self.fine), Finish()]


class ListedId(LibraryWorld):
    """The plan holds a second book, its id inside a list; the hint names that id."""

    def build(self, rng: random.Random) -> Brief:
        brief = super().build(rng)
        self.second = next(b.book_id for b in self.state.books.values() if b.title != self.wanted)
        return Brief(instruction=brief.instruction + " Hold one more book.", hint=f"Hold {self.second}.")

    @tool
    def hold(self, book_ids: list[str]) -> str:
        """Hold books for later.

        Args:
            book_ids: the ids of the books to hold.
        """
        return "held"

    def solution(self) -> list[ToolCall | Finish]:
        return [*super().solution()[:-1], call("hold", book_ids=[self.second]), Finish()]


class AnswerInASentence(LibraryWorld):
    """The plan answers in a sentence holding the shelf number; the hint gives the number."""

    def build(self, rng: random.Random) -> Brief:
        brief = super().build(rng)
        self.shelf = rng.randint(10, 99)
        return Brief(instruction=brief.instruction + " Which shelf is it on?", hint=f"Shelf {self.shelf}.")

    def solution(self) -> list[ToolCall | Finish]:
        return [*super().solution()[:-1], Finish(answer=f"It is on shelf {self.shelf}.")]


class ShelfWithRatio(Shelf):
    ratio: float


class NaNState(LibraryWorld):
    """Its hidden state holds a NaN, which no JSON body can carry (its snapshot cannot be answered)."""

    def build(self, rng: random.Random) -> Brief:
        brief = super().build(rng)
        self.state = ShelfWithRatio(books=self.state.books, ratio=float("nan"))
        return brief
