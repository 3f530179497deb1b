"""`spadework train`: the self-play loop from a preset, on the embedded model by default (or continuing a
run with `--resume`); `spadework report`: that run's plots and page."""

from __future__ import annotations

import uuid
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import Annotated

import anyio
import structlog
import typer
from rich.console import Console
from rich.table import Table

from engine.endpoints import EndpointPool
from engine.llama_server import EmbeddedServer, ServerSettings, ServerStartError
from engine.local_models import ModelNotFoundError, resolve_gguf
from engine.settings import EpisodeSettings
from toolworlds.sandbox import SandboxPool
from trainers.checkpoint import load_policy
from trainers.config import ConfigError, TrainConfig, load_config, resumed_config
from trainers.corpus import Corpus, CorpusError, open_source
from trainers.designer.loop import DesignRun, DesignSettings
from trainers.designer.memory import WorldMemory
from trainers.designer.regret import RewardSettings
from trainers.grpo import Learner, RowFeed, UpdateSettings, grpo_trainer
from trainers.report import ReportError, read_run, summary, write_report
from trainers.run_state import TRAINER_DIR, WEIGHTS_DIR, ResumeError, RunState, load_state, restore
from trainers.selfplay import HeldOut, SelfPlay, read_held_out
from trainers.weight_sync import GGUFReloadSync

log = structlog.get_logger()


def train(
    preset: Annotated[
        str | None, typer.Option(help="cpu-tiny (the embedded model, the default) or gpu-qwen3-4b (vLLM endpoints).")
    ] = None,
    overrides: Annotated[
        list[str], typer.Option("--set", help="Override a knob: --set agent.plays=8 (repeatable).")
    ] = [],  # noqa: B006
    out: Annotated[Path | None, typer.Option(help="Run directory (new or empty). [default: runs/train]")] = None,
    resume: Annotated[
        Path | None,
        typer.Option(help="Continue a killed or finished run from its last checkpoint (only run.* knobs may change)."),
    ] = None,
) -> None:
    """Self-play training: the designer writes worlds, the agent plays them, one GRPO update per iteration."""
    state = None
    if resume is not None:
        if out is not None or preset is not None:
            raise typer.BadParameter("a resumed run keeps its directory and preset; drop --out and --preset")
        out = resume
        try:
            state = load_state(out)
            config = resumed_config(out / "config.json", overrides)
        except (ResumeError, ConfigError) as error:
            raise typer.BadParameter(str(error), param_hint="--resume") from None
    else:
        out = out or Path("runs/train")
        try:
            config = load_config(preset or "cpu-tiny", overrides)
        except ConfigError as error:
            raise typer.BadParameter(str(error), param_hint="--set") from None
        if out.exists() and any(out.iterdir()):
            raise typer.BadParameter(f"{out} already holds a run; continue it with --resume {out}, or give a new --out")
    gguf = _policy_file(config)
    served = None if config.policy.endpoints else ServerSettings(model=gguf, parallel=config.policy.parallel)
    tokenizer = config.policy.tokenizer or (str(gguf) if served else None)
    if config.agent.mode == "tokens" and tokenizer is None:
        raise typer.BadParameter("tokens mode with --endpoints needs policy.tokenizer", param_hint="--set")
    try:
        source = "none" if config.ablations.no_corpus else config.designer.corpus
        corpus = Corpus(open_source(source), max_tokens=config.designer.document_tokens)
    except CorpusError as error:
        raise typer.BadParameter(str(error), param_hint="--set designer.corpus") from None
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(config.model_dump_json(indent=2))
    with ExitStack() as stack:
        server = None
        if served is not None:
            try:
                server = stack.enter_context(EmbeddedServer(served))
            except ServerStartError as error:
                raise typer.BadParameter(str(error), param_hint="--set policy.model") from None
        urls = [server.base_url] if server else list(config.policy.endpoints)
        anyio.run(_run, config, out, corpus, urls, gguf, tokenizer, server, state)
    Console().print(_held_out_table(read_held_out(out)))


def _policy_file(config: TrainConfig) -> Path:
    try:
        return resolve_gguf(config.policy.model)
    except ModelNotFoundError as error:
        raise typer.BadParameter(str(error), param_hint="--set policy.model") from None


