"""GBNF, llama.cpp's grammar format: writing it, and reading it exactly as llama.cpp reads it.

The engine samples under GBNF grammars inside llama.cpp; the trainer rebuilds what each grammar admitted with
llguidance, which reads Lark. `to_lark` is that translation. It follows llama.cpp's own parser
(`llama-grammar.cpp`, as built in the pinned xllamacpp), not a general idea of GBNF: the same escapes
(`\\xHH`, `\\uHHHH`, `\\UHHHHHHHH`, `\\t`, `\\r`, `\\n`, `\\\\`, `\\"`, `\\[`, `\\]`, `\\-` and no other), raw
UTF-8 everywhere else, rule names of ASCII letters, digits and `-`, `#` comments, line breaks only inside
parentheses or after `|`, `.` for any character, a class's `-` a range unless it comes last, `{m,n}` counts,
the text cut at a NUL (llama.cpp reads a C string), and left recursion refused as llama.cpp finds it (every
group and repetition its own rule: `("" | "a")*` is left recursive). A grammar llama.cpp refuses is refused
here, with the reason and the place; so are the few it reads inconsistently (`INCONSISTENT`): an element
no character matches, which keeps a reply alive in llama.cpp that llguidance knows is dead, a reversed range
(`[z-a]`), which llama.cpp lets a token ending inside a character into, and `{m,n}` with n < m, on which
llama.cpp runs out of memory.

Two ways a translation can differ from llama.cpp are designed out:
- Characters reach llguidance as `\\x{H}` escapes inside regular expressions, so no character is special
  in Lark or in its regex syntax. (llguidance 1.9.1's own `gbnf_to_lark.any_to_lark` writes `\\u00b2` as
  `\\ub2`, which its Lark parser then refuses, and `\\U0001F600` as `\\U1F600`.)
- llguidance cuts a grammar into lexemes and ends each as late as it can, where llama.cpp, which has no
  lexer, keeps every reading: `[ab]{0,3} "b"` admits `ab` in llama.cpp and not as lexemes `/[ab]{0,3}/ "b"`,
  and neither does `"a" "bc" | "ab" "d"` admit `abc`. A grammar without recursion (every grammar spadework
  writes) describes a regular language, so it is written as one lexeme: every rule an uppercase terminal,
  compiled into one regular expression, with no lexeme boundary inside. A recursive grammar keeps its rules,
  and every lexeme in it is one character, which cannot be ended late.

What is left is llama.cpp's handling of a token that ends inside a character. Its UTF-8 decoder is lenient:
after such a token it also admits bytes that make the text invalid UTF-8 (an overlong form, a surrogate);
the trainer does not, and a reply that samples one is left out of training. And it checks such a token
against a negated class (`[^...]`) wrongly, refusing it when the class excludes any character it could
still become; spadework therefore writes every class as the ranges it allows (`CharSet`), and sends a
grammar from elsewhere rewritten the same way (`for_llama_cpp`, which `EpisodeSettings.grammar` applies).
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass

LAST_CODE_POINT = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)

# -- writing ------------------------------------------------------------------------------------------------


class GrammarRules:
    """The numbered rules of one GBNF grammar, added as expressions need them."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, body: str) -> str:
        name = f"r{len(self.lines) + 1}"
        self.lines.append(f"{name} ::= {body}")
        return name

    def grammar(self, root: str) -> str:
        """The whole grammar: `root` and every rule added so far."""
        return "\n".join([f"root ::= {root}", *self.lines])


def literal(text: str) -> str:
    """A GBNF literal matching exactly `text`: a quote and a backslash escaped, control characters as code
    points (a raw NUL would end the grammar where llama.cpp reads it), everything else as it is."""
    return '"' + "".join(_literal_char(c) for c in text) + '"'


def _literal_char(c: str) -> str:
    if c in '"\\':
        return "\\" + c
    return code_point(c) if ord(c) < 0x20 or ord(c) == 0x7F else c


def code_point(c: str | int) -> str:
    """`c` as a GBNF escape, which means the character itself in a literal and in a class alike."""
    number = c if isinstance(c, int) else ord(c)
    return f"\\x{number:02x}" if number < 0x80 else f"\\u{number:04x}" if number < 0x10000 else f"\\U{number:08x}"


