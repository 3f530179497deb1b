"""llama.cpp's own reading of a grammar: the tokens its grammar sampler admits after each prefix of a reply.

The engine's embedded server is llama.cpp as built in the `xllamacpp` wheel, and that library exports
llama.cpp's C API. This calls it through ctypes, on the embedded model's vocabulary: the grammar sampler
the server puts in its chain (`llama_sampler_init_grammar`), applied to every token of the vocabulary
(what it leaves above -inf is admitted), then told the chosen token (`llama_sampler_accept`). Tests hold the
trainer's rebuilt admitted sets (`trainers.constrained`) to it, token for token.
"""

from __future__ import annotations

import ctypes
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.gbnf import GrammarUnreadable

LOG_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])


class _TokenDataArray(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_size_t), ("selected", ctypes.c_int64),
                ("sorted", ctypes.c_bool)]  # fmt: skip


class _ModelParams(ctypes.Structure):
    """llama_model_params, opaque: passed back exactly as llama_model_default_params returned it (the
    struct is under 1 KiB; a larger buffer only leaves the tail unused)."""

    _fields_ = [("raw", ctypes.c_uint8 * 1024)]


class LlamaCppGrammar:
    """llama.cpp's grammar sampler over one GGUF model's vocabulary (its weights are mapped, not used)."""

    def __init__(self, gguf: Path) -> None:
        import xllamacpp.xllamacpp as native

        lib = ctypes.CDLL(native.__file__)
        self._errors: list[str] = []
        self._log = LOG_CALLBACK(self._record)  # kept alive: llama.cpp calls it
        lib.llama_log_set(self._log, None)
        lib.llama_backend_init()
        lib.llama_model_default_params.restype = _ModelParams
        lib.llama_model_load_from_file.argtypes = [ctypes.c_char_p, _ModelParams]
        lib.llama_model_load_from_file.restype = ctypes.c_void_p
        lib.llama_model_get_vocab.argtypes = [ctypes.c_void_p]
        lib.llama_model_get_vocab.restype = ctypes.c_void_p
        lib.llama_vocab_n_tokens.argtypes = [ctypes.c_void_p]
        lib.llama_vocab_n_tokens.restype = ctypes.c_int32
        lib.llama_sampler_init_grammar.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
        lib.llama_sampler_init_grammar.restype = ctypes.c_void_p
        lib.llama_sampler_apply.argtypes = [ctypes.c_void_p, ctypes.POINTER(_TokenDataArray)]
        lib.llama_sampler_accept.argtypes = [ctypes.c_void_p, ctypes.c_int32]
        lib.llama_sampler_free.argtypes = [ctypes.c_void_p]
        self._lib = lib
        self._model = lib.llama_model_load_from_file(str(gguf).encode(), lib.llama_model_default_params())
        if not self._model:
            raise RuntimeError(f"llama.cpp could not load {gguf}: {self._errors[-3:]}")
        self._vocab = lib.llama_model_get_vocab(self._model)
        self.vocab_size = int(lib.llama_vocab_n_tokens(self._vocab))

    def _record(self, level: int, text: bytes | None, _: Any) -> None:
        if level >= 4 and text:  # GGML_LOG_LEVEL_ERROR: why a grammar was refused
            self._errors.append(text.decode(errors="replace"))

    def problem(self, grammar: str) -> str | None:
        """Why llama.cpp refuses `grammar`, or None if it reads it."""
        sampler = self._init(grammar)
        if sampler is None:
            return " ".join(line.strip() for line in self._errors) or "refused"
        self._lib.llama_sampler_free(sampler)
        return None

    def walk(self, grammar: str, choose: Any) -> tuple[list[int], list[np.ndarray]]:
        """Sample a reply under `grammar` with `choose(admitted ids, position) -> id or None (stop)`; returns
        the ids chosen and, for each, the ids llama.cpp admitted at its position."""
        sampler = self._init(grammar)
        if sampler is None:
            raise ValueError(f"llama.cpp refuses the grammar: {self._errors}")
        ids: list[int] = []
        admitted: list[np.ndarray] = []
        try:
            while True:
                allowed = self._admitted(sampler)
                token = choose(allowed, len(ids))
                if token is None:
                    return ids, admitted
                assert token in set(allowed.tolist()), f"chose {token}, which llama.cpp does not admit"
                ids.append(token)
                admitted.append(allowed)
                self._lib.llama_sampler_accept(sampler, token)
        finally:
            self._lib.llama_sampler_free(sampler)

    def _init(self, grammar: str) -> Any:
        self._errors.clear()
        return self._lib.llama_sampler_init_grammar(self._vocab, grammar.encode(), b"root") or None

    def _admitted(self, sampler: Any) -> np.ndarray:
        candidates = np.zeros(self.vocab_size, dtype=_TOKEN_DATA)
        candidates["id"] = np.arange(self.vocab_size, dtype=np.int32)
        array = _TokenDataArray(candidates.ctypes.data, self.vocab_size, -1, False)
        self._lib.llama_sampler_apply(sampler, ctypes.byref(array))
        return np.nonzero(candidates["logit"] > -np.inf)[0]


