# spadework recipes. `just --list` shows them all.

set shell := ["bash", "-euo", "pipefail", "-c"]

# The main job as it stands: score the oracle and a random policy on every reference world, then show one play.
play world="banking" seed="0":
    spadework toolworld eval --seeds 200
    spadework toolworld play {{world}} --seed {{seed}} --policy oracle

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

# Steps per second in-process vs over the HTTP session API vs over MCP, side by side.
bench-toolworlds world="banking":
    python benchmarks/toolworld_steps.py --world {{world}}
