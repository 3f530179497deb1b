"""Score grammar-sampled tokens under the policy that sampled them: the model restricted to the grammar.

llama.cpp samples a reply under a grammar from the model's distribution restricted to the tokens the grammar
admits at that point, renormalised: q(t) = p(t) / Z, Z the admitted tokens' mass (its sampler draws from p,
keeps an admitted token, and otherwise redraws from the admitted ones, which comes to exactly that). The
exact log-probability of what was sampled is log p(t) - log Z, and the policy gradient needs the gradient of
both terms: leaving log Z out pushes up forced tokens (a `{"name": ` the grammar fixes) and tilts every choice
towards tokens the grammar would have refused anyway.

`AdmittedTokens` rebuilds each sampled token's admitted set from the grammar the engine recorded
(`TokenTrace.grammar`) and the ids, with llguidance, under llama.cpp's rules: a token is admitted when its
text continues the grammar, whatever tokenisation it makes (llguidance's canonical forcing is off), a special
token is read as its text (llama.cpp's grammar sees `<|im_start|>` as those 12 characters), and an
end-of-generation token only where the grammar is complete, which never precedes a sampled token here.
A grammar in llguidance's own syntax (`%llguidance ...`, what llama.cpp builds from a JSON schema and runs
through its llguidance sampler) is rebuilt as it is, with llguidance's own rules on both sides.
vLLM (`GrammarSampler` "vllm") masks the logits with xgrammar before its sampler. xgrammar reads a GBNF
grammar as llama.cpp does, special tokens as their text, except that only the EOS ends a complete grammar, so
<|endoftext|> and <reponame> are text to it (compared token set for token set with xgrammar 0.2.8 on 544
positions of tokens-mode replies: identical; under llama.cpp's rules 175 positions differed, and the trainer's
logprobs were up to 0.02 from vLLM's).

`restricted_logps` (spadework's `GRPOTrainer`, trainers/trl_trainer.py, scores rows with it) subtracts
log Z, computed from the same forward pass, at every such token; tokens whose admitted set is the whole
vocabulary are left as they are (Z is 1).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import structlog

from engine.gbnf import GrammarUnreadable, to_lark
from engine.templates import end_of_generation_ids
from engine.trajectory import SampledSpan
from trainers.config import GrammarSampler
from trainers.rows import TrainingRow, padding_row

log = structlog.get_logger(__name__)


@dataclass
class Restriction:
    """One row's restricted tokens: completion positions and, per position, the admitted ids as a bitmask."""

    positions: np.ndarray  # int64, indices into the row's completion ids
    bitmasks: np.ndarray  # uint32 [positions, ceil(vocab / 32)], llguidance's layout: bit i % 32 of word i // 32
    refused: list[int] = field(default_factory=list)  # sampled tokens the rebuilt grammar refused (their
    # reply is left unrestricted from there on): the sampler and the trainer disagreed on the grammar

    def admitted(self, vocab: int) -> Any:
        """The admitted sets as a torch bool tensor [positions, vocab]."""
        import torch

        bits = np.unpackbits(self.bitmasks.view(np.uint8), axis=1, bitorder="little")[:, :vocab]
        return torch.from_numpy(bits.astype(bool))