def valid_utf8_start(data: bytes) -> bool:
    """Whether `data` is UTF-8 or the start of it, as RFC 3629 has it: no overlong forms, no surrogates, nothing
    past U+10FFFF (llama.cpp's decoder is more lenient; Python's incremental one lets a surrogate's start by)."""
    i = 0
    while i < len(data):
        lead = data[i]
        if lead < 0x80:
            i += 1
            continue
        form = next((form for form in _UTF8_FORMS if lead in form[0]), None)
        if form is None:
            return False
        _, need, low, high = form
        for k in range(1, need + 1):
            if i + k >= len(data):
                return True
            byte = data[i + k]
            if not ((low <= byte <= high) if k == 1 else (0x80 <= byte <= 0xBF)):
                return False
        i += need + 1
    return True


def _ends_inside_a_character(data: bytes) -> bool:
    """Whether valid UTF-8 `data` stops inside a character."""
    tail = data[-3:]
    for back in range(1, len(tail) + 1):
        byte = tail[-back]
        if byte >= 0xC0:  # a lead: does the character need more bytes than are there?
            return back <= next(need for leads, need, _, _ in _UTF8_FORMS if byte in leads)
        if byte < 0x80:
            return False
    return False


_UTF8_FORMS = [  # lead bytes, continuation bytes, the first continuation's range
    (range(0xC2, 0xE0), 1, 0x80, 0xBF),
    ((0xE0,), 2, 0xA0, 0xBF),
    ((*range(0xE1, 0xED), 0xEE, 0xEF), 2, 0x80, 0xBF),
    ((0xED,), 2, 0x80, 0x9F),
    ((0xF0,), 3, 0x90, 0xBF),
    (range(0xF1, 0xF4), 3, 0x80, 0xBF),
    ((0xF4,), 3, 0x80, 0x8F),
]


@dataclass
class Tally:
    """What the walks compared and found."""

    grammars: int = 0
    walks: int = 0
    positions: int = 0  # sampled positions whose whole admitted sets were compared
    lenient: int = 0  # (position, token) pairs llama.cpp admits that make the reply's bytes invalid UTF-8
    lenient_positions: int = 0
    partial: int = 0  # (position, token) pairs ending inside a character that llama.cpp refuses and could
    # complete to an admitted one: its check of a partial character against a negated class (`[^...]`)
    partial_positions: int = 0
    unreadable: list[str] = field(default_factory=list)  # grammars whose reading the trainer gave up on
    disagreements: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"{self.grammars} grammars, {self.walks} walks, {self.positions} positions compared over the whole "
            f"vocabulary; {len(self.disagreements)} disagreements; llama.cpp alone admitted {self.lenient} tokens "
            f"that make the text invalid UTF-8, at {self.lenient_positions} positions; llama.cpp alone refused "
            f"{self.partial} tokens ending inside a character, at {self.partial_positions} positions; the trainer "
            f"gave up on {len(self.unreadable)} walks"
        )


