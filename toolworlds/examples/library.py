"""A whole toolworld in under 60 lines: the example the README shows."""

import random

from pydantic import BaseModel

from toolworlds import Brief, Finish, Scorecard, ToolCall, ToolError, ToolWorld, call, tool


class Book(BaseModel):
    book_id: str
    title: str
    on_loan: bool = False


class Shelf(BaseModel):
    books: dict[str, Book]


class LibraryWorld(ToolWorld[Shelf]):
    """A small library: find a book by title and borrow it."""

    name = "library"
    max_steps = 8

    def build(self, rng: random.Random) -> Brief:
        titles = rng.sample(["Dune", "Emma", "Ulysses", "Beloved", "Walden", "Middlemarch"], 4)
        self.state = Shelf(books={f"B{i}": Book(book_id=f"B{i}", title=t) for i, t in enumerate(titles)})
        self.wanted = rng.choice(titles)
        return Brief(instruction=f"Borrow '{self.wanted}' for me.", hint="Search by title to learn the book's id.")

    @tool
    def search(self, title: str) -> list[Book]:
        """Find books whose title contains the text.

        Args:
            title: part of a title, any case.
        """
        return [b for b in self.state.books.values() if title.lower() in b.title.lower()]

    @tool
    def borrow(self, book_id: str) -> Book:
        """Borrow a book by its id.

        Args:
            book_id: the id search returned.
        """
        book = self.state.books.get(book_id)
        if book is None:
            raise ToolError("not_found", f"no book {book_id!r}")
        if book.on_loan:
            raise ToolError("on_loan", f"{book_id} is already on loan")
        book.on_loan = True
        return book

    def grade(self) -> Scorecard:
        loans = [b for b in self.state.books.values() if b.on_loan]
        card = Scorecard().goal("borrowed the book", any(b.title == self.wanted for b in loans))
        return card.harm("borrowed other books", any(b.title != self.wanted for b in loans))

    def solution(self) -> list[ToolCall | Finish]:
        book = next(b for b in self.state.books.values() if b.title == self.wanted)
        return [call("search", title=self.wanted), call("borrow", book_id=book.book_id), Finish()]
