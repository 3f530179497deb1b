"""Brace repair: literal braces in f-strings and `.format` strings, the designer's most common breakage.

A small model writes `f"Answer with \\boxed{answer}"` or `"Reply as {"name": ...}".format(x)`: the first
reads a variable that does not exist (or breaks the syntax), the second raises at run time. For each
f-string and each literal that `.format` is called on, a replacement field that is not what Python would
accept there, or that follows a LaTeX command (`\\boxed{`), gets its braces doubled. Code is only ever
tokenized here, never run.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

_FIELD_NAME = re.compile(r"^(\w+|\d+)?((\.\w+)|(\[[^\]]*\]))*$")
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+$")
_PREFIX = re.compile(r"^([rRbBuUfF]*)(['\"]{3}|['\"])", re.DOTALL)


def repair_braces(source: str) -> tuple[str, int]:
    """The source with bad replacement fields escaped, and how many were escaped."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source, 0
    fixed = 0
    out: list[tokenize.TokenInfo] = []
    for index, token in enumerate(tokens):
        if token.type == tokenize.STRING:
            following = tokens[index + 1 : index + 3]
            formatted = len(following) == 2 and following[0].string == "." and following[1].string == "format"
            text, count = _repair_literal(token.string, formatted)
            if count:
                token = token._replace(string=text)
                fixed += count
        out.append(token)
    return (tokenize.untokenize(out) if fixed else source), fixed


def _repair_literal(literal: str, formatted: bool) -> tuple[str, int]:
    match = _PREFIX.match(literal)
    if match is None:
        return literal, 0
    prefix, quote = match.groups()
    is_f = "f" in prefix.lower()
    if not (is_f or formatted) or "b" in prefix.lower():
        return literal, 0
    body = literal[len(prefix) + len(quote) : len(literal) - len(quote)]
    repaired, count = _escape_fields(body, is_f)
    return prefix + quote + repaired + quote, count


def _escape_fields(body: str, is_f: bool) -> tuple[str, int]:
    pieces: list[str] = []
    count = 0
    index = 0
    while index < len(body):
        char = body[index]
        if body.startswith("{{", index) or body.startswith("}}", index):
            pieces.append(body[index : index + 2])
            index += 2
            continue
        if char == "}":  # a lone closing brace is always a literal one
            pieces.append("}}")
            count += 1
            index += 1
            continue
        if char != "{":
            pieces.append(char)
            index += 1
            continue
        end = _matching(body, index)
        inner = body[index + 1 : end] if end is not None else body[index + 1 :]
        after_latex = bool(_LATEX_COMMAND.search(body[:index]))
        if end is not None and not after_latex and _valid_field(inner, is_f):
            pieces.append(body[index : end + 1])
        else:  # literal text (a JSON example, LaTeX): every brace in it is doubled
            literal = body[index : end + 1] if end is not None else body[index:]
            pieces.append(literal.replace("{", "{{").replace("}", "}}"))
            count += 1
        index = (end + 1) if end is not None else len(body)
    return "".join(pieces), count


def _matching(body: str, start: int) -> int | None:
    depth = 0
    for index in range(start, len(body)):
        if body[index] == "{":
            depth += 1
        elif body[index] == "}":
            depth -= 1
            if depth == 0:
                return index
    return None


def _valid_field(inner: str, is_f: bool) -> bool:
    expression, *spec = re.split(r"![rsa](?=:|$)|:(?![^\[]*\])", inner, maxsplit=1)
    if spec and re.search(r"['\"]", spec[0]):
        return False  # `{"tool": "pay"}` parses as "tool" with the spec ' "pay"'; no real spec holds quotes
    if not is_f:
        return bool(_FIELD_NAME.match(expression.strip()))
    if not expression.strip():
        return False
    try:
        ast.parse(f"({expression})", mode="eval")
    except SyntaxError:
        return False
    return True
