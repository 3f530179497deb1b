"""`spadework rollout` (play episodes against endpoints, into a run directory), `serve` and `vllm` (model servers)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import AsyncExitStack, ExitStack, contextmanager
from pathlib import Path
from typing import Annotated, Literal, NoReturn

import anyio
import structlog
import typer
from rich.console import Console

from engine.chat_template import CHATML_WITH_TOOLS
from engine.child_server import ERROR_PREFIX, ServerStartError
from engine.endpoints import EndpointPool, RetryPolicy, endpoint_problem
from engine.environments import Environment, playing
from engine.llama_server import EmbeddedServer, ServerSettings, default_threads, serve_forever
from engine.local_models import ModelNotFoundError, resolve_gguf
from engine.report import live_progress, summary_table
from engine.rollout import MAX_FAILED_SHARE, Hints, RolloutPlan, RolloutStats, infrastructure_failure, run_rollout
from engine.settings import Completions, EpisodeSettings, Mode
from engine.store import PLAN_FILE, StoreError, TrajectoryStore, read_plan, read_records
from engine.templates import load_template
from engine.trajectory import EpisodeRecord
from engine.transport import TransportKind
from engine.vllm_server import VLLMSettings, hf_model, install_vllm, serve_vllm_forever
from toolworlds.episode import LocalWorld
from toolworlds.hosting.serving import HostOption
from toolworlds.registry import UnknownWorldError, is_model_written, load_world
from toolworlds.sandbox import SandboxPool, WorldLoadError
from toolworlds.untrusted.worlds import load_world_file

log = structlog.get_logger()

# Options every command that plays a model takes (`rollout`, `bench ...`).
EndpointOption = Annotated[
    list[str], typer.Option(help="OpenAI base URL (repeat for several). None: start the embedded model server.")
]
LocalModelOption = Annotated[
    str, typer.Option(help="Without --endpoint: the .gguf to serve, or 'default' (SmolLM2-135M).")
]
LocalParallelOption = Annotated[int, typer.Option(min=1, help="Without --endpoint: the server's batch slots.")]
RequestTimeoutOption = Annotated[float, typer.Option(min=0.01, help="Seconds per request attempt.")]
MaxFailedShareOption = Annotated[
    float,
    typer.Option(min=0.0, max=1.0, help="Exit with status 3 when more than this share of the episodes played (or "
                 "all of them) failed for infrastructure reasons (endpoint, sandbox); a rerun plays those again."),
]  # fmt: skip
INFRASTRUCTURE_EXIT = 3
ProgressOption = Annotated[
    bool, typer.Option(help="Show progress: a live bar on a terminal, else a log line every 10 s.")
]


def rollout(
    world: Annotated[
        str,
        typer.Option(help="A name, file.py:Class or module:Class (trusted), or file.py (model-written: sandboxed)."),
    ],
    out: Annotated[Path, typer.Option(help="Run directory; an existing one is resumed.")],
    endpoint: EndpointOption = [],  # noqa: B006
    local_model: LocalModelOption = "default",
    local_parallel: LocalParallelOption = 4,
    tasks: Annotated[int, typer.Option(min=1, help="How many seeds (tasks).")] = 10,
    samples: Annotated[int, typer.Option(min=1, help="Plays per task (and per hint setting).")] = 1,
    first_seed: Annotated[int, typer.Option(help="The first seed.")] = 0,
    hints: Annotated[Hints, typer.Option(help="Plays without the hint, with it, or both.")] = "plain",
    model: Annotated[str, typer.Option(help="The model name sent to the server.")] = "default",
    mode: Annotated[
        Mode,
        typer.Option(
            help="chat (tools; native or text calls), constrained (JSON schema) or tokens (the "
            "engine renders prompts and keeps every token id: for training)."
        ),
    ] = "chat",
    concurrency: Annotated[int, typer.Option(min=1, help="Episodes live at once.")] = 256,
    max_in_flight: Annotated[int, typer.Option(min=1, help="Requests in flight per endpoint.")] = 4096,
    env_concurrency: Annotated[int, typer.Option(min=1, help="World steps running at once.")] = 64,
    max_turns: Annotated[int, typer.Option(min=1, help="Model replies per episode before it is cut.")] = 30,
    max_tokens: Annotated[int, typer.Option(min=1, help="Completion tokens per turn.")] = 512,
    episode_tokens: Annotated[
        int | None, typer.Option(min=1, help="Token budget per episode (default: the embedded server's context).")
    ] = None,
    temperature: Annotated[float, typer.Option(min=0.0, help="Sampling temperature.")] = 1.0,
    token_ids: Annotated[
        bool, typer.Option(help="chat: ask for token ids and logprobs (vLLM return_token_ids).")
    ] = False,
    completions: Annotated[
        Completions,
        typer.Option(help="tokens mode: the endpoints' completions API (llama.cpp: its own, with every id)."),
    ] = "openai",
    tokenizer: Annotated[
        str | None,
        typer.Option(
            help="tokens mode: 'default' or a .gguf (the served model's tokenizer), a local Hugging Face "
            "tokenizer directory or hub id, or 'bytes'."
        ),
    ] = None,
    request_timeout: RequestTimeoutOption = 600.0,
    episode_timeout: Annotated[float, typer.Option(min=0.01, help="Seconds per episode.")] = 1800.0,
    retries: Annotated[int, typer.Option(min=0, help="Extra attempts after a transport failure or 5xx.")] = 3,
    api_key: Annotated[str, typer.Option(envvar="OPENAI_API_KEY", help="Bearer token for the endpoints.")] = "none",
    transport: Annotated[
        TransportKind, typer.Option(help="HTTP client: aiohttp on asyncio, or the openai SDK.")
    ] = "auto",
    backend: Annotated[Literal["asyncio", "trio"], typer.Option(help="AnyIO backend.")] = "asyncio",
    run_id: Annotated[str | None, typer.Option(help="Run id (default: kept from --out, or a new one).")] = None,
    max_failed_share: MaxFailedShareOption = MAX_FAILED_SHARE,
    progress: ProgressOption = True,
) -> None:
    """Play a world's tasks through OpenAI-compatible endpoints and store every episode as it finishes."""
    require_usable(endpoint)
    sandboxed = is_model_written(world)
    if sandboxed and not Path(world).is_file():
        raise typer.BadParameter(f"no such file: {world}", param_hint="--world")
    try:
        trusted = None if sandboxed else LocalWorld(load_world(world))
    except UnknownWorldError as error:
        raise typer.BadParameter(str(error), param_hint="--world") from None
    if run_id is None:
        run_id = read_plan(out).get("run") if (out / PLAN_FILE).exists() else None
        run_id = run_id or uuid.uuid4().hex[:12]
    served = embedded_unless(endpoint, local_model, local_parallel)
    if mode == "tokens":
        if tokenizer is None and served is not None:
            tokenizer = str(served.model)  # the served model's own tokenizer, with the server's template
        if tokenizer is None:
            raise typer.BadParameter("tokens mode renders prompts itself: give --tokenizer", param_hint="--tokenizer")
        try:
            load_template(tokenizer)
        except (ValueError, OSError) as error:
            raise typer.BadParameter(str(error), param_hint="--tokenizer") from None
    settings = EpisodeSettings(
        mode=mode,
        model=model,
        max_turns=max_turns,
        max_tokens_per_turn=max_tokens,
        max_episode_tokens=episode_tokens or (served.context if served is not None else None),
        temperature=temperature,
        request_timeout_s=request_timeout,
        episode_timeout_s=episode_timeout,
        token_ids=token_ids,
        tokenizer=tokenizer,
        completions="llama.cpp" if served is not None else completions,
    )
    plan = RolloutPlan(
        run=run_id,
        world=world,
        tasks=tasks,
        first_seed=first_seed,
        samples=samples,
        hints=hints,
        settings=settings,
    )
    try:
        store = TrajectoryStore.open(out, plan)
    except StoreError as error:
        raise typer.BadParameter(str(error), param_hint="--out") from None
    console = Console(stderr=True)
    stats = RolloutStats(planned=plan.size)
    retry = RetryPolicy(attempts=retries + 1)

    async def main(urls: list[str]) -> None:
        async with AsyncExitStack() as stack:
            environments: Callable[[], Environment]
            if trusted is None:  # model-written code: played only inside the sandbox, whose processes pace it
                sandbox = await stack.enter_async_context(SandboxPool())
                environments = playing(await load_world_file(sandbox, Path(world)))
            else:
                environments = playing(trusted, env_concurrency)
            pool = await stack.enter_async_context(
                EndpointPool.open(urls, api_key=api_key, max_in_flight=max_in_flight, retry=retry, transport=transport)
            )
            await run_rollout(plan, store, pool, environments, concurrency, stats)

    log.info("rollout starting", run=run_id, out=str(out), planned=plan.size, already_done=len(store.finished),
             failed_before=len(store.failed))  # fmt: skip
    interrupted = False
    with ExitStack() as stack:
        stack.enter_context(store)
        endpoint = stack.enter_context(endpoint_urls(endpoint, served))
        stack.enter_context(live_progress(stats, console, progress))
        try:
            anyio.run(main, endpoint, backend=backend)
        except KeyboardInterrupt:
            interrupted = True
        except WorldLoadError as error:
            raise typer.BadParameter(f"the world does not load in the sandbox: {error}", param_hint="--world") from None
    Console().print(summary_table(stats))  # results on stdout; progress and logs on stderr
    log.info("rollout finished" if not interrupted else "rollout interrupted", run=run_id, stored=len(store.finished))
    if interrupted:
        raise typer.Exit(130)
    exit_if_infrastructure_failed(read_records(out), max_failed_share)


