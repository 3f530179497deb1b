"""`spadework design`: run designer iterations against a model (the embedded one by default)."""

from __future__ import annotations

import json
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
import structlog
import typer
from pydantic import TypeAdapter
from rich.console import Console
from rich.table import Table

from engine.cli import MaxFailedShareOption, embedded_unless, endpoint_urls, exit_for_infrastructure
from engine.endpoints import EndpointPool
from engine.rollout import MAX_FAILED_SHARE, InfrastructureFailure
from engine.settings import EpisodeSettings, Mode
from engine.store import plan_changes
from toolworlds.sandbox import SandboxPool, SandboxSettings
from trainers.corpus import Corpus, open_source
from trainers.designer.budget import SPEC_BUDGET
from trainers.designer.generate import design_constraint
from trainers.designer.loop import DesignRun, DesignSettings, IterationMetrics, completed_iterations, run_iteration
from trainers.designer.memory import StatusThresholds, WorldMemory
from trainers.designer.prompt import DesignFormat
from trainers.designer.regret import RewardMode, RewardSettings, WinRate
from trainers.designer.stages import PlanRule
from trainers.designer.task_text import TaskText
from trainers.designer.vocabulary import VocabularyRule
from trainers.documents import CorpusError

log = structlog.get_logger()


def design(
    out: Annotated[Path, typer.Option(help="Run directory: designs.jsonl, metrics.jsonl, worlds/, memory.sqlite.")],
    iterations: Annotated[int, typer.Option(min=1, help="Designer iterations to run (a rerun continues).")] = 1,
    documents: Annotated[int, typer.Option(min=1, help="Grounding documents per iteration.")] = 4,
    generations: Annotated[int, typer.Option(min=1, help="G: worlds the designer writes per document.")] = 1,
    plays: Annotated[int, typer.Option(min=1, help="K: tasks per valid world, played without and with the hint.")] = 8,
    smoke_seeds: Annotated[
        int, typer.Option(min=1, help="Seeds the contract checks play (at least --plays: every seed a play uses).")
    ] = 8,
    corpus: Annotated[
        str, typer.Option(help="'tables', 'python-docs', a .jsonl/.parquet file, or a folder of text.")
    ] = "tables",
    text_field: Annotated[str, typer.Option(help="Text column of a .jsonl/.parquet corpus.")] = "text",
    document_tokens: Annotated[int, typer.Option(min=32, help="Chunk budget of a grounding document.")] = 600,
    endpoint: Annotated[list[str], typer.Option(help="OpenAI base URL(s); none: serve the embedded model.")] = [],  # noqa: B006
    local_model: Annotated[str, typer.Option(help="GGUF to serve when no --endpoint is given.")] = "default",
    local_parallel: Annotated[int, typer.Option(min=1, help="Slots of the embedded server.")] = 4,
    model: Annotated[str, typer.Option(help="Model name sent to the endpoints.")] = "default",
    designer_mode: Annotated[
        Literal["chat", "tokens"], typer.Option(help="tokens: keep the designer's sampled ids.")
    ] = "chat",
    designer_format: Annotated[
        DesignFormat, typer.Option(help="python: a Python world (sandboxed); spec: a JSON spec, schema-constrained.")
    ] = "python",
    task_text: Annotated[
        TaskText, typer.Option(help="A spec's instruction and hint: written by the model, or derived from its plan.")
    ] = "written",
    tool_text: Annotated[
        TaskText, typer.Option(help="Staged specs: tools' names and descriptions written by the model, or derived.")
    ] = "written",
    key_choices: Annotated[
        bool, typer.Option(help="Staged specs: every table's key arguments list its records' keys.")
    ] = False,
    plans: Annotated[
        PlanRule, typer.Option(help="Staged specs: which plans may end (change: only one that changes something).")
    ] = "any",
    plan_calls: Annotated[
        int, typer.Option(min=1, max=SPEC_BUDGET.plan, help="Staged specs: the most calls a plan has.")
    ] = SPEC_BUDGET.plan,
    vocabulary: Annotated[
        VocabularyRule, typer.Option(help="Staged specs: free, or document (names and values from the document).")
    ] = "free",
    agent_mode: Annotated[Mode, typer.Option(help="How the agent's plays talk to the model.")] = "chat",
    tokenizer: Annotated[str | None, typer.Option(help="tokens mode: tokenizer (default: the served GGUF).")] = None,
    designer_tokens: Annotated[int, typer.Option(min=64, help="Most tokens in a designer reply.")] = 2048,
    temperature: Annotated[float, typer.Option(min=0.0, help="Designer sampling temperature.")] = 0.8,
    agent_turns: Annotated[int, typer.Option(min=1, help="Most turns per agent play.")] = 8,
    agent_tokens: Annotated[int, typer.Option(min=16, help="Most tokens per agent turn.")] = 256,
    reward: Annotated[RewardMode, typer.Option(help="How the designer is paid: regret, blend or band.")] = "regret",
    plateau: Annotated[tuple[float, float], typer.Option(help="blend, band: the win-rate plateau.")] = (0.4, 0.6),
    plateau_weight: Annotated[float, typer.Option(min=0.0, help="blend: reward inside the plateau.")] = 0.5,
    win: Annotated[WinRate, typer.Option(help="blend, band: win rate as plays solved or mean credit.")] = "success",
    invalid_penalty: Annotated[
        float, typer.Option(max=0.0, help="Reward of an invalid world (at most 0: never above a valid one's).")
    ] = -1.0,
    memory: Annotated[Path | None, typer.Option(help="Environment memory (default: OUT/memory.sqlite).")] = None,
    sandbox_zygotes: Annotated[
        int, typer.Option(min=1, help="Sandbox fork servers (every episode gets a process of its own).")
    ] = SandboxSettings().zygotes,
    request_timeout: Annotated[float, typer.Option(min=0.01, help="Seconds per model request.")] = 600.0,
    seed: Annotated[int, typer.Option(help="Seed of the document draws.")] = 0,
    max_failed_share: MaxFailedShareOption = MAX_FAILED_SHARE,
) -> None:
    """Write toolworlds from documents, validate them in the sandbox, play them with and without the hint,
    and record regret, the designer's reward, the environment memory and per-iteration metrics."""
    try:
        grounding = Corpus(open_source(corpus, text_field), max_tokens=document_tokens)
        rewards = RewardSettings(mode=reward, plateau=plateau, plateau_weight=plateau_weight, win=win,
                                 invalid_penalty=invalid_penalty)  # fmt: skip
    except (CorpusError, ValueError) as error:
        raise typer.BadParameter(str(error)) from None
    if task_text == "derived" and (designer_format != "spec" or designer_mode != "tokens"):
        raise typer.BadParameter("derived task text is worded stage by stage: give --designer-format spec "
                                 "--designer-mode tokens", param_hint="--task-text")  # fmt: skip
    staged_rules = (plans, plan_calls, vocabulary, tool_text, key_choices) != ("any", SPEC_BUDGET.plan, "free",
                                                                              "written", False)  # fmt: skip
    if staged_rules and (designer_format != "spec" or designer_mode != "tokens"):
        raise typer.BadParameter("plan, vocabulary, tool-text and key-choice rules hold a spec written in stages: "
                                 "give --designer-format spec --designer-mode tokens",
                                 param_hint="--plans/--plan-calls/--vocabulary/--tool-text/--key-choices")  # fmt: skip
    served = embedded_unless(endpoint, local_model, local_parallel)
    if served is not None:
        tokenizer = tokenizer or str(served.model)
    if "tokens" in (designer_mode, agent_mode) and tokenizer is None:
        raise typer.BadParameter("tokens mode renders prompts itself: give --tokenizer", param_hint="--tokenizer")
    grammar, constraint = design_constraint(designer_format, tokens=designer_mode == "tokens")
    common = {"model": model, "request_timeout_s": request_timeout, "tokenizer": tokenizer,
              "completions": "llama.cpp" if served is not None else "openai"}  # fmt: skip
    settings = DesignSettings(
        documents=documents,
        generations=generations,
        plays=plays,
        smoke_seeds=smoke_seeds,
        designer=EpisodeSettings(
            mode=designer_mode,
            max_turns=1,
            max_tokens_per_turn=designer_tokens,
            temperature=temperature,
            grammar=grammar,
            extra_body=constraint,
            **common,
        ),
        format=designer_format,
        task_text=task_text,
        tool_text=tool_text,
        key_choices=key_choices,
        plans=plans,
        plan_calls=plan_calls,
        vocabulary=vocabulary,
        # A play that fills a slot of the embedded server ends on its state, not in a refused request.
        agent=EpisodeSettings(
            mode=agent_mode,
            max_turns=agent_turns,
            max_tokens_per_turn=agent_tokens,
            max_episode_tokens=served.context if served is not None else None,
            **common,
        ),
        reward=rewards,
        thresholds=StatusThresholds(),
        concurrency=served.parallel if served is not None else DesignSettings.concurrency,  # one per slot
        max_failed_share=max_failed_share,
    )
    out.mkdir(parents=True, exist_ok=True)
    _claim(out, {"settings": TypeAdapter(DesignSettings).dump_python(settings, mode="json"), "corpus": corpus,
                 "text_field": text_field, "document_tokens": document_tokens, "seed": seed})  # fmt: skip
    first = completed_iterations(out)
    console = Console()

    async def main(urls: list[str]) -> None:
        async with AsyncExitStack() as stack:
            sandbox = await stack.enter_async_context(SandboxPool(SandboxSettings(zygotes=sandbox_zygotes)))
            pool = await stack.enter_async_context(EndpointPool.open(urls))
            archive = stack.enter_context(WorldMemory.open(memory or out / "memory.sqlite"))
            run = DesignRun(uuid.uuid4().hex[:12], out, grounding, pool, sandbox, archive, settings, seed)
            for iteration in range(first, first + iterations):
                log.info("designer iteration", iteration=iteration, documents=documents, generations=generations)
                console.print(metrics_table((await run_iteration(run, iteration)).metrics))

    with endpoint_urls(endpoint, served) as urls:
        try:
            anyio.run(main, urls)
        except InfrastructureFailure as error:
            exit_for_infrastructure(error, "run the same command again once it is fixed")


