"""From a run's config to what each part plays by: where the policy's weights are, whether this machine serves
them, and the episode and designer settings. One place, so `spadework train`, `spadework design` and the
studies play a config the same way."""

from __future__ import annotations

from pathlib import Path

import typer

from engine.llama_server import ServerSettings
from engine.local_models import DEFAULT_MODEL, ModelNotFoundError, resolve_gguf
from engine.settings import Completions, EpisodeSettings
from trainers.config import TrainConfig
from trainers.designer.generate import design_constraint
from trainers.designer.loop import DesignSettings
from trainers.designer.memory import RememberedWorld
from trainers.pools import PoolError, read_pool


def policy_source(config: TrainConfig) -> Path | str:
    """The policy's weights: a GGUF (the embedded default), a checkpoint directory, or a hub id."""
    model = config.policy.model
    if model == DEFAULT_MODEL or model.endswith(".gguf"):
        try:
            return resolve_gguf(model)
        except ModelNotFoundError as error:
            raise typer.BadParameter(str(error), param_hint="--set policy.model") from None
    return Path(model) if Path(model).is_dir() else model


def embedded_server(config: TrainConfig, source: Path | str) -> ServerSettings | None:
    """How llama.cpp serves the policy here, or None when `policy.endpoints` or vLLM serve it."""
    if not config.policy.on_embedded_llama_cpp:
        return None
    if not isinstance(source, Path) or source.suffix != ".gguf":
        raise typer.BadParameter(
            f"the embedded server runs GGUF files, not {config.policy.model!r}: serve it with vLLM and give --endpoint",
            param_hint="--set policy.model",
        )
    return ServerSettings(model=source, parallel=config.policy.parallel)


def agent_settings(config: TrainConfig, model: str, tokenizer: str | None, sampling: dict[str, object],
                   completions: Completions = "openai", context: int | None = None) -> EpisodeSettings:  # fmt: skip
    """How the agent plays in this run (training plays, designed worlds' plays and held-out evaluations alike);
    `context`: the tokens a server slot holds, which no episode may outgrow."""
    knobs = config.agent
    return EpisodeSettings(mode=knobs.mode, model=model, max_turns=knobs.max_turns,
                           max_tokens_per_turn=knobs.max_tokens_per_turn, max_episode_tokens=context,
                           call_schema=knobs.call_schema, temperature=knobs.temperature, tokenizer=tokenizer,
                           extra_body=sampling, completions=completions,
                           request_timeout_s=config.policy.request_timeout)  # fmt: skip


def design_settings(config: TrainConfig, agent: EpisodeSettings, model: str, tokenizer: str | None,
                    sampling: dict[str, object], completions: Completions,
                    parallel: int | None) -> DesignSettings:  # fmt: skip
    """How this run's designer writes worlds and how its worlds are played and paid; `parallel`: the embedded
    server's slots (None when other servers serve the policy)."""
    knobs = config.designer
    grammar, constraint = design_constraint(knobs.format, tokens=knobs.mode == "tokens")
    designer = EpisodeSettings(mode=knobs.mode, model=model, max_turns=1, max_tokens_per_turn=knobs.max_tokens,
                               extra_body={**sampling, **constraint}, grammar=grammar, completions=completions,
                               temperature=knobs.temperature, tokenizer=tokenizer,
                               request_timeout_s=config.policy.request_timeout)  # fmt: skip
    return DesignSettings(
        knobs=knobs,
        plays=config.agent.plays,
        designer=designer,
        agent=agent,
        memory_examples=0 if config.ablations.no_memory else 1,
        max_failed_share=config.run.max_failed_share,
        # On the embedded server, one live episode per slot: llama.cpp gives a request the slot whose cache
        # shares the longest prefix with it, so each episode finds its own history there and a turn reads only
        # its new tokens (with more episodes than slots, measured: ~300 prompt tokens read again per turn).
        concurrency=parallel if parallel is not None else DesignSettings.concurrency,
    )


def pool_worlds(config: TrainConfig) -> list[RememberedWorld]:
    """`run.archive_from`'s worlds, every row checked before the run starts (none without the knob)."""
    if config.run.archive_from is None:
        return []
    try:
        return read_pool(Path(config.run.archive_from))
    except PoolError as error:
        raise typer.BadParameter(str(error), param_hint="--set run.archive_from") from None