def exit_if_infrastructure_failed(records: Iterable[EpisodeRecord], max_share: float) -> None:
    """A run whose episodes mostly failed for infrastructure reasons says why in one line and exits 3."""
    failure = infrastructure_failure(records, max_share)
    if failure is not None:
        exit_for_infrastructure(failure, "run the same command again to play them")


def exit_for_infrastructure(failure: object, then: str) -> NoReturn:
    """The one line every command ends with when the infrastructure failed it (what failed, and what to do
    once it is fixed), and exit status 3."""
    Console(stderr=True).print(f"[red]error:[/red] {failure}: {then}", highlight=False, soft_wrap=True)
    raise typer.Exit(INFRASTRUCTURE_EXIT)


def embedded_unless(endpoints: list[str], local_model: str, parallel: int) -> ServerSettings | None:
    """The embedded server to start when no endpoint is given; a missing model is a usage error."""
    if endpoints:
        return None
    try:
        return ServerSettings(model=resolve_gguf(local_model), parallel=parallel)
    except ModelNotFoundError as error:
        raise typer.BadParameter(str(error), param_hint="--local-model") from None


def require_usable(endpoints: list[str]) -> None:
    """A usage error for the first endpoint that is not an http(s) base URL."""
    problems = [problem for problem in map(endpoint_problem, endpoints) if problem is not None]
    if problems:
        raise typer.BadParameter(problems[0], param_hint="--endpoint")


