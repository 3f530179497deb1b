"""`spadework bench`: public benchmark harnesses."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from benchmarks.acebench.data import VENDORED
from benchmarks.acebench.environment import Protocol
from benchmarks.bfcl.environment import Style
from engine.cli import (
    EndpointOption,
    LocalModelOption,
    LocalParallelOption,
    MaxFailedShareOption,
    ProgressOption,
    RequestTimeoutOption,
    embedded_unless,
    endpoint_urls,
    exit_if_infrastructure_failed,
)
from engine.rollout import MAX_FAILED_SHARE
from engine.settings import Calls, EpisodeSettings, Mode
from engine.store import StoreError, read_records
from engine.trajectory import EpisodeRecord

if TYPE_CHECKING:
    from benchmarks.bfcl.run import Summary

MAX_REPLIES = 200  # the engine's cap on replies per episode: BFCL's own limits (21 steps a turn) bind first
EPISODE_TIMEOUT_S = 7200.0  # a 7-turn entry on a slow CPU model takes many minutes

ModelOption = Annotated[
    str | None,
    typer.Option(
        help="The model name sent: vLLM serves a model under its name (default: the embedded model's, or 'default')."
    ),
]
OutOption = Annotated[Path | None, typer.Option(help="Run folder; an existing one is resumed.")]
UserEndpointOption = Annotated[
    list[str], typer.Option(help="The user simulator's OpenAI base URL (default: the agent's endpoints).")
]
UserModelOption = Annotated[str | None, typer.Option(help="The user simulator's model (default: the agent's).")]

bench_app = typer.Typer(
    help="Public benchmarks: BFCL v4 multi-turn, ACEBench Agent and tau2-bench.", no_args_is_help=True
)


@bench_app.command("bfcl-v4")
def bfcl_v4(
    categories: Annotated[
        str | None, typer.Option(help="Comma-separated: base, miss_func, miss_param, long_context (default: all).")
    ] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help="The first N entries of each category (default: 200).")
    ] = None,
    ids: Annotated[
        str | None, typer.Option(help="Comma-separated entry ids (multi_turn_base_0,...) instead of categories.")
    ] = None,
    policy: Annotated[
        str | None,
        typer.Option(help="Self-test instead of a model: ground-truth (must score 100%) or none (must score 0%)."),
    ] = None,
    endpoint: EndpointOption = [],  # noqa: B006
    model: ModelOption = None,
    mode: Annotated[
        Style, typer.Option(help="chat (FC: tools in the request), text (BFCL's prompting) or constrained (JSON).")
    ] = "chat",
    concurrency: Annotated[int, typer.Option(min=1, help="Entries played at once.")] = 64,
    temperature: Annotated[float, typer.Option(min=0.0, help="Sampling temperature (bfcl-eval's default).")] = 0.001,
    max_tokens: Annotated[int, typer.Option(min=1, help="Completion tokens per reply.")] = 1024,
    request_timeout: RequestTimeoutOption = 600.0,
    local_model: LocalModelOption = "default",
    local_parallel: LocalParallelOption = 4,
    out: OutOption = None,
    max_failed_share: MaxFailedShareOption = MAX_FAILED_SHARE,
    progress: ProgressOption = True,
) -> None:
    """BFCL v4 multi-turn with the official loop semantics, backends and checker (from bfcl-eval)."""
    from benchmarks.bfcl.data import BFCLUnavailable, UnknownCategory, UnknownEntry, choose
    from benchmarks.bfcl.data import categories as parse_categories
    from benchmarks.bfcl.environment import ENGINE_MODES
    from benchmarks.bfcl.episode import POLICIES
    from benchmarks.bfcl.play import BFCLRun, seeds_of
    from benchmarks.bfcl.run import RunMismatch, run_bfcl, run_bfcl_model

    if policy is not None and policy not in POLICIES:
        raise typer.BadParameter(f"unknown policy {policy!r}: choose from {', '.join(POLICIES)}", param_hint="--policy")
    if ids is not None and (categories is not None or limit is not None):
        raise typer.BadParameter("--ids plays exactly those entries: drop --categories and --limit", param_hint="--ids")
    if ids is not None and not ids.strip(","):
        raise typer.BadParameter("no entry id given", param_hint="--ids")
    try:
        chosen = choose(parse_categories(categories), limit, ids.split(",") if ids else None)
    except UnknownCategory as error:
        raise typer.BadParameter(str(error), param_hint="--categories") from None
    except UnknownEntry as error:
        raise typer.BadParameter(str(error), param_hint="--ids") from None
    except BFCLUnavailable as error:
        raise typer.BadParameter(str(error)) from None
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    out = out or Path("benchmarks/results") / f"bfcl-v4-{policy or mode}-{stamp}"
    summary: Summary
    try:
        if policy is not None:
            summary = run_bfcl(out, policy, chosen)
        else:
            options = ModelOptions(endpoint, model, temperature, max_tokens, request_timeout, local_model,
                                   local_parallel)  # fmt: skip
            with options.served() as (urls, where, name):
                engine_mode, calls = ENGINE_MODES[mode]
                settings = options.settings(engine_mode, name, max_turns=MAX_REPLIES, calls=calls)
                spec = BFCLRun(run=out.name, style=mode, endpoint=where, settings=settings)
                summary = run_bfcl_model(out, spec, urls, chosen, concurrency, progress)
    except (BFCLUnavailable, RunMismatch, StoreError) as error:
        raise typer.BadParameter(str(error)) from None
    table = Table("category", "accuracy", "entries", title=f"BFCL v4 multi-turn, {summary.label}")
    for category, accuracy in summary.accuracy.items():
        table.add_row(category, f"{accuracy:.1%}", str(summary.entries[category]))
    table.add_row("overall (mean)", f"{summary.overall:.1%}", str(sum(summary.entries.values())))
    Console().print(table)
    Console().print(f"results: {out / 'results.json'}, {out / 'results.md'} ({summary.seconds:.0f} s)")
    if policy is None:
        exit_if_infrastructure_failed(played_records(out, seeds_of(chosen)), max_failed_share)


@bench_app.command("acebench")
def acebench(
    data: Annotated[
        Path | None,
        typer.Option(
            help="An ACEBench data_all/ folder (github.com/chenchen0103/ACEBench) (default: the vendored copy)."
        ),
    ] = None,
    languages: Annotated[str, typer.Option(help="Comma-separated: en, zh.")] = "en,zh",
    kinds: Annotated[str, typer.Option(help="Comma-separated: multi_turn, multi_step.")] = "multi_turn,multi_step",
    limit: Annotated[int | None, typer.Option(min=1, help="The first N tasks of each language and kind.")] = None,
    ids: Annotated[
        str | None, typer.Option(help="Comma-separated task ids (agent_multi_turn_0 or en/agent_multi_turn_0).")
    ] = None,
    protocol: Annotated[
        Protocol, typer.Option(help="prompt (the benchmark's own, comparable) or fc (native tool calls, not).")
    ] = "prompt",
    endpoint: EndpointOption = [],  # noqa: B006
    model: ModelOption = None,
    user_endpoint: UserEndpointOption = [],  # noqa: B006
    user_model: UserModelOption = None,
    max_messages: Annotated[
        int, typer.Option(min=2, help="Messages per dialogue (the benchmark's 40; fewer: cheaper, not comparable).")
    ] = 40,
    concurrency: Annotated[int, typer.Option(min=1, help="Tasks played at once.")] = 16,
    temperature: Annotated[float, typer.Option(min=0.0, help="The agent's temperature (the reference: greedy).")] = 0.0,
    max_tokens: Annotated[int, typer.Option(min=1, help="Completion tokens per agent reply.")] = 1024,
    request_timeout: RequestTimeoutOption = 600.0,
    local_model: LocalModelOption = "default",
    local_parallel: LocalParallelOption = 4,
    out: OutOption = None,
    max_failed_share: MaxFailedShareOption = MAX_FAILED_SHARE,
    progress: ProgressOption = True,
) -> None:
    """ACEBench Agent (multi-turn with a simulated user, and multi-step), scored by end state and process."""
    from benchmarks.acebench.data import DataError, load_tasks
    from benchmarks.acebench.run import AceRun, UnknownTask, choose, run_acebench

    try:
        chosen_languages = _names(languages, ("en", "zh"), "--languages")
        chosen_kinds = _names(kinds, ("multi_turn", "multi_step"), "--kinds")
        tasks = load_tasks(data)
        seeds = choose(tasks, chosen_languages, chosen_kinds, limit, ids.split(",") if ids else None)
    except DataError as error:
        raise typer.BadParameter(str(error), param_hint="--data") from None
    except UnknownTask as error:
        raise typer.BadParameter(str(error), param_hint="--ids") from None
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    out = out or Path("benchmarks/results") / f"acebench-{protocol}-{stamp}"
    options = ModelOptions(endpoint, model, temperature, max_tokens, request_timeout, local_model, local_parallel)
    with options.served() as (urls, where, name):
        settings = options.settings("chat", name, max_turns=max_messages)
        user_urls = user_endpoint or None
        spec = AceRun(run=out.name, protocol=protocol, endpoint=where, settings=settings,
                      data=str((data or VENDORED).resolve()), user_model=user_model or name,
                      user_endpoint=", ".join(user_endpoint) if user_endpoint else where,
                      max_messages=max_messages)  # fmt: skip
        try:
            summary = run_acebench(out, spec, tasks, urls, user_urls, seeds, concurrency, progress)
        except StoreError as error:
            raise typer.BadParameter(str(error), param_hint="--out") from None
    table = Table("language", "kind", "end state", "process", "tasks", title=f"ACEBench Agent, {summary.label}")
    for split in summary.score.splits:
        table.add_row(split.language, split.kind, f"{split.end_state:.1%}", f"{split.process:.1%}", str(split.total))
    for language, value in summary.score.agent.items():
        table.add_row(language, "agent score", f"{value:.1%}", "", "")
    Console().print(table)
    Console().print(f"results: {out / 'results.json'}, {out / 'results.md'} ({summary.seconds:.0f} s)")
    exit_if_infrastructure_failed(played_records(out, seeds), max_failed_share)


@bench_app.command("tau2")
def tau2(
    domain: Annotated[str, typer.Option(help="airline, retail or telecom.")] = "airline",
    split: Annotated[
        str, typer.Option(help="base (every task: the leaderboard's), train or test (the release's held-out half).")
    ] = "base",
    limit: Annotated[int | None, typer.Option(min=1, help="The first N tasks of the split.")] = None,
    ids: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated task ids instead of a split (airline, retail: 0,1,...; telecom: the ids "
            "its tasks.json gives, which the error for an unknown id shows an example of)."
        ),
    ] = None,
    trials: Annotated[int, typer.Option(min=1, help="Simulations per task (pass^k for k up to it).")] = 1,
    endpoint: EndpointOption = [],  # noqa: B006
    model: ModelOption = None,
    user_endpoint: UserEndpointOption = [],  # noqa: B006
    user_model: UserModelOption = None,
    user_max_tokens: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Cap each user message (the official sets none; a small local model "
            "may otherwise write until its context is full). Not comparable.",
        ),
    ] = None,
    judge_endpoint: Annotated[
        list[str], typer.Option(help="The NL-assertion judge's base URL (retail; default: the user's endpoints).")
    ] = [],  # noqa: B006
    judge_model: Annotated[str | None, typer.Option(help="The judge's model (default: the user's).")] = None,
    max_steps: Annotated[int, typer.Option(min=1, help="Messages per simulation (the official 200).")] = 200,
    max_errors: Annotated[int, typer.Option(min=1, help="Tool errors per simulation (the official 10).")] = 10,
    concurrency: Annotated[int, typer.Option(min=1, help="Simulations played at once.")] = 16,
    temperature: Annotated[float, typer.Option(min=0.0, help="The agent's temperature (the official 0).")] = 0.0,
    max_tokens: Annotated[int, typer.Option(min=1, help="Completion tokens per agent reply.")] = 1024,
    request_timeout: RequestTimeoutOption = 600.0,
    local_model: LocalModelOption = "default",
    local_parallel: LocalParallelOption = 4,
    out: OutOption = None,
    max_failed_share: MaxFailedShareOption = MAX_FAILED_SHARE,
    progress: ProgressOption = True,
) -> None:
    """tau2-bench (airline, retail, telecom): the official tools, databases, user simulator and reward; pass^k."""
    from benchmarks.tau2.data import DOMAINS, SPLITS, load_domain
    from benchmarks.tau2.run import Tau2Run, UnknownTask, choose, run_tau2, shown

    chosen_domain = _names(domain, DOMAINS, "--domain")
    if len(chosen_domain) != 1:
        raise typer.BadParameter("one domain per run", param_hint="--domain")
    _names(split, SPLITS, "--split")
    data = load_domain(chosen_domain[0])
    try:
        seeds = choose(data, split, limit, ids.split(",") if ids else None)
    except UnknownTask as error:
        raise typer.BadParameter(str(error), param_hint="--ids") from None
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    out = out or Path("benchmarks/results") / f"tau2-{data.name}-{stamp}"
    options = ModelOptions(endpoint, model, temperature, max_tokens, request_timeout, local_model, local_parallel)
    with options.served() as (urls, where, name):
        # native: the official reads only `tool_calls`, whose arguments must be JSON objects
        settings = options.settings("chat", name, max_turns=max_steps, calls="native")
        users = ", ".join(user_endpoint) if user_endpoint else where
        spec = Tau2Run(run=out.name, domain=data.name, endpoint=where, settings=settings, trials=trials,
                       user_model=user_model or name, user_endpoint=users,
                       judge_model=judge_model or user_model or name,
                       judge_endpoint=", ".join(judge_endpoint) if judge_endpoint else users,
                       max_steps=max_steps, max_errors=max_errors, user_max_tokens=user_max_tokens)  # fmt: skip
        try:
            summary = run_tau2(out, spec, seeds, urls, user_endpoint or None, judge_endpoint or user_endpoint or None,
                               concurrency, progress)  # fmt: skip
        except StoreError as error:
            raise typer.BadParameter(str(error), param_hint="--out") from None
    table = Table("domain", "tasks", "trials", "avg reward", *(f"pass^{k}" for k in summary.pass_hat_ks),
                  title=f"tau2-bench, {summary.label}")  # fmt: skip
    table.add_row(summary.domain, str(summary.tasks), str(summary.trials), shown(summary.avg_reward),
                  *(f"{value:.1%}" for value in summary.pass_hat_ks.values()))  # fmt: skip
    Console().print(table)
    Console().print(f"results: {out / 'results.json'}, {out / 'results.md'} ({summary.seconds:.0f} s)")
    exit_if_infrastructure_failed(played_records(out, seeds), max_failed_share)


def played_records(out: Path, seeds: list[int]) -> list[EpisodeRecord]:
    """The last record of each chosen episode in the run folder (a resumed run holds others too)."""
    wanted = set(seeds)
    return [record for record in read_records(out) if record.key.seed in wanted]


def _names(text: str, allowed: tuple[str, ...], option: str) -> list[str]:
    chosen = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in allowed]
    if unknown or not chosen:
        raise typer.BadParameter(f"unknown {', '.join(unknown) or 'empty choice'}: choose from {', '.join(allowed)}",
                                 param_hint=option)  # fmt: skip
    return chosen


@dataclass(frozen=True)
class ModelOptions:
    """What plays: the endpoints (or the embedded server, started for the run) and how it samples."""

    endpoints: list[str]
    model: str | None
    temperature: float
    max_tokens: int
    request_timeout: float
    local_model: str
    local_parallel: int

    @contextmanager
    def served(self) -> Iterator[tuple[list[str], str, str]]:
        """(the URLs, what serves them in words, the model name), the embedded server running meanwhile."""
        served = embedded_unless(self.endpoints, self.local_model, self.local_parallel)
        name = self.model or (served.model.stem if served is not None else "default")
        where = f"the embedded server ({served.model.name})" if served is not None else ", ".join(self.endpoints)
        with endpoint_urls(self.endpoints, served) as urls:
            yield urls, where, name

    def settings(self, mode: Mode, model: str, max_turns: int, calls: Calls = "lenient") -> EpisodeSettings:
        return EpisodeSettings(
            mode=mode,
            calls=calls,
            model=model,
            max_turns=max_turns,
            max_tokens_per_turn=self.max_tokens,
            temperature=self.temperature,
            request_timeout_s=self.request_timeout,
            episode_timeout_s=EPISODE_TIMEOUT_S,
        )
