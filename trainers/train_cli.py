"""`spadework train`: the self-play loop from a preset, on the embedded model by default (or continuing a
run with `--resume`); `spadework report`: that run's plots and page."""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from contextlib import AsyncExitStack, ExitStack, closing, suppress
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import anyio
import structlog
import typer
from rich.console import Console
from rich.table import Table

from engine.child_server import ServerStartError
from engine.cli import exit_for_infrastructure
from engine.endpoints import EndpointPool
from engine.llama_server import EXACT_SAMPLING, EmbeddedServer
from engine.local_models import ModelNotFoundError
from engine.rollout import InfrastructureFailure
from engine.settings import Completions
from toolworlds.sandbox import SandboxPool
from trainers.checkpoint import LoraSettings, load_policy
from trainers.compare import (
    COLUMNS,
    CompareError,
    comparison,
    difference_lines,
    gap_lines,
    rows,
    run_arms,
    write_comparison,
)
from trainers.config import PRESETS, ConfigError, TrainConfig, load_config, resumed_config
from trainers.corpus import Corpus, open_source
from trainers.designer.loop import DesignRun
from trainers.designer.memory import RememberedWorld, WorldMemory
from trainers.distributed import BroadcastRowFeed, Ranks
from trainers.documents import CorpusError
from trainers.equal_compute import ComputeTargetError
from trainers.grpo import Learner, RowFeed, TrainingStopped, UpdateSettings, grpo_trainer
from trainers.memory import PeakMemory
from trainers.report import ReportError, read_run, summary, write_report
from trainers.run_records import HeldOut, read_held_out
from trainers.run_settings import agent_settings, design_settings, embedded_server, policy_source, pool_worlds
from trainers.run_state import (
    STATE_DIR,
    STATE_FILE,
    TRAINER_DIR,
    WEIGHTS_DIR,
    ResumeError,
    RunState,
    load_state,
    restore,
)
from trainers.selfplay import BeforeUnavailable, SelfPlay, compute_target, shared_before
from trainers.tracking import Tracker, TrackerError, open_tracker
from trainers.weight_sync import (
    GGUFReloadSync,
    VLLMLoRASync,
    VLLMNCCLSync,
    VLLMReloadSync,
    WeightSync,
    WeightSyncError,
    require_cuda_for_nccl,
)

log = structlog.get_logger()


def train(
    preset: Annotated[
        str | None,
        typer.Option(
            help="cpu-tiny (the embedded model, the default), cpu-selfplay (the designer's learning, "
            "longer) or gpu-qwen3-4b (vLLM endpoints)."
        ),
    ] = None,
    overrides: Annotated[
        list[str], typer.Option("--set", help="Override a knob: --set agent.plays=8 (repeatable).")
    ] = [],  # noqa: B006
    out: Annotated[Path | None, typer.Option(help="Run directory, new or empty (default: runs/train).")] = None,
    resume: Annotated[
        Path | None,
        typer.Option(help="Continue a killed or finished run from its last checkpoint (only run.* knobs may change)."),
    ] = None,
    endpoint: Annotated[
        list[str],
        typer.Option(help="A vLLM server's OpenAI base URL, e.g. http://gpu1:8000/v1 (repeatable): policy.endpoints."),
    ] = [],  # noqa: B006
) -> None:
    """Self-play training: the designer writes worlds, the agent plays them, one GRPO update per iteration.

    Under `accelerate launch` or `torchrun` with several processes, the first plays and every one learns
    (data parallel)."""
    ranks = Ranks.from_env()
    if endpoint:
        overrides = [*overrides, f"policy.endpoints={json.dumps(endpoint)}"]
    config, out, state = _configured_run(preset, overrides, out, resume, check_empty=ranks.leader)
    source = policy_source(config)
    update = UpdateSettings.of(config)
    if update.batch_rows % (config.update.rows_per_pass * ranks.world):
        raise typer.BadParameter(
            f"the rows of one update, {config.update_rows}, must split evenly over {ranks.world} processes of "
            f"update.rows_per_pass ({config.update.rows_per_pass}) rows",
            param_hint="--set update.rows_per_update",
        )
    if not ranks.leader:
        checkpoint = out / state.trainer_checkpoint if state and state.trainer_checkpoint else None
        _follow(config, out, source, update, ranks, checkpoint)
        return
    if config.policy.sync == "vllm-nccl":
        try:
            require_cuda_for_nccl()
        except WeightSyncError as error:
            raise typer.BadParameter(str(error), param_hint="--set policy.weight_sync") from None
    served = embedded_server(config, source)
    tokenizer = config.policy.tokenizer or str(source)
    try:
        documents = "none" if config.ablations.no_corpus else config.designer.corpus
        corpus = Corpus(open_source(documents, config.designer.text_field), max_tokens=config.designer.document_tokens)
    except CorpusError as error:
        raise typer.BadParameter(str(error), param_hint="--set designer.corpus") from None
    pool = pool_worlds(config)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(config.model_dump_json(indent=2))
    run_id = state.run_id if state else uuid.uuid4().hex[:12]
    with ExitStack() as stack:
        try:
            tracked = open_tracker(config.run.report_to, out, run_id, config.model_dump(mode="json"), state is not None)
            tracker = stack.enter_context(closing(tracked))
        except TrackerError as error:
            raise typer.BadParameter(str(error), param_hint="--set run.report_to") from None
        server = None
        if served is not None:
            slots = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="spadework-slots-")))
            try:
                server = stack.enter_context(EmbeddedServer(replace(served, slot_dir=slots)))
            except ServerStartError as error:
                raise typer.BadParameter(str(error), param_hint="--set policy.model") from None
        urls = [server.base_url] if server else list(config.policy.endpoints)
        if not urls:  # policy.server=vllm
            urls = [_started_vllm(stack, config, source)]
        try:
            anyio.run(_run, config, out, corpus, urls, source, tokenizer, server, state, update, ranks, run_id, tracker,
                      pool)  # fmt: skip
        except InfrastructureFailure as error:
            exit_for_infrastructure(error, f"continue with --resume {out} once it is fixed")
    Console().print(_held_out_table(read_held_out(out)))