@contextmanager
def endpoint_urls(endpoints: list[str], served: ServerSettings | None) -> Iterator[list[str]]:
    """The endpoints given, or the embedded server's URL while it runs (started and stopped here)."""
    require_usable(endpoints)
    if served is None:
        yield list(endpoints)
        return
    with ExitStack() as stack:
        try:
            server = stack.enter_context(EmbeddedServer(served))
        except ServerStartError as error:
            raise typer.BadParameter(str(error), param_hint="--local-model") from None
        yield [server.base_url]


def vllm(
    model: Annotated[
        str,
        typer.Option(
            help="A Hugging Face checkpoint directory, a local .gguf file (served as its float checkpoint), "
            "or 'default' (the embedded SmolLM2-135M)."
        ),
    ] = "default",
    host: HostOption = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free one).")] = 8000,
    served_name: Annotated[str, typer.Option(help="The model name requests ask for.")] = "default",
    max_model_len: Annotated[
        int, typer.Option(min=256, help="Tokens one request may hold.")
    ] = VLLMSettings.max_model_len,
    dtype: Annotated[str, typer.Option(help="Weights' precision (float32: the trainer's own).")] = VLLMSettings.dtype,
    kv_cache_gib: Annotated[
        int, typer.Option(min=1, help="GiB of host memory for the KV cache.")
    ] = VLLMSettings.kv_cache_gib,
    threads: Annotated[int | None, typer.Option(min=1, help="CPU threads (default: all cores).")] = None,
    max_lora_rank: Annotated[int, typer.Option(min=0, help="Allow LoRA adapters up to this rank (0: none).")] = 16,
    tool_parser: Annotated[str, typer.Option(help="vLLM's tool-call parser for chat mode.")] = VLLMSettings.tool_parser,
    install: Annotated[bool, typer.Option(help="Install vLLM's CPU build into its own environment first.")] = False,
) -> None:
    """Serve a model with vLLM's CPU build over an OpenAI-compatible API, until SIGTERM or Ctrl-C."""
    with _startup_errors_as_one_line():
        if install:
            install_vllm()
        settings = VLLMSettings(
            model=hf_model(model),
            host=host,
            port=port,
            served_name=served_name,
            max_model_len=max_model_len,
            dtype=dtype,
            kv_cache_gib=kv_cache_gib,
            threads=threads or default_threads(),
            max_lora_rank=max_lora_rank,
            tool_parser=tool_parser,
        )
        serve_vllm_forever(settings)


