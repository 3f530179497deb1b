# spadework recipes. `just --list` shows them all.

set shell := ["bash", "-euo", "pipefail", "-c"]

# The main job as it stands: score the oracle and a random policy on every reference world, show one play,
# then drive 400 episodes through the engine against the scripted mock model over real HTTP.
play world="banking" seed="0":
    spadework toolworld eval --seeds 200
    spadework toolworld play {{world}} --seed {{seed}} --policy oracle
    just rollout-mock {{world}}

# Run the engine against the scripted mock model (a real local server): `just rollout-mock orders --fault-rate 0.2 --hang 10`.
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

# Everything CI checks: lint, format, types, tests.
test:
    ruff check .
    ruff format --check .
    mypy
    pytest -m "not slow"

# Suites too slow for every run.
test-slow:
    pytest -m slow

# Rewrite formatting and fix what ruff can fix.
fmt:
    ruff format .
    ruff check --fix .

# Export a world as a standalone JSON-schema API (tools.json, schemas/, openapi.json).
export world out="exports":
    spadework toolworld export {{world}} --out {{out}}/{{world}}

# Serve a world over HTTP (add `--mcp` for MCP).
serve world port="8700" *flags="":
    spadework toolworld serve {{world}} --port {{port}} {{flags}}

# The engine vs a bare aiohttp client vs gather + AsyncOpenAI, at 1,000 / 5,000 / 10,000 live episodes.
bench-engine *flags="":
    python benchmarks/engine_throughput.py {{flags}}

# Steps per second in-process vs over the HTTP session API vs over MCP, side by side.
bench-toolworlds world="banking":
    python benchmarks/toolworld_steps.py --world {{world}}