def _configured_run(preset: str | None, overrides: list[str], out: Path | None, resume: Path | None,
                    check_empty: bool) -> tuple[TrainConfig, Path, RunState | None]:  # fmt: skip
    """The run's config, directory and (resuming) checkpoint state, or one clear error."""
    if resume is not None:
        if out is not None or preset is not None:
            raise typer.BadParameter("a resumed run keeps its directory and preset; drop --out and --preset")
        try:
            config = resumed_config(resume / "config.json", overrides)
            if not (resume / STATE_DIR / STATE_FILE).exists() and check_empty:
                _start_over(resume)
                return config, resume, None
            return config, resume, load_state(resume)
        except (ResumeError, ConfigError) as error:
            raise typer.BadParameter(str(error), param_hint="--resume") from None
    out = out or Path("runs/train")
    if preset is not None and preset not in PRESETS:  # "" too: it silently meant cpu-tiny
        raise typer.BadParameter(f"no preset {preset!r}; choose one of: {', '.join(PRESETS)}", param_hint="--preset")
    try:
        config = load_config("cpu-tiny" if preset is None else preset, overrides)
    except ConfigError as error:
        raise typer.BadParameter(str(error), param_hint="--set") from None
    if check_empty and out.exists() and any(out.iterdir()):  # other processes of the run see the first's files
        raise typer.BadParameter(f"{out} already holds a run; continue it with --resume {out}, or give a new --out")
    if config.run.before_from is not None:  # refused now, not after the server has started
        try:
            shared_before(Path(config.run.before_from), config)
        except BeforeUnavailable as error:
            raise typer.BadParameter(str(error), param_hint="--set run.before_from") from None
    try:
        compute_target(config)
    except ComputeTargetError as error:
        raise typer.BadParameter(str(error), param_hint="--set agent.compute_from") from None
    return config, out, None


def _start_over(out: Path) -> None:
    """A run stopped before its first checkpoint (killed, or its server failed to start) has nothing to resume
    from: it starts over, with the config it was given, in the same directory."""
    log.warning("no checkpoint yet: the run starts over with its config", out=str(out))
    for path in out.iterdir():
        if path.name != "config.json":
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def _started_vllm(stack: ExitStack, config: TrainConfig, source: Path | str) -> str:
    """vLLM's CPU build serving the policy's float checkpoint, for the run's length; its OpenAI base URL."""
    from engine.vllm_server import VLLMServer, VLLMSettings, hf_model

    try:
        model = hf_model(str(source))
        settings = VLLMSettings(
            model=model, served_name=config.policy.served_name, max_lora_rank=config.policy.lora_rank
        )
        return stack.enter_context(VLLMServer(settings)).base_url
    except (ServerStartError, ModelNotFoundError) as error:
        raise typer.BadParameter(str(error), param_hint="--set policy.server") from None


