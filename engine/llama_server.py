"""The embedded model server: llama.cpp's own HTTP server, from the prebuilt `xllamacpp` wheel.

`spadework serve` runs it in the foreground (`serve_forever`). Everything else that needs a model and was
given no `--endpoint` starts `spadework serve` as a child process through `EmbeddedServer` (a
`engine.child_server.ChildServer`): a crash or a reload never takes the engine down, and SIGTERM stops it cleanly.

llama.cpp gives continuous batching over `parallel` slots, `/v1/chat/completions` (with a JSON-schema
`response_format` for the engine's `constrained` mode), `/v1/completions` with token-id prompts and
per-token ids and logprobs (the engine's `tokens` mode), `/health`, `/tokenize` and `/metrics`.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
import structlog
import typer

from engine.chat_template import CHATML_WITH_TOOLS
from engine.child_server import READY_LINE, ChildServer, ServerStartError

log = structlog.get_logger()


# Request fields that make llama.cpp sample from the model's own distribution (its default chain also cuts
# to top-k 40, top-p 0.95 and min-p 0.05). The logprob it reports for each token is the model's full
# softmax at temperature 1, before any grammar: at temperature 1 that is exactly the probability a trainer
# computes for the same weights. (`post_sampling_probs` would report the tempered, grammar-renormalised
# probability, but under a grammar only when its sampler resampled: measured here, the same token was
# reported at 0.547 and at 0.851 depending on the path, so it is not used.)
EXACT_SAMPLING: dict[str, object] = {"top_k": 0, "top_p": 1.0, "min_p": 0.0}


# llama.cpp's CPU threads (OpenMP) meet at a barrier after every operation, hundreds of times a token.
# spadework sets OMP_WAIT_POLICY=PASSIVE for torch (spadework/__init__.py), and a server process inherits it:
# every barrier became a futex sleep and the embedded model decoded at 40 ms a token on 2 cores instead of 20.
# A bounded spin before sleeping keeps the speed, and idle threads still sleep (0.02 s of CPU in 3 idle
# seconds, against 3.0 s under OMP_WAIT_POLICY=ACTIVE, which would take a core from the trainer).
# Measured by benchmarks/perf/embedded_server.py. libgomp reads it once, when llama.cpp loads.
LLAMA_OPENMP_SPIN = {"GOMP_SPINCOUNT": "1000000"}


def default_threads() -> int:
    return os.cpu_count() or 1


@dataclass(frozen=True)
class ServerSettings:
    """How llama.cpp serves one GGUF model."""

    model: Path
    host: str = "127.0.0.1"
    port: int = 0
    parallel: int = 4
    # Tokens one episode may hold: each slot gets a KV cache of its own of this size (`context * parallel` in
    # all); llama.cpp caps each slot at the model's training context anyway.
    context: int = 8192
    threads: int = field(default_factory=default_threads)
    # The tool-aware ChatML template the engine's `tokens` mode renders with; None keeps the model's own.
    chat_template: str | None = CHATML_WITH_TOOLS
    # Where slots' KV states may be saved and restored (`/slots/N?action=save|restore`); None: not at all.
    slot_dir: Path | None = None
    # Host memory for prompts evicted from the slots, kept in case a request comes back to them (llama.cpp's
    # default is 8 GiB). Episodes here never come back to a prompt they left, and without a cap the server
    # grew from 2.3 to 2.9 GB over one main-job run.
    cache_ram_mib: int = 512
    # One KV pool shared by all slots (llama.cpp's `kv_unified`) instead of a cache per slot. In a shared pool
    # every token of a batch attends over all the slots' cells, masked: measured by `just bench-embedded` (4 slots,
    # each on its own ~1,200-token prompt), a decoding step took 1,244 ms in one pool with flash attention (the
    # settings before) and 82 ms per slot without; and a prefix restored into the pool was reused by 2 of 4 slots.
    kv_unified: bool = False
    # llama.cpp's flash-attention kernel. On this AVX2 CPU it is slower where the main job spends its time
    # (`just bench-embedded`, per-slot caches at ~1,200 tokens of context): a decoding step 34 against 29 ms alone
    # and 136 against 82 ms with 4 slots; 60 new tokens read 983 against 788 ms.
    flash_attention: bool = False

    def arguments(self) -> list[str]:
        """The `spadework serve` arguments that reproduce these settings."""
        arguments = ["--model", str(self.model), "--host", self.host, "--port", str(self.port)]
        arguments += ["--parallel", str(self.parallel), "--context", str(self.context), "--threads", str(self.threads)]
        arguments += ["--cache-ram", str(self.cache_ram_mib)]
        arguments += ["--kv-unified" if self.kv_unified else "--no-kv-unified"]
        arguments += ["--flash-attention" if self.flash_attention else "--no-flash-attention"]
        if self.slot_dir is not None:
            arguments += ["--slot-dir", str(self.slot_dir)]
        return [*arguments, "--own-template"] if self.chat_template is None else arguments


def check_port_free(host: str, port: int) -> None:
    """llama.cpp only logs a failed bind; try it first (with the project's own `bind`) for one clear error."""
    if port == 0:
        return
    from toolworlds.hosting.serving import bind  # uvicorn and the world contract: not at every command's start

    try:
        bind(host, port).close()
    except typer.BadParameter as error:
        raise ServerStartError(error.message) from None


def start_llama(settings: ServerSettings) -> Any:
    """Start llama.cpp's server in this process; returns the `xllamacpp.Server` (it serves until deleted)."""
    for name, value in LLAMA_OPENMP_SPIN.items():
        os.environ.setdefault(name, value)  # before xllamacpp loads libgomp; a value set by the user wins
    import xllamacpp

    check_port_free(settings.host, settings.port)
    params = llama_params(settings)
    try:
        return xllamacpp.Server(params)
    except RuntimeError:
        # The reason is in llama.cpp's own log lines above (a bad file, an unsupported architecture, ...).
        raise ServerStartError(f"llama.cpp could not load {settings.model} (its log above says why)") from None


def llama_params(settings: ServerSettings) -> Any:
    """llama.cpp's `common_params` for `settings`."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(settings.model)
    params.hostnames = [settings.host]
    params.port = settings.port
    params.n_parallel = settings.parallel
    params.n_ctx = settings.context * settings.parallel
    params.kv_unified = settings.kv_unified
    attention = xllamacpp.llama_flash_attn_type
    flash, plain = attention.LLAMA_FLASH_ATTN_TYPE_ENABLED, attention.LLAMA_FLASH_ATTN_TYPE_DISABLED
    params.flash_attn_type = flash if settings.flash_attention else plain
    params.cache_ram_mib = settings.cache_ram_mib
    params.cpuparams.n_threads = settings.threads
    params.cpuparams_batch.n_threads = settings.threads
    if settings.chat_template is not None:
        params.chat_template = settings.chat_template
    if settings.slot_dir is not None:
        params.slot_save_path = f"{settings.slot_dir}/"
    return params


def serve_forever(settings: ServerSettings) -> None:
    """Serve until SIGTERM or SIGINT, then free the model and return."""
    server = start_llama(settings)
    url = server.listening_address
    print(f"{READY_LINE} {settings.model.name} on {url}/v1", flush=True)
    log.info("serving", model=str(settings.model), url=f"{url}/v1", parallel=settings.parallel)
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        while not stop.wait(0.5):
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        del server  # xllamacpp stops its HTTP threads and frees the model when the object goes
        log.info("server stopped", url=f"{url}/v1")


def _ok(response: httpx.Response) -> None:
    if response.status_code != 200:
        raise RuntimeError(f"{response.request.url}: {response.status_code} {response.text[:300]}")


class EmbeddedServer(ChildServer):
    """`spadework serve` (llama.cpp) in a child process (`ChildServer`), and priming its slots' caches."""

    name = "embedded server"
    settings: ServerSettings

    def __init__(self, settings: ServerSettings, start_timeout_s: float = 120.0) -> None:
        super().__init__(settings, start_timeout_s)

    def command(self) -> list[str]:
        return [sys.executable, "-m", "spadework", "serve", *self.settings.arguments()]

    def share_prefix(self, prompt_ids: list[int]) -> int:
        """Compute the KV cache of `prompt_ids` once and copy it into every slot; returns the slots primed.

        Episodes of one world open with the same few thousand tokens (rules and tool schemas). llama.cpp
        reuses a prefix only within a slot, so episodes starting together would each compute it again:
        on 2 cores, 3,000 tokens take about 20 s per slot. Call this while no request is in flight (the
        slots must be idle); the server needs `slot_dir`.
        """
        if self.settings.slot_dir is None:
            raise RuntimeError("share_prefix needs ServerSettings.slot_dir (llama.cpp's --slot-save-path)")
        root = self.base_url.removesuffix("/v1")
        name = f"prefix-{os.getpid()}.bin"
        body = {"prompt": prompt_ids, "n_predict": 0, "id_slot": 0, "cache_prompt": True}
        with httpx.Client(timeout=600) as client:
            _ok(client.post(f"{root}/completion", json=body))
            _ok(client.post(f"{root}/slots/0", params={"action": "save"}, json={"filename": name}))
            try:
                for slot in range(1, self.settings.parallel):
                    _ok(client.post(f"{root}/slots/{slot}", params={"action": "restore"}, json={"filename": name}))
            finally:
                (self.settings.slot_dir / name).unlink(missing_ok=True)
        return self.settings.parallel