async def _run(
    config: TrainConfig,
    out: Path,
    corpus: Corpus,
    urls: list[str],
    gguf: Path,
    tokenizer: str | None,
    server: EmbeddedServer | None,
    state: RunState | None,
) -> None:
    name = config.policy.served_name
    agent = EpisodeSettings(mode=config.agent.mode, model=name, max_turns=config.agent.max_turns,
                            max_tokens_per_turn=config.agent.max_tokens_per_turn,
                            temperature=config.agent.temperature, tokenizer=tokenizer)  # fmt: skip
    designer = EpisodeSettings(mode="tokens" if tokenizer else "chat", model=name, max_turns=1,
                               max_tokens_per_turn=config.designer.max_tokens,
                               temperature=config.designer.temperature, tokenizer=tokenizer)  # fmt: skip
    settings = DesignSettings(
        documents=config.designer.documents,
        generations=config.designer.generations,
        plays=config.agent.plays,
        smoke_seeds=config.designer.smoke_seeds,
        designer=designer,
        agent=agent,
        reward=RewardSettings(
            mode=config.designer.reward,
            plateau=config.designer.plateau,
            plateau_weight=config.designer.plateau_weight,
            invalid_penalty=config.designer.invalid_penalty,
        ),
        memory_examples=0 if config.ablations.no_memory else 1,
    )
    if state is not None:
        restore(out, state)
        log.info("resuming", after_iteration=state.iteration, trainer_checkpoint=state.trainer_checkpoint)
    checkpoint = out / state.trainer_checkpoint if state and state.trainer_checkpoint else None
    model, hf_tokenizer = load_policy(checkpoint or gguf)
    sync = GGUFReloadSync(server, gguf, out / WEIGHTS_DIR) if server else None
    if sync is None:
        log.warning("weights are not pushed to external endpoints yet: they keep serving their own model")
    elif checkpoint is not None and state is not None:
        sync.version = state.weights_version
        sync.push(model)  # serve the restored policy, not the base model, before anything is sampled
    feed = RowFeed()
    update = UpdateSettings(rows_per_update=config.update.rows_per_update, rows_per_pass=config.update.rows_per_pass,
                            learning_rate=config.update.learning_rate,
                            beta=config.update.beta, epsilon=config.update.epsilon,
                            max_completion_length=config.update.max_completion_length,
                            importance_sampling=config.update.importance_sampling,
                            importance_sampling_cap=config.update.importance_sampling_cap,
                            gradient_checkpointing=config.update.gradient_checkpointing)  # fmt: skip
    trainer = grpo_trainer(model, hf_tokenizer, feed, update, out / TRAINER_DIR, config.run.iterations)
    learner = Learner(trainer, feed, sync, config.update.rows_per_update, config.run.seed,
                      resume_from=checkpoint, updates_done=state.updates if state else 0)  # fmt: skip
    try:
        async with AsyncExitStack() as stack:
            sandbox = await stack.enter_async_context(SandboxPool())
            endpoints = await stack.enter_async_context(EndpointPool.open(urls))
            memory = stack.enter_context(WorldMemory.open(out / "memory.sqlite"))
            run_id = state.run_id if state else uuid.uuid4().hex[:12]
            design = DesignRun(run_id, out, corpus, endpoints, sandbox, memory, settings, config.run.seed)
            loop = SelfPlay(config, out, design, endpoints, agent, learner, trainer_checkpoint=checkpoint)
            await loop.run(state)
    finally:
        learner.close()


def _held_out_table(held: list[HeldOut]) -> Table:
    table = Table("when", "success without hint", "success with hint", title="held-out reference tasks")
    for result in held:
        when = "before training" if result.after_iteration < 0 else f"after iteration {result.after_iteration}"
        table.add_row(when, f"{result.mean_plain:.1%}", f"{result.mean_hinted:.1%}")
    return table


def report(
    run: Annotated[Path, typer.Argument(help="A training run's directory (what `spadework train --out` made).")],
    out: Annotated[Path | None, typer.Option(help="Where the page and plots go. [default: RUN/report]")] = None,
) -> None:
    """A training run as an HTML page with PNG plots: returns, held-out success, designer validity, regret,
    diversity, leaks, throughput and where the time went."""
    try:
        record = read_run(run)
    except ReportError as error:
        raise typer.BadParameter(str(error), param_hint="RUN") from None
    page = write_report(record, out)
    table = Table("what", "value", title=f"training run {run}")
    for what, value in summary(record):
        table.add_row(what, value)
    Console().print(table)
    Console().print(f"report: {page}")