async def _run(
    config: TrainConfig,
    out: Path,
    corpus: Corpus,
    urls: list[str],
    source: Path | str,
    tokenizer: str,
    server: EmbeddedServer | None,
    state: RunState | None,
    update: UpdateSettings,
    ranks: Ranks,
    run_id: str,
    tracker: Tracker,
    pool: list[RememberedWorld],
) -> None:
    if state is not None:
        restore(out, state)
        log.info("resuming", after_iteration=state.iteration, trainer_checkpoint=state.trainer_checkpoint)
    checkpoint = out / state.trainer_checkpoint if state and state.trainer_checkpoint else None
    from transformers import set_seed

    set_seed(config.run.seed)  # a fresh LoRA adapter's initial weights
    model, hf_tokenizer = load_policy(source, _lora(config), checkpoint)
    sync = _weight_sync(config, source, server, urls, out)
    if sync is None:
        log.warning("policy.weight_sync=none: the endpoints keep serving their own weights (rollouts go off-policy)")
    else:
        if state is not None:
            sync.version = state.weights_version
        sync.start(model, resumed=checkpoint is not None)
    name = (sync.served_model if sync else None) or config.policy.served_name
    # The embedded server samples from the model's own distribution and reports what it sampled from;
    # vLLM does both by default (started with --logprobs-mode processed_logprobs).
    sampling = dict(EXACT_SAMPLING) if server is not None else {}
    completions: Completions = "llama.cpp" if server is not None else "openai"  # llama.cpp's API with every id
    # An episode that fills a slot's context ends on its state, not in a request the server refuses.
    context = server.settings.context if server is not None else None
    agent = agent_settings(config, name, tokenizer, sampling, completions, context)
    parallel = server.settings.parallel if server is not None else None
    settings = design_settings(config, agent, name, tokenizer, sampling, completions, parallel)
    feed = BroadcastRowFeed(ranks) if ranks.world > 1 else RowFeed()
    trainer = grpo_trainer(model, hf_tokenizer, feed, update, out / TRAINER_DIR, config.run.iterations,
                           processes=ranks.world)  # fmt: skip
    learner = Learner(trainer, feed, sync, config.update_rows, config.run.seed,
                      resume_from=checkpoint, updates_done=state.updates if state else 0)  # fmt: skip
    try:
        async with AsyncExitStack() as stack:
            sandbox = await stack.enter_async_context(SandboxPool())
            endpoints = await stack.enter_async_context(EndpointPool.open(urls))
            memory = stack.enter_context(WorldMemory.open(out / "memory.sqlite"))
            if pool:
                log.info("archive started from a pool", worlds=sum(memory.remember(world) for world in pool))
            design = DesignRun(run_id, out, corpus, endpoints, sandbox, memory, settings, config.run.seed)
            peak = stack.enter_context(PeakMemory())
            loop = SelfPlay(config, out, design, endpoints, agent, learner, trainer_checkpoint=checkpoint,
                            share_prefix=server.share_prefix if server else None, memory=peak,
                            tracker=tracker)  # fmt: skip
            await loop.run(state)
    finally:
        learner.close()


def _follow(config: TrainConfig, out: Path, source: Path | str, update: UpdateSettings, ranks: Ranks,
            checkpoint: Path | None) -> None:  # fmt: skip
    """A training process after the first: the same trainer, fed the rows the first one broadcasts."""
    from transformers import set_seed

    set_seed(config.run.seed)  # the same fresh adapter as the first process
    model, tokenizer = load_policy(source, _lora(config), checkpoint)
    trainer = grpo_trainer(model, tokenizer, BroadcastRowFeed(ranks), update, out / TRAINER_DIR, config.run.iterations,
                           processes=ranks.world)  # fmt: skip
    log.info("following the first process", rank=ranks.rank, processes=ranks.world)
    with suppress(TrainingStopped):
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)


