"""What one finished episode leaves behind: the record trainers read, and its token-exact trace.

A record is written once, when its episode ends, and never changed. Its `status` says whether it can
train anything: `ok` (the agent finished), `truncated` (a turn, step or token limit ended it; the reward
is the score of the state it reached) or `infra_error` (the endpoint, the network or the world's own code
failed; `cause` says which). Infra errors carry no reward and must be left out of training groups, not
scored 0.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Status = Literal["ok", "truncated", "infra_error"]
Role = Literal["agent", "designer"]
Caller = Literal["agent", "designer", "user", "judge"]  # who asks the model: a role, or a benchmark's other parties
EPISODE_HEADER = "X-Spadework-Episode"


class EpisodeKey(BaseModel):
    """Which episode this is; the same key is never run twice within a run (resume relies on it). Every
    request an episode makes carries it (`header`), so a scripted server (and a log) knows who asks."""

    world: str
    seed: int
    sample: int = 0
    hinted: bool = False
    role: Caller = "agent"

    @property
    def text(self) -> str:
        return f"{self.role}/{self.world}/{self.seed}/{'hinted' if self.hinted else 'plain'}/{self.sample}"

    def header(self, run: str) -> dict[str, str]:
        """`X-Spadework-Episode: run/role/world/seed/hinted/sample` (a run name holds no slash)."""
        return {EPISODE_HEADER: f"{run}/{self.text}"}

    @classmethod
    def from_header(cls, value: str) -> tuple[str, EpisodeKey]:
        """The run and the key a header names; the world (a file path, maybe) keeps its slashes. A ValueError
        says what is wrong with it."""
        head = value.split("/", 2)
        tail = head[2].rsplit("/", 3) if len(head) == 3 else []
        if len(tail) != 4:
            raise ValueError(f"{EPISODE_HEADER} {value!r} is not run/role/world/seed/hinted/sample")
        run, role = head[:2]
        world, seed, hinted, sample = tail
        if hinted not in ("hinted", "plain") or not seed.isdigit() or not sample.isdigit():
            raise ValueError(f"{EPISODE_HEADER} {value!r}: seed and sample are numbers, hinted is hinted or plain")
        key = cls.model_validate({"world": world, "seed": int(seed), "sample": int(sample),
                                  "hinted": hinted == "hinted", "role": role})  # fmt: skip
        return run, key


class Turn(BaseModel):
    """One model call and what the engine did with the reply."""

    index: int
    endpoint: str
    started_s: float = Field(description="Seconds since the episode started.")
    latency_s: float = Field(description="Wall time of the request, retries included.")
    attempts: int
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tool_calls: int = 0
    problems: list[str] = Field(default_factory=list, description="Why (part of) the reply could not be used.")
    env_s: float = Field(default=0.0, description="Time spent in the world's tools for this turn.")


class DriftEvent(BaseModel):
    """A turn whose ids the engine could not hold exactly: its prompt did not extend the held ids (the server
    re-rendered history), or the server returned fewer ids than it sampled."""

    turn: int
    position: int = Field(description="Index of the first id that differs from the held sequence.")


class SampledSpan(BaseModel):
    """Where a run of sampled tokens starts (an index into `completion_ids`) and the grammar it was drawn under."""

    start: int
    grammar: str


class TokenTrace(BaseModel):
    """The whole episode as one id sequence: the first prompt, then everything after it.

    `completion_ids` holds sampled ids (mask 1, with their logprobs) and the ids of the tool results and
    template glue between turns (mask 0, logprob 0.0). Built only from ids a server returned, never by
    re-tokenising text; a turn whose prompt does not extend what is held is recorded as drift and the
    trace is no longer `exact`.
    """

    prompt_ids: list[int] = Field(default_factory=list)
    completion_ids: list[int] = Field(default_factory=list)
    loss_mask: list[int] = Field(default_factory=list)
    logprobs: list[float | None] = Field(default_factory=list)  # None: the server did not report it
    drift: list[DriftEvent] = Field(default_factory=list)
    grammar: str = Field(
        default="",
        description="the GBNF grammar each sampled reply (each run of loss-mask 1) was drawn under, from its start "
        "(tokens mode with call_schema): the trainer needs it to score the restricted policy that sampled",
    )
    spans: list[SampledSpan] = Field(
        default_factory=list,
        description="a reply sampled in stages (a staged spec designer's): each stage's first id and the GBNF "
        "grammar it was drawn under from there, to the next span or the end of its run of loss-mask 1",
    )
    rerender_matches: bool | None = Field(
        default=None,
        description="tokens mode: whether rendering the whole conversation at once gives the held ids "
        "(False means the template or tokenizer is not prefix-preserving; the held ids are still what was sampled)",
    )

    @property
    def exact(self) -> bool:
        """Whether the held ids are what the model was conditioned on and sampled. A one-shot re-rendering
        that differs (`rerender_matches` False, e.g. the model sampled a tokenisation that is not the
        canonical one) does not change that; only a server that re-rendered history (`drift`) does."""
        return not self.drift

    def add_turn(self, turn: int, prompt_ids: list[int], sampled_ids: list[int], logprobs: list[float | None]) -> None:
        if turn == 0 or not self.prompt_ids:
            self.prompt_ids = list(prompt_ids)
        else:
            held = self.prompt_ids + self.completion_ids
            mismatch = _first_difference(held, prompt_ids)
            if mismatch is not None:
                self.drift.append(DriftEvent(turn=turn, position=mismatch))
                return
            extension = prompt_ids[len(held) :]
            self.completion_ids.extend(extension)
            self.loss_mask.extend([0] * len(extension))
            self.logprobs.extend([0.0] * len(extension))
        if len(logprobs) != len(sampled_ids):
            logprobs = [None] * len(sampled_ids)
        self.completion_ids.extend(sampled_ids)
        self.loss_mask.extend([1] * len(sampled_ids))
        self.logprobs.extend(logprobs)


def _first_difference(held: list[int], prompt: list[int]) -> int | None:
    """Where `prompt` stops extending `held`, or None when `held` is a prefix of it."""
    if prompt[: len(held)] == held:
        return None
    for position, (a, b) in enumerate(zip(held, prompt, strict=False)):
        if a != b:
            return position
    return len(prompt)


class EpisodeRecord(BaseModel):
    """One finished episode, as stored (one JSON line) and as trainers read it."""

    run: str
    key: EpisodeKey
    mode: str
    model: str
    status: Status
    cause: str | None = Field(
        default=None, description="For infra_error and truncated: a short label of what ended it."
    )
    detail: str | None = Field(default=None, description="For infra_error: the error itself.")
    reward: float | None = Field(default=None, description="The episode's return (= its score); None on infra_error.")
    scorecard: str | None = None
    messages: list[dict[str, Any]]
    turns: list[Turn]
    tool_calls: int = 0
    malformed_turns: int = 0
    tokens: TokenTrace | None = None
    started_at: float = Field(description="Unix time the episode started.")
    duration_s: float
