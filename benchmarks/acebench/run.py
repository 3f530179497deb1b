"""An ACEBench Agent run: tasks played by a model through the engine (`benchmarks.playing`), then scored as the
benchmark scores them: end-state and process accuracy per language and kind, and the agent score per language
(the mean of its multi_turn and multi_step end-state accuracies), as `results.json` and a Markdown table beside
the published anchors.

Every task has a fixed seed, its place in the data folder's tasks (en before zh, multi_turn before multi_step),
so `--languages`, `--kinds`, `--limit` and `--ids` only choose keys and a resumed run may choose more. A task
that failed for infrastructure reasons (no answer from the agent's or the user's endpoint) counts as wrong.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from benchmarks.acebench.checker import AceScore, TaskScore, agent_score
from benchmarks.acebench.data import AceTask
from benchmarks.acebench.environment import WORLD, AceConversation, Protocol
from benchmarks.acebench.prompts import MAX_MESSAGES, USER_SAMPLING
from benchmarks.parties import Party
from benchmarks.playing import BenchPlan, play_keys
from engine.endpoints import EndpointPool
from engine.environments import Environment
from engine.trajectory import EpisodeRecord

# Published ACEBench Agent scores (%, the mean end-state accuracy of multi_turn and multi_step), EN and ZH: the
# official leaderboard (chenchen0103/ACEBench docs/script.js, 2025-10), gpt-4o playing the user.
ANCHORS = {
    "GPT-4o": (56.0, 71.5),
    "Qwen2.5-72B-Instruct": (37.5, 52.5),
    "GPT-4o-mini": (27.5, 39.0),
    "Qwen2.5-7B-Instruct": (15.0, 12.5),
    "Llama-3.1-8B-Instruct": (6.5, 4.0),
    "Llama-3.2-3B-Instruct": (0.0, 0.0),
}
COMPARABILITY = {
    "prompt": "`prompt` is the benchmark's own protocol (its prompts, history format, call syntax and routing), "
    "comparable to the anchors when all 50 tasks of a language are played and the same model plays the user "
    "(the anchors' user is gpt-4o).",
    "fc": "`fc` is native tool calling, a protocol of spadework's: not comparable to the leaderboard.",
}


AGREEMENT_FILE = Path(__file__).with_name("agreement.json")


def agreement(protocol: str) -> dict[str, object] | None:
    """The last per-task comparison of this protocol with the reference pipeline on imperfect play
    (`tests/benchmarks/test_acebench_differential.py` checks it is still true); None for one never compared."""
    recorded: dict[str, dict[str, object]] = json.loads(AGREEMENT_FILE.read_text())
    return recorded.get(protocol)


class UnknownTask(ValueError):
    """An id that no chosen language holds; the message names it."""


class AceRun(BenchPlan):
    benchmark: Literal["acebench-agent"] = "acebench-agent"
    protocol: Protocol
    data: str  # the data folder the tasks came from
    user_model: str
    user_endpoint: str
    max_messages: int = MAX_MESSAGES


def choose(tasks: list[AceTask], languages: Sequence[str], kinds: Sequence[str], limit: int | None,
           ids: list[str] | None) -> list[int]:  # fmt: skip
    """Seeds (places in `tasks`) of the given ids (`agent_multi_turn_0` in every chosen language, or
    `en/agent_multi_turn_0`), else of the first `limit` tasks of each chosen language and kind."""
    if ids:
        seeds = [seed for seed, task in enumerate(tasks) if task.language in languages
                 and (task.id in ids or task.key in ids)]  # fmt: skip
        found = {tasks[seed].id for seed in seeds} | {tasks[seed].key for seed in seeds}
        unknown = [name for name in ids if name not in found]
        if unknown:
            raise UnknownTask(f"no ACEBench Agent task {', '.join(unknown)} (ids look like agent_multi_turn_0)")
        return seeds
    seeds = []
    for language in languages:
        for kind in kinds:
            split = [seed for seed, task in enumerate(tasks) if (task.language, task.kind) == (language, kind)]
            seeds += split[:limit]
    return seeds


@dataclass(frozen=True)
class AceSummary:
    score: AceScore
    seconds: float
    model: str
    protocol: str
    endpoint: str
    user_model: str
    user_endpoint: str
    infra_errors: int
    temperature: float
    max_tokens: int  # per agent reply
    max_messages: int

    @property
    def label(self) -> str:
        return f"{self.model} ({self.protocol})"


def run_acebench(out: Path, spec: AceRun, tasks: list[AceTask], urls: list[str], user_urls: list[str] | None,
                 seeds: list[int], concurrency: int, progress: bool = True) -> AceSummary:  # fmt: skip
    """Play `seeds` of `tasks` (read from `spec.data`; resuming `out`) with the agent behind `urls` and the user
    simulator behind `user_urls` (None: the agent's own endpoints, through the same pool), then score and write
    the results."""

    @asynccontextmanager
    async def conversations(pool: EndpointPool) -> AsyncIterator[Callable[[], Environment]]:
        async with AsyncExitStack() as stack:
            users = pool if user_urls is None else await stack.enter_async_context(EndpointPool.open(user_urls))
            timeout = spec.settings.request_timeout_s
            simulator = Party(users, spec.user_model, spec.run, WORLD, "user", timeout, USER_SAMPLING)
            yield lambda: AceConversation(tasks, spec.protocol, simulator, spec.max_messages)

    played = play_keys(out, spec, WORLD, seeds, urls, conversations, concurrency, progress)
    scores = [_task_score(tasks[seed], record) for seed, record in sorted(played.records.items())]
    summary = AceSummary(
        score=agent_score(scores),
        seconds=round(played.seconds, 3),
        model=spec.settings.model,
        protocol=spec.protocol,
        endpoint=spec.endpoint,
        user_model=spec.user_model,
        user_endpoint=spec.user_endpoint,
        infra_errors=sum(record.status == "infra_error" for record in played.records.values()),
        temperature=spec.settings.temperature,
        max_tokens=spec.settings.max_tokens_per_turn,
        max_messages=spec.max_messages,
    )
    provenance = {"comparability": COMPARABILITY[summary.protocol], "agreement": agreement(summary.protocol)}
    (out / "results.json").write_text(json.dumps({**asdict(summary), "label": summary.label, **provenance}, indent=2))
    (out / "results.md").write_text(markdown(summary))
    return summary


def _task_score(task: AceTask, record: EpisodeRecord) -> TaskScore:
    card: dict[str, Any] = json.loads(record.scorecard) if record.scorecard else {}
    ok = bool(card.get("end_state", False)) and record.status != "infra_error"
    return TaskScore(task.id, task.language, task.kind, ok, float(card.get("process", 0.0)))


def markdown(summary: AceSummary) -> str:
    """The splits played, then the agent score beside the anchors, with what makes it comparable or not."""
    lines = ["| language | kind | end-state accuracy | process accuracy | tasks |", "|---|---|---|---|---|"]
    for split in summary.score.splits:
        lines.append(f"| {split.language} | {split.kind} | {split.end_state:.1%} ({split.correct}/{split.total}) "
                     f"| {split.process:.1%} | {split.total} |")  # fmt: skip
    agent = summary.score.agent
    lines += ["", "| model | agent EN | agent ZH |", "|---|---|---|"]
    cells = [f"**{agent[language]:.1%}**" if language in agent else "–" for language in ("en", "zh")]
    lines.append(f"| **this run: {summary.label}** | {cells[0]} | {cells[1]} |")
    lines += [f"| {name} | {en:.1f}% | {zh:.1f}% |" for name, (en, zh) in ANCHORS.items()]
    lines += [
        "",
        "Anchors: the official ACEBench leaderboard, all 50 Agent tasks per language, gpt-4o as the user. "
        + COMPARABILITY[summary.protocol],
        "",
        f"The agent: {summary.model} on {summary.endpoint}, temperature {summary.temperature:g}, at most "
        f"{summary.max_tokens} tokens per reply (the reference: 1024). The user "
        f"simulator: {summary.user_model} on {summary.user_endpoint}. {summary.seconds:.0f} s; infrastructure "
        f"failures (counted wrong): {summary.infra_errors}. A language's agent score needs both of its kinds.",
        *(
            []
            if summary.max_messages == MAX_MESSAGES
            else [
                "",
                f"Dialogues were cut at {summary.max_messages} messages, not the benchmark's {MAX_MESSAGES}: "
                "not comparable.",
            ]
        ),
    ]
    return "\n".join(lines) + "\n"