class AdmittedTokens:
    """The tokens a grammar admits after each prefix of a reply, for one tokenizer (built once, ~0.4 s)."""

    def __init__(self, tokenizer: Any, sampler: GrammarSampler = "llama.cpp") -> None:
        import llguidance.hf

        self.tokenizer = tokenizer
        self.sampler = sampler
        self.lltokenizer = llguidance.hf.from_tokenizer(tokenizer)
        self.vocab = self.lltokenizer.vocab_size
        # What ends a complete grammar: llama.cpp's grammar sampler admits every end-of-generation token there,
        # vLLM's xgrammar only the request's stop tokens (the EOS).
        end = end_of_generation_ids(tokenizer) if sampler == "llama.cpp" else {tokenizer.eos_token_id}
        self._end_ids = sorted(end)
        self._ends = frozenset(end)
        # How the sampler's grammar reads a token other than by its bytes: a special token that does not end
        # generation as its text (both); under llama.cpp also a token holding a NUL as the bytes before it
        # (it reads each token's text as a C string), and a token that starts with a NUL as nothing it admits.
        self._read_as: dict[int, list[int]] = {}
        self._never: list[int] = []
        decoder = getattr(tokenizer, "added_tokens_decoder", {}) or {}
        for token_id, added in decoder.items():
            if getattr(added, "special", False) and token_id not in end:
                self._read_as[token_id] = self._byte_ids(added.content.encode())
        for token_id in range(self.vocab if sampler == "llama.cpp" else 0):
            text = self.lltokenizer.decode_bytes([token_id])
            if token_id in end or token_id in self._read_as:
                continue
            if not text or text.startswith(b"\x00"):
                self._never.append(token_id)
            elif b"\x00" in text:
                self._read_as[token_id] = self._byte_ids(text[: text.index(b"\x00")])
        self._compiled = lru_cache(maxsize=64)(self._compile)

    def _byte_ids(self, text: bytes) -> list[int]:
        """`text` as single-byte token ids (how llguidance is told text that no one token of it carries)."""
        return [i for byte in text for i in self.lltokenizer.tokenize_bytes(bytes([byte]))]

    def _compile(self, grammar: str) -> str:
        from llguidance import LLMatcher

        lark = grammar if _is_llguidance(grammar) else to_lark(grammar)
        try:
            return LLMatcher.grammar_from_lark(lark)
        except Exception as error:  # llguidance raises plain exceptions for grammars it cannot read
            raise GrammarUnreadable(f"llguidance refuses the grammar: {error}") from error

    def restriction(
        self, grammar: str, completion_ids: list[int], env_mask: list[int], spans: Sequence[SampledSpan] = ()
    ) -> Restriction:
        """The admitted sets of every sampled token of a row whose replies (runs of env_mask 1) were each
        sampled under `grammar` from the reply's start, or, given `spans`, whose sampled spans were each drawn
        under their own grammar from the span's start. Positions where everything is admitted are left out."""
        from llguidance import LLMatcher

        starts = _grammar_starts(grammar, env_mask, spans)
        positions: list[int] = []
        masks: list[np.ndarray] = []
        refused_at: list[int] = []
        matcher: Any = None
        gbnf = False  # llama.cpp's own grammar engine, whose rules differ a little from llguidance's
        for index, (token, sampled) in enumerate(zip(completion_ids, env_mask, strict=True)):
            if not sampled:
                matcher = None  # the next sampled token starts a new reply
                continue
            if index in starts:
                matcher = LLMatcher(self.lltokenizer, self._compiled(starts[index]), limits=_limits())
                gbnf = not _is_llguidance(starts[index])
                if matcher.is_error():
                    raise GrammarUnreadable(f"llguidance cannot start the grammar: {matcher.get_error()}")
            if matcher is None:
                continue  # unrestricted: no grammar, or an earlier token of this span was refused
            mask = np.frombuffer(matcher.compute_bitmask(), dtype=np.uint32).copy()
            if matcher.is_error():  # its parser's limits: llguidance stops rather than answer wrong
                raise GrammarUnreadable(f"llguidance gave up at completion position {index}: {matcher.get_error()}")
            if gbnf:
                self._as_the_sampler_reads(matcher, mask)
            if not _has(mask, token):
                refused_at.append(index)
                matcher = None  # the rest of this span stays unrestricted
                continue
            if _count(mask, self.vocab) < self.vocab:
                positions.append(index)
                masks.append(mask)
            if token in self._ends:
                matcher = None  # the reply ended here
                continue
            matcher.consume_tokens(self._read_as.get(token, [token]) if gbnf else [token])
        if refused_at:
            log.warning("grammar_disagreement", tokens=[completion_ids[i] for i in refused_at], at=refused_at)
        words = (self.vocab + 31) // 32
        return Restriction(
            positions=np.asarray(positions, dtype=np.int64),
            bitmasks=np.stack(masks) if masks else np.zeros((0, words), dtype=np.uint32),
            refused=refused_at,
        )

    def forced(
        self, grammar: str, completion_ids: list[int], env_mask: list[int], spans: Sequence[SampledSpan] = ()
    ) -> list[bool]:
        """Per sampled token (env_mask 1, in order): whether its bytes were forced by the grammar, i.e. the only
        text the grammar allowed there starts with them. Such a token is no choice of the model's, yet the
        sampler spends a decoding step on it: the share of them is what skipping forced text would save."""
        from llguidance import LLMatcher

        starts = _grammar_starts(grammar, env_mask, spans)
        flags: list[bool] = []
        matcher: Any = None
        gbnf = False
        for index, (token, sampled) in enumerate(zip(completion_ids, env_mask, strict=True)):
            if not sampled:
                matcher = None  # the next sampled token starts a new reply
                continue
            if index in starts:
                matcher = LLMatcher(self.lltokenizer, self._compiled(starts[index]), limits=_limits())
                gbnf = not _is_llguidance(starts[index])
            ahead = matcher.compute_ff_bytes() if matcher is not None and not matcher.is_error() else b""
            text = self.lltokenizer.decode_bytes([token])
            flags.append(bool(ahead and text and ahead.startswith(text)))
            if matcher is not None:
                matcher.consume_tokens(self._read_as.get(token, [token]) if gbnf else [token])
        return flags

    def _as_the_sampler_reads(self, matcher: Any, mask: np.ndarray) -> None:
        """Where the sampler's grammar (llama.cpp's, or vLLM's xgrammar) reads tokens otherwise than llguidance:
        tokens read as other text (special tokens; NULs under llama.cpp), tokens never admitted, and the tokens
        that end a complete grammar (llama.cpp: every end-of-generation token; xgrammar: the EOS)."""
        for token_id, text_ids in self._read_as.items():
            if matcher.validate_tokens(text_ids) == len(text_ids):
                _set(mask, token_id)
            else:
                _clear(mask, token_id)
        for token_id in self._never:
            _clear(mask, token_id)
        if matcher.is_accepting():
            for token_id in self._end_ids:
                _set(mask, token_id)


