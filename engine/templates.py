"""Chat templates over token ids, for the `tokens` mode: the engine renders, the server only samples.

`TokenTemplate` turns the opening messages into prompt ids once, and afterwards only ever *appends*: the
ids of the messages that follow a sampled turn (tool results, feedback) plus the next generation prompt.
Earlier turns are never re-rendered, so what the trainer sees is exactly what the model was conditioned
on and what it sampled.

The suffix for new messages comes from rendering a fixed dummy conversation with and without them and
taking the difference (the template's own glue included), so any Hugging Face chat template that renders
tools, tool calls and tool results can be used. `ByteTokenizer` is a tiny byte-level tokenizer with a
ChatML template that renders tools: it needs no download, and the tests and the mock model use it.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from engine.chat_template import CHATML_WITH_TOOLS
from engine.local_models import DEFAULT_MODEL
from engine.messages import Message, OpenAITool

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # transformers warns at import that torch is absent


_HUB_ID = re.compile(r"[\w.-]+/[\w.-]+")
_DUMMY: list[Message] = [{"role": "user", "content": "."}, {"role": "assistant", "content": "."}]


# What llama.cpp counts as end of generation besides the model's EOS (its vocabulary loader, llama-vocab.cpp):
# these texts, and the first fill-in-the-middle pad, repo and file-separator token of each list that the
# vocabulary holds. Its grammar sampler admits them wherever the grammar is complete. For SmolLM2 that is
# <|endoftext|>, <|im_end|> and <reponame> (its FIM repo token): measured on the embedded server, which ended
# a reply on <reponame> about once in 700 stage ends.
END_OF_GENERATION_TEXTS = (
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>", "<|endoftext|>",
    "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>",
)  # fmt: skip
FIM_END_OF_GENERATION_TEXTS = (
    ("<|fim_pad|>", "<fim-pad>", "<fim_pad>"),
    ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
    ("<|file_sep|>",),
)


def end_of_generation_ids(tokenizer: Any) -> set[int]:
    """The ids a llama.cpp server may end a reply with, for this tokenizer (see `END_OF_GENERATION_TEXTS`)."""
    vocabulary: dict[str, int] = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
    ids = {int(tokenizer.eos_token_id), *(vocabulary[text] for text in END_OF_GENERATION_TEXTS if text in vocabulary)}
    for texts in FIM_END_OF_GENERATION_TEXTS:
        first = next((vocabulary[text] for text in texts if text in vocabulary), None)
        if first is not None:
            ids.add(first)
    return ids


class Tokenizer(Protocol):
    """What the engine needs from a Hugging Face tokenizer."""

    eos_token_id: Any

    def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any: ...

    def decode(self, token_ids: Any, **kwargs: Any) -> str: ...

    def encode(self, text: str, **kwargs: Any) -> list[int]: ...


class TokenTemplate:
    """Renders a conversation to ids once, then appends; knows how a sampled turn is closed."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.eos_token_id = int(tokenizer.eos_token_id)
        # Ids a server stops on besides the template's own end of turn (SmolLM2 often ends with <|endoftext|>).
        specials = {int(i) for i in getattr(tokenizer, "all_special_ids", []) or []}
        self.stop_ids = {self.eos_token_id, *specials, *end_of_generation_ids(tokenizer)}
        with_prompt = self._ids(_DUMMY[:1], add_generation_prompt=True)
        whole = self._ids(_DUMMY, add_generation_prompt=False)
        content = self._ids_of_text(".")
        # What the template writes after an assistant message's content: e.g. `<|im_end|>` and a newline.
        after = whole[len(with_prompt) :]
        if after[: len(content)] != content:
            raise ValueError("the chat template does not render an assistant message as prompt + content + closing")
        self.closing = after[len(content) :]

    def _ids(self, messages: list[Message], add_generation_prompt: bool, **kwargs: Any) -> list[int]:
        rendered = self.tokenizer.apply_chat_template(
            messages, tokenize=True, add_generation_prompt=add_generation_prompt, return_dict=False, **kwargs
        )
        return [int(token) for token in rendered]

    def _ids_of_text(self, text: str) -> list[int]:
        return [int(token) for token in self.tokenizer.encode(text, add_special_tokens=False)]

    def opening(self, messages: list[Message], tools: list[OpenAITool]) -> list[int]:
        """The first prompt: system, tools and task, ending with the generation prompt."""
        return self._ids(messages, add_generation_prompt=True, tools=tools)

    def continuation(self, sampled: list[int], truncated: bool, messages: list[Message]) -> list[int]:
        """Ids to append after a sampled turn: the rest of its closing, `messages`, the next generation prompt."""
        closing = self.closing
        if not truncated:
            # The model normally samples the closing's first token (its stop token) itself.
            for size in range(len(closing), 0, -1):
                if sampled[-size:] == closing[:size]:
                    closing = closing[size:]
                    break
        base = self._ids(_DUMMY, add_generation_prompt=False)
        extended = self._ids([*_DUMMY, *messages], add_generation_prompt=True)
        if extended[: len(base)] != base:
            raise ValueError("the chat template is not prefix-preserving: appending messages changed earlier ids")
        return [*closing, *extended[len(base) :]]

    def reply_text(self, sampled: list[int]) -> str:
        """The sampled turn as text, without its stop token."""
        ids = sampled[:-1] if sampled and sampled[-1] in self.stop_ids else sampled
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def render(self, messages: list[Message], tools: list[OpenAITool]) -> list[int]:
        """The whole conversation rendered at once: only to compare with the ids the engine held."""
        waiting_for_model = bool(messages) and messages[-1]["role"] != "assistant"
        return self._ids(messages, add_generation_prompt=waiting_for_model, tools=tools)


def byte_tokenizer() -> Any:
    """A byte-level tokenizer (256 byte tokens + ChatML specials) with a template that renders tools."""
    from tokenizers import Tokenizer as RawTokenizer
    from tokenizers import decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {symbol: index for index, symbol in enumerate(sorted(alphabet))}
    raw = RawTokenizer(models.BPE(vocab=vocab, merges=[]))
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    raw.decoder = decoders.ByteLevel()
    raw.add_special_tokens(["<|im_start|>", "<|im_end|>", "<|endoftext|>"])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.chat_template = CHATML_WITH_TOOLS
    return tokenizer


@lru_cache(maxsize=8)
def load_template(spec: str) -> TokenTemplate:
    """`bytes` (the built-in byte tokenizer), `default` or a .gguf file (that model's tokenizer, with the
    tool-aware template the embedded server uses), a local Hugging Face tokenizer directory, or a hub id
    (`Qwen/Qwen3-4B-Instruct-2507`: from the local cache, else downloaded)."""
    if spec == "bytes":
        return TokenTemplate(byte_tokenizer())
    if spec == DEFAULT_MODEL or spec.endswith(".gguf"):
        from engine.local_models import resolve_gguf, tokenizer_dir

        spec = str(tokenizer_dir(resolve_gguf(spec)))
    from transformers import AutoTokenizer

    if not Path(spec).exists() and not _HUB_ID.fullmatch(spec):
        raise ValueError(
            f"no tokenizer at {spec!r}: give a local Hugging Face tokenizer directory, a hub id, a .gguf file, "
            "'default' or 'bytes'"
        )
    try:
        tokenizer: Tokenizer = AutoTokenizer.from_pretrained(spec)
    except OSError as error:  # a hub id neither cached nor reachable
        raise ValueError(f"no tokenizer for {spec!r}: {error}") from None
    return TokenTemplate(tokenizer)
