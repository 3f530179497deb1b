"""bfcl-eval's own pipeline, `bfcl generate` then `bfcl evaluate`, against an OpenAI-compatible server.

    python -m tests.benchmarks.bfcl_official --url URL --root DIR --protocol fc --ids multi_turn_base_0,...

The model is bfcl-eval's `OpenAICompletionsHandler`, in FC mode (tools in the request, no system prompt) or
in prompting mode (its system prompt, `[func(a=1)]` text), registered under a name of our own the way
bfcl-eval's README says to add a model. The CLI imports every
vendor's SDK at start-up; those the OpenAI handler never calls (anthropic, cohere, google-genai, ...) and
the Java/JavaScript parsers of the single-turn checker are stubbed when they are not installed. Prints one
JSON object: entry id -> the official verdict. Runs in a process of its own: the stubs stay there.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

MODELS = {"fc": "spadework-differential-FC", "prompt": "spadework-differential-prompt"}
STUBBED = [
    "anthropic", "anthropic.types", "tree_sitter", "tree_sitter_java", "tree_sitter_javascript", "cohere",
    "google", "google.genai", "google.genai.types", "mistralai", "boto3", "qwen_agent", "qwen_agent.llm",
    "writerai", "datamodel_code_generator", "datamodel_code_generator.model", "datamodel_code_generator.parser",
    "datamodel_code_generator.parser.jsonschema",
]  # fmt: skip


class _Anything:
    """Whatever a stubbed SDK is asked for at import time: a class to subclass, a type to annotate with."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> _Anything:
        return _Anything()

    def __getattr__(self, name: str) -> _Anything:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (object,)


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> _Anything:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()


def stub_missing_sdks() -> list[str]:
    stubbed = []
    for name in STUBBED:
        try:
            importlib.import_module(name)
        except ImportError:
            module = _StubModule(name)
            module.__path__ = []
            sys.modules[name] = module
            stubbed.append(name)
    return stubbed


def verdicts(score_dir: Path, ids: list[str]) -> dict[str, bool]:
    """Entry id -> valid, from the score files: each lists its category's failed entries after a summary line."""
    failed: set[str] = set()
    found = False
    for path in score_dir.rglob("*multi_turn*_score.json"):
        found = True
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        failed |= {line["id"] for line in lines[1:] if "id" in line and not line.get("valid", False)}
    if not found:
        raise SystemExit(f"bfcl evaluate wrote no multi-turn score file under {score_dir}")
    return {entry: entry not in failed for entry in ids}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--ids", required=True)
    parser.add_argument("--protocol", choices=sorted(MODELS), required=True)
    parser.add_argument("--threads", type=int, default=4)
    arguments = parser.parse_args()
    ids = arguments.ids.split(",")
    root: Path = arguments.root
    root.mkdir(parents=True, exist_ok=True)
    os.environ.update(BFCL_PROJECT_ROOT=str(root), OPENAI_BASE_URL=arguments.url, OPENAI_API_KEY="unused")
    stub_missing_sdks()

    from bfcl_eval.constants.model_config import MODEL_CONFIG_MAPPING, ModelConfig
    from bfcl_eval.model_handler.api_inference.openai_completion import OpenAICompletionsHandler

    model = MODELS[arguments.protocol]
    MODEL_CONFIG_MAPPING[model] = ModelConfig(
        model_name="imperfect", display_name=f"scripted ({arguments.protocol})", url="", org="spadework",
        license="", model_handler=OpenAICompletionsHandler, is_fc_model=arguments.protocol == "fc",
        underscore_to_dot=False,
    )  # fmt: skip
    categories: dict[str, list[str]] = {}
    for entry in ids:
        categories.setdefault(entry.rsplit("_", 1)[0], []).append(entry)
    (root / "test_case_ids_to_generate.json").write_text(json.dumps(categories))

    from bfcl_eval.__main__ import cli

    result, score = root / "result", root / "score"
    common = ["--model", model, "--result-dir", str(result)]
    sys.stdout = sys.stderr  # the CLI prints a log per step; our stdout is the verdicts alone
    try:
        generate = ["generate", *common, "--run-ids", "--num-threads", str(arguments.threads)]
        cli(generate, standalone_mode=False)
        evaluate = ["evaluate", *common, "--score-dir", str(score), "--partial-eval", "--test-category",
                    ",".join(categories)]  # fmt: skip
        cli(evaluate, standalone_mode=False)
    finally:
        sys.stdout = sys.__stdout__
    print(json.dumps(verdicts(score, ids)))


if __name__ == "__main__":
    main()
