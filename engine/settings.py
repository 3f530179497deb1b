"""How episodes talk to the model and when they stop: part of a run's plan, so a resume plays the same way."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from engine.gbnf import for_llama_cpp

Mode = Literal["chat", "constrained", "tokens"]
Completions = Literal["openai", "llama.cpp"]
Calls = Literal["lenient", "native"]


class EpisodeSettings(BaseModel):
    """How episodes talk to the model and when they stop."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Mode = "chat"
    model: str = "default"
    max_turns: int = 30
    max_tokens_per_turn: int = 512
    max_episode_tokens: int | None = Field(
        None,
        description="Tokens one episode may hold: it ends (truncated, scored on its state) before a turn of "
        "`max_tokens_per_turn` could take it past this. Set it to the server's context per request, so an episode "
        "that fills the context is an outcome, not a refused request.",
    )
    temperature: float = 1.0
    request_timeout_s: float = 120.0
    episode_timeout_s: float = 1800.0
    token_ids: bool = False
    tokenizer: str | None = None
    extra_body: dict[str, Any] = Field(default_factory=dict)
    completions: Completions = Field(
        "openai",
        description="tokens mode: the completions API. `openai`: `/completions` under the base URL (vLLM returns "
        "the sampled ids with `return_token_ids`); `llama.cpp`: llama.cpp's own `/completion` at the server's root, "
        "the one llama.cpp API that returns every sampled id (its OpenAI API reports a character split across "
        "tokens as one entry, losing ids).",
    )
    call_schema: bool = Field(
        False,
        description="tokens mode: every reply is one compact call of an offered tool (or finish), sampled under a "
        "llama.cpp grammar of their schemas (`engine.call_grammar`).",
    )
    grammar: str | None = Field(
        None,
        description="tokens mode: every reply is sampled under this llama.cpp grammar (GBNF, or llguidance's lark "
        "after `%llguidance`), recorded with the trace so a trainer can score the restricted policy. GBNF is read "
        "as llama.cpp reads it and kept as `engine.gbnf.for_llama_cpp` writes it back (every class as the ranges "
        "it allows); one llama.cpp would refuse is refused here, with the reason and the place.",
    )

    calls: Calls = Field(
        "lenient",
        description="chat mode: how a reply's calls are read. `lenient`: native `tool_calls`, else calls written as "
        "text in any common protocol, and empty arguments as `{}` (a model learning to call tools gets credit for "
        "what it meant). `native`: OpenAI's function-calling protocol exactly as bfcl-eval's FC handlers read it: "
        "only `tool_calls` are calls, a reply without them is text, and arguments must be a JSON object.",
    )

    @field_validator("grammar")
    @classmethod
    def _as_llama_cpp_reads_it(cls, grammar: str | None) -> str | None:
        return None if grammar is None else for_llama_cpp(grammar)  # GrammarUnreadable is a ValueError

    @model_validator(mode="after")
    def _tokens_mode_needs_a_tokenizer(self) -> EpisodeSettings:
        if self.calls == "native" and self.mode != "chat":
            raise ValueError("calls='native' reads chat replies' tool_calls; it needs mode='chat'")
        if self.mode == "tokens" and not self.tokenizer:
            raise ValueError("tokens mode renders prompts itself: give a tokenizer (a local directory, or 'bytes')")
        if self.call_schema and self.mode != "tokens":
            raise ValueError("call_schema constrains tokens-mode sampling; constrained mode does it for chat requests")
        if self.grammar is not None and (self.mode != "tokens" or self.call_schema):
            raise ValueError("grammar constrains tokens-mode sampling, and not together with call_schema")
        return self
