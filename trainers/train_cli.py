"""`spadework train`: the self-play loop from a preset, on the embedded model by default."""

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
from trainers.config import ConfigError, TrainConfig, load_config
from trainers.corpus import Corpus, CorpusError, open_source
from trainers.designer.loop import DesignRun, DesignSettings
from trainers.designer.memory import WorldMemory
from trainers.designer.regret import RewardSettings
from trainers.grpo import Learner, RowFeed, UpdateSettings, grpo_trainer
from trainers.selfplay import HeldOut, SelfPlay
from trainers.weight_sync import GGUFReloadSync

log = structlog.get_logger()


def train(
    preset: Annotated[str, typer.Option(help="cpu-tiny (the embedded model) or gpu-qwen3-4b (vLLM endpoints).")] = (
        "cpu-tiny"
    ),
    overrides: Annotated[
        list[str], typer.Option("--set", help="Override a knob: --set agent.plays=8 (repeatable).")
    ] = [],  # noqa: B006
    out: Annotated[Path, typer.Option(help="Run directory (new or empty).")] = Path("runs/train"),
) -> None:
    """Self-play training: the designer writes worlds, the agent plays them, one GRPO update per iteration."""
    try:
        config = load_config(preset, overrides)
    except ConfigError as error:
        raise typer.BadParameter(str(error), param_hint="--set") from None
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
    if out.exists() and any(out.iterdir()):
        raise typer.BadParameter(f"{out} already holds a run; give a new --out (resuming a run is not built yet)")
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
        held = anyio.run(_run, config, out, corpus, urls, gguf, tokenizer, server)
    Console().print(_held_out_table(held))


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
) -> list[HeldOut]:
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
    model, hf_tokenizer = load_policy(gguf)
    feed = RowFeed()
    update = UpdateSettings(rows_per_update=config.update.rows_per_update, rows_per_pass=config.update.rows_per_pass,
                            learning_rate=config.update.learning_rate,
                            beta=config.update.beta, epsilon=config.update.epsilon,
                            max_completion_length=config.update.max_completion_length)  # fmt: skip
    trainer = grpo_trainer(model, hf_tokenizer, feed, update, out / "trainer", config.run.iterations)
    sync = GGUFReloadSync(server, gguf, out / "weights") if server else None
    if sync is None:
        log.warning("weights are not pushed to external endpoints yet: they keep serving their own model")
    learner = Learner(trainer, feed, sync, config.update.rows_per_update, config.run.seed)
    held: list[HeldOut] = []
    async with AsyncExitStack() as stack:
        sandbox = await stack.enter_async_context(SandboxPool())
        endpoints = await stack.enter_async_context(EndpointPool.open(urls))
        memory = stack.enter_context(WorldMemory.open(out / "memory.sqlite"))
        design = DesignRun(uuid.uuid4().hex[:12], out, corpus, endpoints, sandbox, memory, settings, config.run.seed)
        loop = SelfPlay(config, out, design, endpoints, agent, learner)
        held.append(await loop.held_out(after=-1))
        for index in range(config.run.iterations):
            await loop.iteration(index)
            every = config.run.eval_every
            if index == config.run.iterations - 1 or (every and (index + 1) % every == 0):
                held.append(await loop.held_out(after=index))
    learner.close()
    return held


def _held_out_table(held: list[HeldOut]) -> Table:
    table = Table("when", "success without hint", "success with hint", title="held-out reference tasks")
    for result in held:
        when = "before training" if result.after_iteration < 0 else f"after iteration {result.after_iteration}"
        table.add_row(when, f"{result.mean_plain:.1%}", f"{result.mean_hinted:.1%}")
    return table
