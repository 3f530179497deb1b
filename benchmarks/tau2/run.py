"""A tau2 run: a domain's tasks played k times each through the engine, scored as the official metrics score them.

Each task's seed is its place in the domain's `tasks.json`, each trial an episode sample, so `--split`,
`--limit` and `--ids` only choose keys, and a resumed run may choose more. The figures are the official
`agent_metrics` ones, over the simulations that did not fail for infrastructure reasons (an endpoint
gave no answer, or a message had neither text nor calls, which the official message check rejects): the
average reward, and pass^k for k = 1..the fewest such simulations any task has (per task, C(successes, k) /
C(simulations, k), a success being a reward of 1; averaged over tasks). Because a model that fails often is
flattered by leaving its failures out, the results also give the average reward counting them as 0.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from benchmarks.parties import Party
from benchmarks.playing import BenchPlan, play_keys
from benchmarks.tau2.data import Domain, DomainData, load_domain
from benchmarks.tau2.environment import MAX_ERRORS, MAX_STEPS, Limits, Tau2Conversation
from engine.endpoints import EndpointPool
from engine.environments import Environment

# The official user simulator and judge sample at temperature 0 (tau2 config: DEFAULT_LLM_TEMPERATURE_USER,
# DEFAULT_LLM_NL_ASSERTIONS_TEMPERATURE); the official default model for both is gpt-4.1-2025-04-14.
USER_SAMPLING = {"temperature": 0.0}
JUDGE_SAMPLING = {"temperature": 0.0}
COMPARABILITY = (
    "Comparable to published tau2 figures when every task of the `base` split is played with the official "
    "limits (200 steps, 10 errors) and the same models play the user (and, in retail, the judge); the "
    "leaderboard's user is gpt-4.1. The `test` split is the release's held-out half (spadework trains on `train`)."
)
AGREEMENT_FILE = Path(__file__).with_name("agreement.json")


def agreement() -> dict[str, object] | None:
    """The last per-task comparison with the official pipeline on imperfect play
    (`tests/benchmarks/test_tau2_differential.py` checks it is still true); None before the first."""
    if not AGREEMENT_FILE.exists():
        return None
    recorded: dict[str, object] = json.loads(AGREEMENT_FILE.read_text())
    return recorded


class UnknownTask(ValueError):
    """A task id the domain does not hold; the message names it."""


class Tau2Run(BenchPlan):
    benchmark: Literal["tau2"] = "tau2"
    domain: Domain
    trials: int
    user_model: str
    user_endpoint: str
    judge_model: str
    judge_endpoint: str
    max_steps: int = MAX_STEPS
    max_errors: int = MAX_ERRORS
    user_max_tokens: int | None = None  # the official sends none


def choose(domain: DomainData, split: str, limit: int | None, ids: list[str] | None) -> list[int]:
    """Seeds (places in the domain's tasks) of the given ids, else of the first `limit` tasks of `split`."""
    places = {task.id: seed for seed, task in enumerate(domain.tasks)}
    if ids:
        unknown = [name for name in ids if name not in places]
        if unknown:
            raise UnknownTask(f"no tau2 {domain.name} task {', '.join(unknown)} (ids look like {domain.tasks[0].id})")
        return [places[name] for name in ids]
    return [places[task.id] for task in domain.split(split)][:limit]


def pass_hat_k(trials: int, successes: int, k: int) -> float:
    return math.comb(successes, k) / math.comb(trials, k)


def is_success(reward: float) -> bool:
    return (1 - 1e-6) <= reward <= (1 + 1e-6)


@dataclass(frozen=True)
class Tau2Summary:
    domain: str
    tasks: int
    task_ids: list[str]
    trials: int
    avg_reward: float | None  # None when no simulation was scored (every one failed for infrastructure reasons)
    avg_reward_failures_as_zero: float
    pass_hat_ks: dict[int, float]
    terminations: dict[str, int]
    infra_errors: int
    seconds: float
    model: str
    endpoint: str
    user_model: str
    user_endpoint: str
    judge_model: str
    temperature: float
    max_tokens: int
    max_steps: int
    max_errors: int
    user_max_tokens: int | None

    @property
    def label(self) -> str:
        return f"{self.model}, {self.domain}"


def run_tau2(out: Path, spec: Tau2Run, seeds: list[int], urls: list[str], user_urls: list[str] | None,
             judge_urls: list[str] | None, concurrency: int, progress: bool = True) -> Tau2Summary:  # fmt: skip
    """Play `spec.trials` trials of each of `seeds` (resuming `out`) with the agent behind `urls`, the user behind
    `user_urls` and the judge behind `judge_urls` (None: the agent's endpoints), then score and write results."""
    domain = load_domain(spec.domain)
    world = f"tau2-{spec.domain}"

    @asynccontextmanager
    async def conversations(pool: EndpointPool) -> AsyncIterator[Callable[[], Environment]]:
        async with AsyncExitStack() as stack:
            users = pool if user_urls is None else await stack.enter_async_context(EndpointPool.open(user_urls))
            judges = pool if judge_urls is None else await stack.enter_async_context(EndpointPool.open(judge_urls))
            timeout = spec.settings.request_timeout_s
            cap = {} if spec.user_max_tokens is None else {"max_tokens": spec.user_max_tokens}
            user = Party(users, spec.user_model, spec.run, world, "user", timeout, {**USER_SAMPLING, **cap})
            judge = Party(judges, spec.judge_model, spec.run, world, "judge", timeout, JUDGE_SAMPLING)
            limits = Limits(spec.max_steps, spec.max_errors)
            yield lambda: Tau2Conversation(domain, domain.tasks, user, judge, limits)

    played = play_keys(out, spec, world, seeds, urls, conversations, concurrency, progress, trials=spec.trials)
    chosen = set(seeds)
    evaluated: dict[int, list[float]] = {}
    terminations: dict[str, int] = {}
    infra, played_count = 0, 0
    for (seed, _trial), record in sorted(played.trials.items()):
        if seed not in chosen:
            continue
        played_count += 1
        card = json.loads(record.scorecard) if record.scorecard else {}
        reason = card.get("termination") or record.cause or record.status
        terminations[reason] = terminations.get(reason, 0) + 1
        if record.status == "infra_error":
            infra += 1
        else:
            evaluated.setdefault(seed, []).append(record.reward or 0.0)
    rewards = [reward for task in evaluated.values() for reward in task]
    played_seeds = sorted({seed for seed, _trial in played.trials if seed in chosen})
    summary = Tau2Summary(
        domain=spec.domain,
        tasks=len(played_seeds),
        task_ids=[domain.tasks[seed].id for seed in played_seeds],
        trials=spec.trials,
        avg_reward=sum(rewards) / len(rewards) if rewards else None,
        avg_reward_failures_as_zero=sum(rewards) / played_count if played_count else 0.0,
        pass_hat_ks=pass_hat_ks(list(evaluated.values())),
        terminations=dict(sorted(terminations.items())),
        infra_errors=infra,
        seconds=round(played.seconds, 3),
        model=spec.settings.model,
        endpoint=spec.endpoint,
        user_model=spec.user_model,
        user_endpoint=spec.user_endpoint,
        judge_model=spec.judge_model,
        temperature=spec.settings.temperature,
        max_tokens=spec.settings.max_tokens_per_turn,
        max_steps=spec.max_steps,
        max_errors=spec.max_errors,
        user_max_tokens=spec.user_max_tokens,
    )
    provenance = {"comparability": COMPARABILITY, "agreement": agreement()}
    (out / "results.json").write_text(json.dumps({**asdict(summary), "label": summary.label, **provenance}, indent=2))
    (out / "results.md").write_text(markdown(summary))
    return summary


def pass_hat_ks(rewards_by_task: Sequence[list[float]]) -> dict[int, float]:
    """pass^k for k = 1..the fewest simulations a task has (the official `get_tasks_pass_hat_k`)."""
    tasks = [rewards for rewards in rewards_by_task if rewards]
    if not tasks:
        return {}
    most = min(len(rewards) for rewards in tasks)
    return {
        k: sum(pass_hat_k(len(rewards), sum(map(is_success, rewards)), k) for rewards in tasks) / len(tasks)
        for k in range(1, most + 1)
    }


def shown(average: float | None) -> str:
    return "n/a (none scored)" if average is None else f"{average:.3f}"


def markdown(summary: Tau2Summary) -> str:
    head = ["domain", "tasks", "trials", "avg reward", *(f"pass^{k}" for k in summary.pass_hat_ks)]
    row = [summary.domain, str(summary.tasks), str(summary.trials), shown(summary.avg_reward),
           *(f"{value:.1%}" for value in summary.pass_hat_ks.values())]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), "| " + " | ".join(row) + " |"]
    endings = ", ".join(f"{reason} {count}" for reason, count in summary.terminations.items())
    lines += [
        "",
        f"The agent: {summary.model} on {summary.endpoint}, temperature {summary.temperature:g}, at most "
        f"{summary.max_tokens} tokens per reply. The user: {summary.user_model} on {summary.user_endpoint}; the "
        f"judge (retail's natural-language assertions): {summary.judge_model}. Limits: {summary.max_steps} steps, "
        f"{summary.max_errors} tool errors. Endings: {endings}. {summary.infra_errors} simulations failed for "
        f"infrastructure reasons and are left out, as the official metrics leave them out (average reward counting "
        f"them as 0: {summary.avg_reward_failures_as_zero:.3f}). {summary.seconds:.0f} s.",
        "",
        COMPARABILITY,
    ]
    played = len(load_domain(summary.domain).tasks)
    cuts = [f"{len(summary.task_ids)} of the domain's {played} tasks were played"] if summary.tasks < played else []
    if summary.max_steps != MAX_STEPS or summary.max_errors != MAX_ERRORS:
        cuts.append(f"simulations were cut at {summary.max_steps} steps and {summary.max_errors} errors, not "
                    f"{MAX_STEPS} and {MAX_ERRORS}")  # fmt: skip
    if summary.user_max_tokens is not None:
        cuts.append(f"the user's messages were capped at {summary.user_max_tokens} tokens")
    if cuts:
        lines += ["", "Not comparable: " + "; ".join(cuts) + "."]
    return "\n".join(lines) + "\n"