PLAN_FILE = "design.json"


def _claim(out: Path, plan: dict[str, Any]) -> None:
    """A rerun continues the run in `out` only with the settings it was started with (a new endpoint or a longer
    timeout aside): iterations played otherwise would not be one run."""
    path = out / PLAN_FILE
    if path.exists():
        changed = plan_changes(json.loads(path.read_text()), plan)
        if changed:
            raise typer.BadParameter(f"{out} holds a design run with other settings (differs in: {', '.join(changed)})"
                                     "; continue it with those, or give a new --out", param_hint="--out")  # fmt: skip
    path.write_text(json.dumps(plan, indent=2) + "\n")


def metrics_table(metrics: IterationMetrics) -> Table:
    """One iteration's figures, the way people compare them."""
    table = Table("measure", "value", title=f"designer iteration {metrics.iteration} ({metrics.prompt_version})")
    rows = {
        "replies / asked": f"{metrics.replies} / {metrics.requested}",
        "valid before repair": f"{metrics.valid_before_repair} ({metrics.validity_before_repair:.0%})",
        "valid after repair": f"{metrics.valid_after_repair} ({metrics.validity_after_repair:.0%})",
        "valid, then failed in play (invalid)": str(metrics.broken_in_play),
        "rejections": ", ".join(f"{k}: {v}" for k, v in sorted(metrics.rejections.items())) or "-",
        "regret (mean; negative)": "-" if metrics.regret_mean is None else
        f"{metrics.regret_mean:.3f}; {metrics.negative_regrets} negative",
        "rewards": ", ".join("masked" if r is None else f"{r:.2f}" for r in metrics.rewards),
        "status": ", ".join(f"{k}: {v}" for k, v in sorted(metrics.statuses.items())) or "-",
        "Vendi score (tool schemas)": f"{metrics.vendi:.2f}",
        "answer-leak rate": "-" if metrics.answer_leak_rate is None else f"{metrics.answer_leak_rate:.0%}",
        "seconds (generate / validate / play)": " / ".join(f"{metrics.seconds.get(k, 0):.1f}"
                                                          for k in ("generation", "validation", "plays")),
        "memory": ", ".join(f"{k}: {v}" for k, v in metrics.memory.items()),
    }  # fmt: skip
    for name, value in rows.items():
        table.add_row(name, value)
    return table