def serve(
    model: Annotated[
        str, typer.Option(help="A local .gguf file, or 'default' (the embedded SmolLM2-135M).")
    ] = "default",
    host: HostOption = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free one).")] = 8080,
    parallel: Annotated[int, typer.Option(min=1, help="Slots decoded together (continuous batching).")] = 4,
    context: Annotated[int, typer.Option(min=256, help="Context tokens per slot (one episode).")] = 8192,
    threads: Annotated[int | None, typer.Option(min=1, help="CPU threads (default: all cores).")] = None,
    own_template: Annotated[
        bool, typer.Option(help="Keep the model's own chat template instead of spadework's tool-aware one.")
    ] = False,
    slot_dir: Annotated[
        Path | None, typer.Option(help="Allow saving and restoring slots' KV caches here (/slots/N?action=...).")
    ] = None,
    cache_ram: Annotated[
        int, typer.Option(min=0, help="MiB of host memory for prompts evicted from the slots (0: none).")
    ] = ServerSettings.cache_ram_mib,
    kv_unified: Annotated[
        bool, typer.Option(help="One KV pool for all slots instead of one cache per slot (slower to decode here).")
    ] = ServerSettings.kv_unified,
    flash_attention: Annotated[
        bool, typer.Option(help="llama.cpp's flash-attention kernel (slower to decode long contexts on AVX2 CPUs).")
    ] = ServerSettings.flash_attention,
) -> None:
    """Serve a local GGUF model over an OpenAI-compatible API (llama.cpp), until SIGTERM or Ctrl-C."""
    with _startup_errors_as_one_line():
        settings = ServerSettings(
            model=resolve_gguf(model),
            host=host,
            port=port,
            parallel=parallel,
            context=context,
            threads=threads or default_threads(),
            chat_template=None if own_template else CHATML_WITH_TOOLS,
            slot_dir=slot_dir,
            cache_ram_mib=cache_ram,
            kv_unified=kv_unified,
            flash_attention=flash_attention,
        )
        serve_forever(settings)


@contextmanager
def _startup_errors_as_one_line() -> Iterator[None]:
    """A server command that cannot start says why in one line a parent process (`EmbeddedServer`) can pick out
    of the server's own log, and exits 2."""
    try:
        yield
    except (ModelNotFoundError, ServerStartError) as error:
        typer.echo(f"{ERROR_PREFIX}{error}", err=True)
        raise typer.Exit(2) from None


def show(
    out: Annotated[Path, typer.Argument(help="A rollout's run directory.")],
    as_json: Annotated[bool, typer.Option("--json", help="One JSON record per line instead of a table.")] = False,
    parquet: Annotated[Path | None, typer.Option(help="Write all records to this Parquet file instead.")] = None,
) -> None:
    """List a run's stored episodes, or export them (JSON lines, Parquet)."""
    from rich.table import Table

    from engine.store import read_records

    try:
        if parquet is not None:
            from engine.parquet import export_parquet

            rows = export_parquet(out, parquet)
            typer.echo(f"wrote {rows} episodes to {parquet}")
            return
        records = read_records(out)
        if as_json:
            for record in records:
                sys.stdout.write(record.model_dump_json() + "\n")
            return
        table = Table(title=str(out))
        for column in ("episode", "status", "cause", "reward", "turns", "calls", "malformed"):
            table.add_column(column)
        for record in records:
            reward = "-" if record.reward is None else f"{record.reward:.2f}"
            row = (record.key.text, record.status, record.cause or "", reward)
            table.add_row(*row, str(len(record.turns)), str(record.tool_calls), str(record.malformed_turns))
    except StoreError as error:
        raise typer.BadParameter(str(error), param_hint="OUT") from None
    Console().print(table)
