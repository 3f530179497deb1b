"""`spadework design`: designer iterations without training, against a model (the embedded one by default),
under the same knobs as `spadework train` (a preset and `--set` overrides)."""

from __future__ import annotations

import json
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Annotated, Any

import anyio
import structlog
import typer
from rich.console import Console
from rich.table import Table

from engine.cli import endpoint_urls, exit_for_infrastructure
from engine.endpoints import EndpointPool
from engine.llama_server import EXACT_SAMPLING
from engine.rollout import InfrastructureFailure
from engine.settings import Completions
from engine.store import plan_changes
from toolworlds.sandbox import SandboxPool
from trainers.config import PRESETS, ConfigError, load_config
from trainers.corpus import Corpus, open_source
from trainers.designer.loop import DesignRun, IterationMetrics, completed_iterations, run_iteration
from trainers.designer.memory import WorldMemory
from trainers.documents import CorpusError
from trainers.run_settings import agent_settings, design_settings, embedded_server, policy_source, pool_worlds

log = structlog.get_logger()

# What a rerun may change and still continue the same run: how many iterations it holds, and where its model is.
CONTINUABLE: dict[str, Any] = {"run": {"iterations"}, "policy": {"endpoints", "request_timeout"}}


def design(
    out: Annotated[Path, typer.Option(help="Run directory: designs.jsonl, metrics.jsonl, worlds/, memory.sqlite.")],
    preset: Annotated[
        str | None, typer.Option(help=f"The knobs to start from (default cpu-tiny): {', '.join(PRESETS)}.")
    ] = None,
    overrides: Annotated[
        list[str],
        typer.Option(
            "--set",
            help="Override a knob: --set designer.documents=4 (repeatable); run.iterations is "
            "how many iterations the run holds (a rerun continues to it).",
        ),
    ] = [],  # noqa: B006
    endpoint: Annotated[
        list[str], typer.Option(help="An OpenAI base URL (repeatable): policy.endpoints; none: the embedded model.")
    ] = [],  # noqa: B006
    memory: Annotated[Path | None, typer.Option(help="Environment memory (default: OUT/memory.sqlite).")] = None,
) -> None:
    """Write toolworlds from documents, validate them in the sandbox, play them with and without the hint,
    and record regret, the designer's reward, the environment memory and per-iteration metrics."""
    if preset is not None and preset not in PRESETS:
        raise typer.BadParameter(f"no preset {preset!r}; choose one of: {', '.join(PRESETS)}", param_hint="--preset")
    if endpoint:
        overrides = [*overrides, f"policy.endpoints={json.dumps(endpoint)}"]
    try:
        config = load_config(preset or "cpu-tiny", overrides, training=False)
    except ConfigError as error:
        raise typer.BadParameter(str(error), param_hint="--set") from None
    if not config.policy.endpoints and not config.policy.on_embedded_llama_cpp:
        raise typer.BadParameter("design serves the policy on the embedded llama.cpp server or reaches running "
                                 "servers: give --endpoint", param_hint="--set policy.server")  # fmt: skip
    try:
        documents = "none" if config.ablations.no_corpus else config.designer.corpus
        corpus = Corpus(open_source(documents, config.designer.text_field), max_tokens=config.designer.document_tokens)
    except CorpusError as error:
        raise typer.BadParameter(str(error), param_hint="--set designer.corpus") from None
    tokens = "tokens" in (config.designer.mode, config.agent.mode)
    needs_weights = config.policy.on_embedded_llama_cpp or (tokens and not config.policy.tokenizer)
    source = policy_source(config) if needs_weights else None
    served = embedded_server(config, source) if source is not None else None
    tokenizer = config.policy.tokenizer or (str(source) if tokens else None)
    # The embedded server samples as training does (each token's probability from the model's own distribution).
    sampling: dict[str, object] = dict(EXACT_SAMPLING) if served is not None else {}
    completions: Completions = "llama.cpp" if served is not None else "openai"
    name = config.policy.served_name
    agent = agent_settings(config, name, tokenizer, sampling, completions, served.context if served else None)
    settings = design_settings(config, agent, name, tokenizer, sampling, completions,
                               served.parallel if served else None)  # fmt: skip
    from_pool = pool_worlds(config)
    out.mkdir(parents=True, exist_ok=True)
    _claim(out, {"config": config.model_dump(mode="json", exclude=CONTINUABLE)})
    first = completed_iterations(out)
    if first >= config.run.iterations:
        log.warning("the run already holds its iterations; raise run.iterations to continue it", out=str(out),
                    iterations=first)  # fmt: skip
    console = Console()

    async def main(urls: list[str]) -> None:
        async with AsyncExitStack() as stack:
            sandbox = await stack.enter_async_context(SandboxPool())
            pool = await stack.enter_async_context(EndpointPool.open(urls))
            archive = stack.enter_context(WorldMemory.open(memory or out / "memory.sqlite"))
            if from_pool:
                log.info("archive started from a pool", worlds=sum(archive.remember(world) for world in from_pool))
            run = DesignRun(uuid.uuid4().hex[:12], out, corpus, pool, sandbox, archive, settings, config.run.seed)
            for iteration in range(first, config.run.iterations):
                log.info("designer iteration", iteration=iteration, documents=config.designer.documents,
                         generations=config.designer.generations)  # fmt: skip
                console.print(metrics_table((await run_iteration(run, iteration)).metrics))

    with endpoint_urls(config.policy.endpoints, served) as urls:
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