CONTROL = "".join(map(chr, range(0x20)))


@dataclass(frozen=True)
class CharSet:
    """The characters one position of a text may hold: every character but `excluded` or, given `only`,
    just those. A class that leaves out a character past ASCII is written as the ranges it allows: llama.cpp
    checks a token that ends inside a character against a negated class wrongly (`[^😀]` refuses a lone 0xF0
    byte, though 0xF0 can still become 😁) and against allowed ranges rightly. One that leaves out only ASCII
    stays `[^...]`, a third the length, which llama.cpp checks rightly: a character begun is past ASCII."""

    excluded: frozenset[str] = frozenset()
    only: str | None = None

    @classmethod
    def but(cls, excluded: str) -> CharSet:
        return cls(excluded=frozenset(excluded))

    def without(self, taken: AbstractSet[str]) -> CharSet:
        if self.only is not None:
            return CharSet(only="".join(c for c in self.only if c not in taken))
        return CharSet(excluded=self.excluded | frozenset(taken))

    def gbnf(self) -> str:
        """The class, or "" when no character is left."""
        if self.only is not None:
            return _gbnf_class([(ord(c), ord(c)) for c in self.only]) if self.only else ""
        return _gbnf_class([(ord(c), ord(c)) for c in self.excluded], negated=True)


# -- reading ------------------------------------------------------------------------------------------------


class GrammarUnreadable(ValueError):
    """A grammar llama.cpp would refuse, or one whose reading llguidance cannot be given exactly."""


@dataclass(frozen=True)
class Chars:
    """One character in `ranges` (inclusive), or with `negated` one outside them (`.` is no ranges, negated)."""

    ranges: tuple[tuple[int, int], ...]
    negated: bool = False


@dataclass(frozen=True)
class Text:
    """These characters in order; none for `""` and for a class with nothing in it, both of which llama.cpp
    reads as nothing at all (so neither may be repeated)."""

    code_points: tuple[int, ...]


@dataclass(frozen=True)
class Ref:
    name: str


@dataclass(frozen=True)
class Group:
    alternatives: tuple[tuple[Item, ...], ...]


@dataclass(frozen=True)
class Repeat:
    item: Item
    least: int
    most: int | None  # None: no bound


Item = Chars | Text | Ref | Group | Repeat
Alternatives = tuple[tuple[Item, ...], ...]


def read_gbnf(grammar: str) -> dict[str, Alternatives]:
    """The rules of `grammar` as llama.cpp's parser reads them (a later rule of the same name replaces an
    earlier one, as there); raises `GrammarUnreadable` where llama.cpp would refuse it."""
    return _Reader(grammar).rules()


def to_lark(grammar: str) -> str:
    """`grammar` (GBNF) in llguidance's Lark, admitting exactly the texts llama.cpp admits."""
    rules = read_gbnf(grammar)
    reachable = _reachable(rules)
    writer = _LarkWriter({name: f"r{index}" for index, name in enumerate(reachable)}, _recursive(rules, reachable))
    lines = [f"{writer.rule(name)}: {writer.alternatives(rules[name])}" for name in reachable]
    classes = [f"{name}: /{regex}/" for regex, name in writer.classes.items()]
    return '%llguidance {"no_forcing": true}\n' + "\n".join([f"start: {writer.rule('root')}", *lines, *classes]) + "\n"


def for_llama_cpp(grammar: str) -> str:
    """`grammar` as the engine sends it to llama.cpp: read as llama.cpp reads it (a grammar it would refuse
    raises `GrammarUnreadable` here, before any request) and written back with every class as the ranges it
    allows, which llama.cpp checks rightly against a token ending inside a character. A grammar in
    llguidance's own syntax (`%llguidance ...`) is sent as it is."""
    if grammar.startswith("%llguidance"):
        return grammar
    rules = read_gbnf(grammar)
    return "\n".join(f"{name} ::= {_gbnf_alternatives(alternatives)}" for name, alternatives in rules.items())


def _gbnf_alternatives(alternatives: Alternatives) -> str:
    return " | ".join(" ".join(_gbnf_item(item) for item in sequence) or '""' for sequence in alternatives)