@lru_cache(maxsize=1)
def _limits() -> Any:
    """llguidance's parser limits, raised for the trainer, which has time to spare: a recursive grammar is
    read one character a lexeme, and at the default 50,000 Earley items a step its parser gave up on
    ambiguous ones llama.cpp samples under (`engine.gbnf`)."""
    from llguidance import LLParserLimits

    return LLParserLimits(step_max_items=1_000_000, max_items_in_row=20_000)


def _grammar_starts(grammar: str, env_mask: list[int], spans: Sequence[SampledSpan]) -> dict[int, str]:
    """Where a grammar starts, and which: each span's own, or else `grammar` at the start of every reply."""
    if spans:
        return {span.start: span.grammar for span in spans}
    if not grammar:
        return {}
    return {i: grammar for i, sampled in enumerate(env_mask) if sampled and (i == 0 or not env_mask[i - 1])}


def _is_llguidance(grammar: str) -> bool:
    return grammar.lstrip().startswith("%llguidance")


def _has(mask: np.ndarray, token: int) -> bool:
    return bool((int(mask[token // 32]) >> (token % 32)) & 1)


def _set(mask: np.ndarray, token: int) -> None:
    mask[token // 32] |= np.uint32(1 << (token % 32))


def _clear(mask: np.ndarray, token: int) -> None:
    mask[token // 32] &= np.uint32(~(1 << (token % 32)) & 0xFFFFFFFF)


def _count(mask: np.ndarray, vocab: int) -> int:
    return int(np.unpackbits(mask.view(np.uint8), bitorder="little")[:vocab].sum())


class GrammarRestrictions:
    """The restrictions of the rows of the batch being trained, found again by their ids inside TRL."""

    UNREADABLE = "grammar the trainer cannot read"
    DISAGREES = "sampled tokens the trainer's reading of the grammar refuses"
    CLASH = "the same token ids as another row of the batch under another grammar"  # TRL's hook finds rows by ids

    def __init__(self, tokenizer: Any, sampler: GrammarSampler = "llama.cpp") -> None:
        self.tokenizer = tokenizer
        self.sampler = sampler
        self._admitted: AdmittedTokens | None = None  # built with the first row that has a grammar
        self._rows: dict[tuple[tuple[int, ...], tuple[int, ...]], Restriction] = {}
        self._readings: dict[tuple[tuple[int, ...], tuple[int, ...]], Any] = {}  # the grammars each was built from
        self.left_out: Counter[str] = Counter()  # the newest batch's rows left out, by cause
        self.left_out_tokens = 0  # and their prompt and completion tokens

    def prepare(self, rows: list[TrainingRow]) -> list[TrainingRow]:
        """Rebuild the admitted sets of a new batch (the previous batch's are dropped); returns the batch to
        train. A row whose grammar the trainer cannot read, or whose sampled tokens its reading refuses (it
        would score them under a policy other than the sampler's), costs only itself: it is left out, replaced
        by a padding row with nothing in the loss, counted in `left_out` and logged with its cause."""
        self._rows, self._readings, self.left_out, self.left_out_tokens = {}, {}, Counter(), 0
        batch = []
        for row in rows:
            problem = self._restrict(row) if row.grammar or row.spans else None
            if problem is not None:
                cause, detail = problem
                self.left_out[cause] += 1
                self.left_out_tokens += len(row.prompt_ids) + len(row.completion_ids)
                log.warning("row_left_out", cause=cause, detail=detail, group=row.group)
                row = padding_row(row)
            batch.append(row)
        return batch

    def _restrict(self, row: TrainingRow) -> tuple[str, str] | None:
        """Build `row`'s restriction; the cause and detail of why it cannot be, or None."""
        key = (tuple(row.prompt_ids), tuple(row.completion_ids))
        reading = (row.grammar, tuple((span.start, span.grammar) for span in row.spans))
        if key in self._rows:
            return None if self._readings[key] == reading else (self.CLASH, f"{len(row.completion_ids)} ids")
        if self._admitted is None:
            self._admitted = AdmittedTokens(self.tokenizer, self.sampler)
        try:
            restriction = self._admitted.restriction(row.grammar, row.completion_ids, row.env_mask, row.spans)
        except GrammarUnreadable as error:
            return self.UNREADABLE, str(error)
        if restriction.refused:
            at = restriction.refused[0]
            return self.DISAGREES, f"token {row.completion_ids[at]} at completion position {at}"
        self._rows[key], self._readings[key] = restriction, reading
        return None

    def find(self, prompt_ids: list[int], completion_ids: list[int]) -> Restriction | None:
        return self._rows.get((tuple(prompt_ids), tuple(completion_ids)))


def restricted_logps(restrictions: GrammarRestrictions, trainer: Any, forward: Any, model: Any, input_ids: Any,
                     attention_mask: Any, logits_to_keep: int, *args: Any, **kwargs: Any) -> Any:  # fmt: skip
    """TRL's per-token log-probabilities (`forward`, a `GRPOTrainer`'s own) with each restricted token scored as
    log p(t) - log Z.

    `forward` computes them with its fused LM head (log p over the whole vocabulary); the final hidden states
    of the same forward pass are caught on the way and projected once more at the restricted positions only,
    for log Z = logsumexp over the admitted logits minus logsumexp over all. Gradients flow through both. The
    projection runs inside the forward (in the hook), where a sharded policy's head is gathered: after it,
    under FSDP2, the head is a shard again, and projecting with it would start a collective on this process
    alone."""
    import torch

    prompt_length = input_ids.size(1) - logits_to_keep
    found = []
    for row in range(input_ids.size(0)):
        kept = attention_mask[row].bool()
        prompt = input_ids[row, :prompt_length][kept[:prompt_length]].tolist()
        completion = input_ids[row, prompt_length:][kept[prompt_length:]].tolist()
        found.append(restrictions.find(prompt, completion))
    if not any(r is not None and len(r.positions) for r in found):
        return forward(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)
    causal_lm = causal_lm_of(trainer.accelerator.unwrap_model(model))
    head = causal_lm.get_output_embeddings()
    temperature = float(trainer.temperature)
    masses: list[tuple[int, Any, Any]] = []  # row, positions, log Z there
    rows_seen = [0]  # TRL may run the rows in several forward passes

    def project(module: Any, inputs: Any, output: Any) -> None:
        hidden = output.last_hidden_state
        for local in range(hidden.size(0)):
            restriction = found[rows_seen[0] + local]
            if restriction is None or not len(restriction.positions):
                continue
            # Completion position j is predicted by the hidden state before it; the completion starts after
            # the (left-padded) prompt.
            positions = torch.from_numpy(restriction.positions)
            logits = head(hidden[local, prompt_length + positions - 1]).float() / temperature
            admitted = restriction.admitted(logits.size(-1)).to(logits.device)
            mass = logits.masked_fill(~admitted, float("-inf")).logsumexp(-1) - logits.logsumexp(-1)
            masses.append((rows_seen[0] + local, positions, mass))
        rows_seen[0] += hidden.size(0)

    hook = causal_lm.base_model.register_forward_hook(project)
    try:
        logps, *rest = forward(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)
    finally:
        hook.remove()
    log_z = torch.zeros_like(logps)
    for row, positions, mass in masses:
        log_z = log_z.index_put((torch.full_like(positions, row), positions), mass.to(logps.dtype))
    return (logps - log_z, *rest)


def causal_lm_of(model: Any) -> Any:
    """The transformers causal LM inside a PEFT wrapper, if any."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def check_plain_head(causal_lm: Any) -> None:
    """log Z is computed as lm_head(h) / T: models whose head scales or caps logits would need more."""
    config = causal_lm.config.get_text_config()
    for name in ("final_logit_softcapping", "logit_scale", "output_multiplier", "lm_head_multiplier", "logits_scaling"):
        if getattr(config, name, None) not in (None, 1, 1.0):
            raise ValueError(f"grammar-restricted logprobs assume an unscaled LM head; this model sets {name}")