def _lora(config: TrainConfig) -> LoraSettings | None:
    policy = config.policy
    if not policy.lora_rank:
        return None
    targets = policy.lora_targets
    modules = targets if targets == "all-linear" else tuple(name.strip() for name in targets.split(","))
    return LoraSettings(policy.lora_rank, policy.lora_alpha or 2 * policy.lora_rank, policy.lora_dropout, modules)


def _weight_sync(
    config: TrainConfig, source: Path | str, server: EmbeddedServer | None, urls: list[str], out: Path
) -> WeightSync | None:
    """The sync `policy.weight_sync` names (config validation has matched it to the endpoints already)."""
    kind = config.policy.sync
    if kind == "reload":
        assert server is not None and isinstance(source, Path)
        return GGUFReloadSync(server, source, out / WEIGHTS_DIR)
    directory = Path(config.policy.weights_dir) if config.policy.weights_dir else out / WEIGHTS_DIR
    if kind == "vllm-lora":
        return VLLMLoRASync(urls, config.policy.adapter_name, directory)
    if kind == "vllm-reload":
        return VLLMReloadSync(urls, directory)
    if kind == "vllm-nccl":
        return VLLMNCCLSync(urls)
    return None


def _held_out_table(held: list[HeldOut]) -> Table:
    suite = held[0].suite if held else "suite"
    table = Table("when", f"{suite} success", f"{suite} partial credit", "episodes", "full tasks without hint",
                  "full tasks with hint", title="held-out tasks (never trained on)")  # fmt: skip
    for result in held:
        when = "before training" if result.after_iteration < 0 else f"after iteration {result.after_iteration}"
        table.add_row(when, f"{result.success:.1%}", f"{result.partial_credit:.3f}", str(len(result.scored)),
                      _share(result.mean_plain), _share(result.mean_hinted))  # fmt: skip
    return table


def _share(value: float | None) -> str:
    return "not played" if value is None else f"{value:.1%}"


def report(
    run: Annotated[Path, typer.Argument(help="A training run's directory (what `spadework train --out` made).")],
    out: Annotated[Path | None, typer.Option(help="Where the page and plots go (default: RUN/report).")] = None,
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


def train_compare(
    out: Annotated[Path, typer.Option(help="The comparison's directory: one run per seed and arm under it.")] = Path(
        "runs/compare"
    ),
    preset: Annotated[str, typer.Option(help="The preset every arm starts from.")] = "cpu-tiny",
    seeds: Annotated[int, typer.Option(min=1, help="Seeds per arm: run.seed and the ones after it.")] = 2,
    overrides: Annotated[
        list[str], typer.Option("--set", help="Override a knob in every arm: --set run.iterations=3 (repeatable).")
    ] = [],  # noqa: B006
    endpoint: Annotated[
        list[str], typer.Option(help="A vLLM server's OpenAI base URL (repeatable): policy.endpoints, every arm.")
    ] = [],  # noqa: B006
) -> None:
    """SPADE against the fixed-pool and frozen-designer ablations at equal agent compute (the same iterations,
    update size and agent tasks per iteration; a reference task stands in for each designed world not played),
    on several seeds, the untrained policy measured once per seed: each arm's held-out lift with its 95% CI,
    pooled over seeds, the paired differences spade - fixed-pool and spade - frozen-designer, and each arm's
    agent episodes and tokens, in one table (also OUT/compare.md and .json). Run it again on the same OUT to
    resume a killed arm or just print the table."""
    if endpoint:
        overrides = [*overrides, f"policy.endpoints={json.dumps(endpoint)}"]
    try:
        runs = run_arms(preset, overrides, out, seeds)
        found = comparison(runs)
    except ConfigError as error:
        raise typer.BadParameter(str(error), param_hint="--set") from None
    except (CompareError, ReportError) as error:
        raise typer.BadParameter(str(error), param_hint="--out") from None
    write_comparison(out, found)
    table = Table(*COLUMNS, title=f"SPADE against its ablations ({preset}, equal agent compute): {out}")
    for cells in rows(found):
        table.add_row(*cells)
    console = Console()
    console.print(table)
    for line in difference_lines(found):
        console.print(line)
    for line in gap_lines(found):
        console.print(line, style="red")