def _gbnf_item(item: Item) -> str:
    if isinstance(item, Text):
        return literal("".join(map(chr, item.code_points)))
    if isinstance(item, Chars):
        if item.negated and not _valid_ranges(item.ranges):
            return "."
        return _gbnf_class(_valid_ranges(item.ranges), item.negated)
    if isinstance(item, Ref):
        return item.name
    if isinstance(item, Group):
        return f"({_gbnf_alternatives(item.alternatives)})"
    return f"{_gbnf_item(item.item)}{{{item.least},{'' if item.most is None else item.most}}}"


def _gbnf_class(ranges: list[tuple[int, int]], negated: bool = False) -> str:
    """A class of `ranges` or, `negated`, of every other character: `[^...]` while it leaves out only ASCII,
    else the ranges it allows (see `CharSet`)."""
    if negated and any(high >= 0x80 for _, high in ranges):
        ranges, negated = _complement(ranges), False
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    written = "".join(code_point(a) if a == b else f"{code_point(a)}-{code_point(b)}" for a, b in merged)
    return f"[^{written}]" if negated else f"[{written}]"


def _complement(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The characters a text can hold outside `ranges`."""
    out, start = [], 0
    for low, high in sorted([*ranges, _SURROGATES]):
        if low > start:
            out.append((start, low - 1))
        start = max(start, high + 1)
    return out if start > LAST_CODE_POINT else [*out, (start, LAST_CODE_POINT)]


class _Reader:
    """llama.cpp's recursive-descent GBNF parser, position for position, over the text's code points."""

    def __init__(self, grammar: str) -> None:
        self.text = grammar.split("\x00", 1)[0]  # llama.cpp reads the grammar as a C string
        surrogate = next((i for i, c in enumerate(self.text) if _SURROGATES[0] <= ord(c) <= _SURROGATES[1]), None)
        if surrogate is not None:
            self._fail("a lone surrogate, which UTF-8 cannot carry,", surrogate)
        self._rules: dict[str, Alternatives] = {}
        self._referenced: dict[str, int] = {}  # name -> where it was first referenced

    def rules(self) -> dict[str, Alternatives]:
        at = self._space(0, newline_ok=True)
        while at < len(self.text):
            at = self._rule(at)
        for name, where in self._referenced.items():
            if name not in self._rules:
                self._fail(f"the rule {name!r} is used but never defined", where)
        if "root" not in self._rules:
            raise GrammarUnreadable("the grammar has no rule named 'root'")
        if (recursive := _left_recursive(self._rules)) is not None:
            raise GrammarUnreadable(f"left recursion (llama.cpp refuses it) in the rule {recursive!r}")
        return self._rules

    # llama.cpp's parse_rule: a name, `::=`, alternatives, then a line break or the end.
    def _rule(self, at: int) -> int:
        end = self._name(at)
        name = self.text[at:end]
        at = self._space(end, newline_ok=False)
        if self.text[at : at + 3] != "::=":
            self._fail("expecting ::=", at)
        alternatives, at = self._alternatives(self._space(at + 3, newline_ok=True), nested=False)
        self._rules[name] = alternatives
        if self._at(at) == "\r":
            at += 2 if self._at(at + 1) == "\n" else 1
        elif self._at(at) == "\n":
            at += 1
        elif at < len(self.text):
            self._fail("expecting a line break or the end", at)
        return self._space(at, newline_ok=True)

    def _alternatives(self, at: int, nested: bool) -> tuple[Alternatives, int]:
        sequence, at = self._sequence(at, nested)
        alternatives = [sequence]
        while self._at(at) == "|":
            sequence, at = self._sequence(self._space(at + 1, newline_ok=True), nested)
            alternatives.append(sequence)
        return tuple(alternatives), at

    def _sequence(self, at: int, nested: bool) -> tuple[tuple[Item, ...], int]:
        items: list[Item] = []
        while at < len(self.text):
            c = self.text[at]
            if c == '"':
                at += 1
                points = []
                while self._at(at) != '"':
                    if at >= len(self.text):
                        self._fail("a literal is not closed", at)
                    point, at = self._char(at)
                    points.append(point)
                if not all(_valid(point) for point in points):
                    self._fail(_NO_CHARACTER, at)
                items.append(Text(tuple(points)))
                at = self._space(at + 1, nested)
            elif c == "[":
                item, at = self._class(at + 1)
                items.append(item)
                at = self._space(at, nested)
            elif _is_word_char(c):
                end = self._name(at)
                self._referenced.setdefault(self.text[at:end], at)
                items.append(Ref(self.text[at:end]))
                at = self._space(end, nested)
            elif c == "(":
                alternatives, at = self._alternatives(self._space(at + 1, newline_ok=True), nested=True)
                if self._at(at) != ")":
                    self._fail("expecting ')'", at)
                items.append(Group(alternatives))
                at = self._space(at + 1, nested)
            elif c == ".":
                items.append(Chars((), negated=True))
                at = self._space(at + 1, nested)
            elif c in "*+?{":
                at = self._repetition(items, at, nested)
            elif c == "<":
                self._fail("token references (<...>) are not read here", at)
            else:
                break
        return tuple(items), at

    def _class(self, at: int) -> tuple[Item, int]:
        start = at - 1
        negated = self._at(at) == "^"
        at += negated
        ranges: list[tuple[int, int]] = []
        while self._at(at) != "]":
            if at >= len(self.text):
                self._fail("a character class is not closed", at)
            low, at = self._char(at)
            high = low
            if self._at(at) == "-" and self._at(at + 1) != "]":
                if at + 1 >= len(self.text):
                    self._fail("a character range is not closed", at)
                high, at = self._char(at + 1)
            ranges.append((low, high))
        if not ranges:
            return Text(()), at + 1  # llama.cpp adds no element for `[]` or `[^]`
        chars = Chars(tuple(ranges), negated)
        if any(low > high for low, high in ranges):
            self._fail(_REVERSED, start)
        if not _holdable(chars):
            self._fail(_NO_CHARACTER, start)
        return chars, at + 1

    def _repetition(self, items: list[Item], at: int, nested: bool) -> int:
        """llama.cpp's handle_repetitions on the last item: it must have added an element."""
        if not items or items[-1] == Text(()):
            self._fail("expecting an item before the repetition", at)
        c = self.text[at]
        if c in "*+?":
            least, most = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            at = self._space(at + 1, nested)
        else:
            at = self._space(at + 1, nested)
            least, at = self._int(at)
            at = self._space(at, nested)
            most = least
            if self._at(at) == ",":
                at = self._space(at + 1, nested)
                most = None
                if self._at(at).isdigit() and self._at(at).isascii():
                    most, at = self._int(at)
                    at = self._space(at, nested)
            if self._at(at) != "}":
                self._fail("expecting '}'", at)
            at = self._space(at + 1, nested)
        if most is not None and most < least:  # llama.cpp ran out of memory on it here (24 GB), never refusing it
            self._fail(f"at most {most} is fewer than at least {least}", at)
        items[-1] = Text(()) if most == 0 else Repeat(items[-1], least, most)
        return at

    def _char(self, at: int) -> tuple[int, int]:
        c = self._at(at)
        if c != "\\":
            if not c:
                self._fail("unexpected end of input", at)
            return ord(c), at + 1
        escape = self._at(at + 1)
        if escape in _HEX_DIGITS:
            size = _HEX_DIGITS[escape]
            digits = self.text[at + 2 : at + 2 + size]
            if len(digits) != size or not all(d in "0123456789abcdefABCDEF" for d in digits):
                self._fail(f"expecting {size} hex digits after \\{escape}", at)
            return int(digits, 16), at + 2 + size
        if escape in _ESCAPES:
            return ord(_ESCAPES[escape]), at + 2
        self._fail(f"unknown escape \\{escape}", at)
        raise AssertionError  # _fail raises

    def _name(self, at: int) -> int:
        end = at
        while end < len(self.text) and _is_word_char(self.text[end]):
            end += 1
        if end == at:
            self._fail("expecting a name", at)
        return end

    def _int(self, at: int) -> tuple[int, int]:
        end = at
        while end < len(self.text) and self.text[end].isascii() and self.text[end].isdigit():
            end += 1
        if end == at:
            self._fail("expecting an integer", at)
        return int(self.text[at:end]), end

    def _space(self, at: int, newline_ok: bool) -> int:
        while at < len(self.text) and (self.text[at] in " \t#" or (newline_ok and self.text[at] in "\r\n")):
            if self.text[at] == "#":
                while at < len(self.text) and self.text[at] not in "\r\n":
                    at += 1
            else:
                at += 1
        return at

    def _at(self, at: int) -> str:
        return self.text[at] if at < len(self.text) else ""

    def _fail(self, problem: str, at: int) -> None:
        line = self.text.count("\n", 0, at) + 1
        raise GrammarUnreadable(f"{problem} at line {line}: {self.text[max(0, at - 20) : at + 20]!r}")


# Refused here though llama.cpp reads them, because it reads them inconsistently: it keeps a reply alive
# that waits for an element no character matches, where llguidance knows it is a dead end, and it lets a
# token ending inside a character into a reversed range that no whole character enters.
INCONSISTENT = "llama.cpp reads it inconsistently"
_NO_CHARACTER = f"an element that no character matches ({INCONSISTENT})"
_REVERSED = f"a range whose end comes before its start ({INCONSISTENT})"


def _valid(point: int) -> bool:
    return point <= LAST_CODE_POINT and not _SURROGATES[0] <= point <= _SURROGATES[1]


def _holdable(chars: Chars) -> bool:
    """Whether some character of a text is in `chars`."""
    valid = _valid_ranges(chars.ranges)
    if not chars.negated:
        return bool(valid)
    covered = 0  # the characters below this are all excluded
    for low, high in sorted([*valid, _SURROGATES]):
        if low > covered:
            return True
        covered = max(covered, high + 1)
    return covered <= LAST_CODE_POINT


def _valid_ranges(ranges: tuple[tuple[int, int], ...]) -> list[tuple[int, int]]:
    """`ranges` cut to the characters a text can hold (no surrogates, nothing past U+10FFFF)."""
    valid = []
    for low, high in ranges:
        if high < _SURROGATES[0] or _SURROGATES[1] < low <= high <= LAST_CODE_POINT:
            valid.append((low, high))
            continue
        for start, end in ((low, min(high, _SURROGATES[0] - 1)), (max(low, _SURROGATES[1] + 1), high)):
            if start <= min(end, LAST_CODE_POINT):
                valid.append((start, min(end, LAST_CODE_POINT)))
    return valid


_HEX_DIGITS = {"x": 2, "u": 4, "U": 8}
_ESCAPES = {"t": "\t", "r": "\r", "n": "\n", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-"}


def _is_word_char(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "-")


def _references(node: Alternatives | Item) -> list[str]:
    if isinstance(node, Ref):
        return [node.name]
    if isinstance(node, Repeat):
        return _references(node.item)
    if isinstance(node, Group):
        return _references(node.alternatives)
    if isinstance(node, tuple):
        return [name for sequence in node for item in sequence for name in _references(item)]
    return []


def _left_recursive(rules: dict[str, Alternatives]) -> str | None:
    """A rule llama.cpp calls left recursive, or None. llama.cpp expands every group and repetition into a
    rule of its own (`x*` into `r ::= x r | `, `x{0,2}` into `r1 ::= x | ` and `r2 ::= x r1 | `) and refuses
    a grammar where any rule, used or not, reaches itself through leftmost references, passing over each
    reference to a rule with an empty alternative: `("" | "a")*` is refused, `("a")*` is not."""
    flat: list[list[list[int | None]]] = []  # rules > alternatives > elements: a rule's index, None a character
    owner: list[str] = []  # the named rule each flat rule was written in
    index = {name: position for position, name in enumerate(rules)}
    flat += [[] for _ in rules]
    owner += list(rules)

    def new_rule(alternatives: list[list[int | None]], name: str) -> int:
        flat.append(alternatives)
        owner.append(name)
        return len(flat) - 1

    def elements(item: Item, name: str) -> list[int | None]:
        if isinstance(item, Text):
            return [None] * len(item.code_points)
        if isinstance(item, Chars):
            return [None]
        if isinstance(item, Ref):
            return [index[item.name]]
        if isinstance(item, Group):
            return [new_rule([sequence(s, name) for s in item.alternatives], name)]
        # llama.cpp copies the item `least` times and chains one optional rule per further copy; one copy
        # and one optional rule reach the same rules first, and the chain adds no cycle of its own.
        repeated = elements(item.item, name)
        out = repeated * min(item.least, 1)
        if item.most is not None and item.most == item.least:
            return out
        optional = [*repeated, len(flat)] if item.most is None else repeated  # `x*`: itself, after x
        return [*out, new_rule([optional, []], name)]

    def sequence(items: tuple[Item, ...], name: str) -> list[int | None]:
        return [element for item in items for element in elements(item, name)]

    for name, alternatives in rules.items():
        flat[index[name]] = [sequence(s, name) for s in alternatives]
    may_be_empty = [any(not alternative for alternative in rule) for rule in flat]
    leftmost: list[set[int]] = []
    for rule in flat:
        reached: set[int] = set()
        for alternative in rule:
            for element in alternative:
                if element is None:
                    break
                reached.add(element)
                if not may_be_empty[element]:
                    break
        leftmost.append(reached)
    state = [0] * len(flat)  # 1: on the path, 2: done

    def cycles(rule: int) -> bool:
        state[rule] = 1
        for child in leftmost[rule]:
            if state[child] == 1 or (state[child] == 0 and cycles(child)):
                return True
        state[rule] = 2
        return False

    return next((owner[rule] for rule in range(len(flat)) if state[rule] == 0 and cycles(rule)), None)


def _reachable(rules: dict[str, Alternatives]) -> list[str]:
    """The rules reachable from root, root first."""
    seen, order = {"root"}, ["root"]
    for name in order:
        for child in _references(rules[name]):
            if child not in seen:
                seen.add(child)
                order.append(child)
    return order


def _recursive(rules: dict[str, Alternatives], reachable: list[str]) -> bool:
    """Whether a reachable rule reaches itself."""
    children = {name: set(_references(rules[name])) for name in reachable}
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def cycles(name: str) -> bool:
        state[name] = 1
        for child in children[name]:
            if state.get(child) == 1 or (child not in state and cycles(child)):
                return True
        state[name] = 2
        return False

    return any(name not in state and cycles(name) for name in reachable)


class _LarkWriter:
    """Rules in Lark: with `single` False as parts of one lexeme (every rule an uppercase terminal), with
    `single` as rules whose lexemes are one character each. A class is written once, as a terminal of its
    own (`C0: /[...]/`): the text classes of a stage grammar repeat, and llguidance compiled each copy anew."""

    def __init__(self, names: dict[str, str], single: bool) -> None:
        self.names, self.single = names, single
        self.classes: dict[str, str] = {}  # regex -> terminal name

    def rule(self, name: str) -> str:
        return self.names[name] if self.single else self.names[name].upper()

    def alternatives(self, alternatives: Alternatives) -> str:
        return " | ".join(" ".join(p for p in map(self.item, sequence) if p) or '""' for sequence in alternatives)

    def item(self, item: Item) -> str:
        if isinstance(item, Text):
            if self.single:
                return " ".join(f"/{_regex_char(point)}/" for point in item.code_points)
            return "/" + "".join(map(_regex_char, item.code_points)) + "/" if item.code_points else ""
        if isinstance(item, Chars):
            return self.classes.setdefault(_class(item), f"C{len(self.classes)}")
        if isinstance(item, Ref):
            return self.rule(item.name)
        if isinstance(item, Group):
            return f"({self.alternatives(item.alternatives)})"
        most = "" if item.most is None else item.most
        return f"({self.item(item.item)}){{{item.least},{most}}}"


def _regex_char(point: int) -> str:
    c = chr(point)
    return c if c.isascii() and c.isalnum() else f"\\x{{{point:x}}}"


def _class(chars: Chars) -> str:
    """A regex class of the characters a text can hold among `chars` (the reader refused a class of none)."""
    valid = "".join(f"\\x{{{a:x}}}" if a == b else f"\\x{{{a:x}}}-\\x{{{b:x}}}" for a, b in _valid_ranges(chars.ranges))
    if chars.negated:
        return f"[^{valid}]" if valid else "(?s:.)"
    return f"[{valid}]"