class Agreement:
    """Walks grammars with llama.cpp choosing what may be sampled and holds the trainer's admitted sets
    (`trainers.constrained.AdmittedTokens`) to llama.cpp's at every position of every walk."""

    def __init__(self, oracle: LlamaCppGrammar, tokenizer: Any) -> None:
        from engine.templates import end_of_generation_ids
        from trainers.constrained import AdmittedTokens

        self.oracle = oracle
        self.trainer = AdmittedTokens(tokenizer)
        self.vocab = self.trainer.vocab
        assert self.vocab == oracle.vocab_size
        self.pieces = [self.trainer.lltokenizer.decode_bytes([i]) for i in range(self.vocab)]
        self.ends = set(end_of_generation_ids(tokenizer))
        self.by_piece = {piece: i for i, piece in reversed(list(enumerate(self.pieces))) if piece}
        self.wide = [i for i, piece in enumerate(self.pieces) if any(byte >= 0x80 for byte in piece)]
        self.tally = Tally()
        self._grammars: set[str] = set()

    def walk(
        self, grammar: str, rng: random.Random, target: str = "", longest: int = 96, partial_refusals: bool = False
    ) -> bytes:
        """One reply sampled under `grammar` token by token among what llama.cpp admits and keeps the text
        UTF-8 (what a model writes): along `target`'s bytes in a random tokenisation (byte tokens that split a
        character included) as far as the grammar lets it, then at random (half the time a token holding
        non-ASCII bytes), ending where an end of generation is admitted. Returns the text; every position is
        compared and tallied. `partial_refusals`: whether llama.cpp may refuse, where the trainer admits, a
        token that ends inside a character: its check of a partial character against a negated class refuses
        it when the class excludes any character the partial one could still become (`[^😀]` refuses a lone
        0xF0 byte). No grammar spadework sends has a negated class (`engine.gbnf.for_llama_cpp`)."""
        goal = target.encode()
        text = bytearray()
        finished = False

        def choose(allowed: np.ndarray, position: int) -> int | None:
            nonlocal finished
            if finished or position >= longest:
                return None
            admitted = np.zeros(self.vocab, dtype=bool)
            admitted[allowed] = True
            token = self._along(goal, bytes(text), admitted, rng) if goal[: len(text)] == text else None
            if token is None:
                # A reply ends on whole characters (llama.cpp would end one inside a character too).
                ends = [int(i) for i in allowed if int(i) in self.ends and not _ends_inside_a_character(bytes(text))]
                if ends and (len(text) >= len(goal) or rng.random() < 0.2):
                    token = rng.choice(ends)
                else:
                    token = self._any(bytes(text), allowed, admitted, rng)
            if token is None:
                return None
            finished = token in self.ends
            text.extend(b"" if finished else self.pieces[token])
            return token

        ids, sets = self.oracle.walk(grammar, choose)
        self._compare(grammar, ids, sets, partial_refusals)
        return bytes(text)

    def _along(self, goal: bytes, text: bytes, admitted: np.ndarray, rng: random.Random) -> int | None:
        rest = goal[len(text) :]
        options = [self.by_piece[rest[:n]] for n in range(1, min(len(rest), 24) + 1) if rest[:n] in self.by_piece]
        options = [i for i in options if admitted[i] and valid_utf8_start(text + self.pieces[i])]
        return rng.choice(options) if options else None

    def _any(self, text: bytes, allowed: np.ndarray, admitted: np.ndarray, rng: random.Random) -> int | None:
        if not len(allowed):
            return None  # a dead end: the grammar admits nothing here (a character no text holds)
        for _ in range(64):
            token = rng.choice(self.wide) if rng.random() < 0.5 else int(rng.choice(allowed))
            if admitted[token] and token not in self.ends and valid_utf8_start(text + self.pieces[token]):
                return token
        options = [int(i) for i in allowed if int(i) not in self.ends and valid_utf8_start(text + self.pieces[i])]
        return rng.choice(options) if options else None

    def _compare(self, grammar: str, ids: list[int], llama_sets: list[np.ndarray], partial_refusals: bool) -> None:
        tally = self.tally
        tally.walks += 1
        if grammar not in self._grammars:
            self._grammars.add(grammar)
            tally.grammars += 1
        try:
            restriction = self.trainer.restriction(grammar, ids, [1] * len(ids))
        except GrammarUnreadable as error:  # the row would be left out of training, counted and logged
            tally.unreadable.append(f"{error} under {grammar[:300]!r}")
            return
        restricted = dict(zip(restriction.positions.tolist(), restriction.admitted(self.vocab).numpy(), strict=True))
        text = b""
        for position, allowed in enumerate(llama_sets):
            llama = np.zeros(self.vocab, dtype=bool)
            llama[allowed] = True
            where = f"after {text.decode(errors='backslashreplace')!r} under {grammar[:300]!r}"
            if position in restriction.refused:  # the trainer has no admitted set here, nor after
                tally.disagreements.append(f"the trainer refuses the sampled {self.pieces[ids[position]]!r} {where}")
                break
            trainer = restricted.get(position, np.ones(self.vocab, dtype=bool))
            tally.positions += 1
            lenient = 0
            for token in np.nonzero(llama & ~trainer)[0]:
                if valid_utf8_start(text + self.pieces[token]) and token not in self.ends:
                    tally.disagreements.append(f"llama.cpp admits {self.pieces[token]!r}, the trainer not, {where}")
                else:
                    lenient += 1
            tally.lenient += lenient
            tally.lenient_positions += bool(lenient)
            partial = 0
            for token in np.nonzero(trainer & ~llama)[0]:
                if partial_refusals and _ends_inside_a_character(text + self.pieces[token]):
                    partial += 1
                else:
                    tally.disagreements.append(f"the trainer admits {self.pieces[token]!r}, llama.cpp not, {where}")
            tally.partial += partial
            tally.partial_positions += bool(partial)
            text += b"" if ids[position] in self.ends else self.pieces[ids[position]]
