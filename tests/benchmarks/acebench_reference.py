"""Record what the reference ACEBench pipeline makes of the scripted imperfect agent (`acebench_imperfect`).

    python -m tests.benchmarks.acebench_reference --reference DIR --python PY [--out FILE]

DIR is a checkout of github.com/chenchen0103/ACEBench at 56dd66cf6439b0d9655ee1b353e4cd745c6f664e; PY an
interpreter with its requirements (openai 1.64.0, python-dotenv, tqdm, pandas, openpyxl; not vllm). For each
language, the reference's own `generate.py` (agent and user simulator: its OpenAI clients, pointed at the
scripted server) and `eval_main.py` run on a copy of its Agent data holding only the planned tasks; vllm and
google-generativeai, which it imports but never uses for an API model, are stubbed. The end-state verdict and
process accuracy of every task, and a digest of every request it sent, go to
`benchmarks/acebench/data/reference_imperfect.json`, which `test_acebench_differential.py` holds spadework to.
Network-free and about a minute; run it again only when the plan or the scripted agent changes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.acebench.data import VENDORED, AceTask, load_tasks
from tests.benchmarks.acebench_imperfect import MISTAKES, ImperfectAce, plan
from tests.benchmarks.scripted import serving

COMMIT = "56dd66cf6439b0d9655ee1b353e4cd745c6f664e"
RECORD = VENDORED / "reference_imperfect.json"
MODEL = "gpt-4o"  # a name the reference maps to its OpenAI client with GPT_* endpoints
KINDS = ("agent_multi_turn", "agent_multi_step")
STUBS = """import os, runpy, sys, types
for name in ("vllm", "google", "google.generativeai"):
    module = sys.modules[name] = types.ModuleType(name)
    module.__path__ = []
    module.__getattr__ = lambda attribute: None
sys.modules["google"].generativeai = sys.modules["google.generativeai"]
script, sys.argv = sys.argv[1], sys.argv[1:]
sys.path.insert(0, os.getcwd())
runpy.run_path(script, run_name="__main__")
"""


def run_directory(reference: Path, root: Path, language: str, ids: set[str]) -> Path:
    """The reference's code, and its Agent data for `language` cut down to `ids` (in file order)."""
    root.mkdir(parents=True)
    for name in ("generate.py", "eval_main.py", "category.py", "model_inference", "model_eval"):
        (root / name).symlink_to(reference / name)
    (root / "stubbed.py").write_text(STUBS)
    for sub in ("", "possible_answer"):
        source = reference / "data_all" / f"data_{language}" / sub
        target = root / "data_all" / f"data_{language}" / sub
        target.mkdir(parents=True, exist_ok=True)
        for kind in KINDS:
            rows = [json.loads(line) for line in (source / f"data_{kind}.json").read_text("utf-8").splitlines()]
            kept = [json.dumps(row, ensure_ascii=False) for row in rows if row["id"] in ids]
            (target / f"data_{kind}.json").write_text("".join(line + "\n" for line in kept), "utf-8")
    (root / "score_all" / f"score_{language}" / MODEL).mkdir(parents=True)
    return root


def verdicts(root: Path, language: str, ids: list[str]) -> dict[str, tuple[bool, float]]:
    """Task id -> (end state passed, process accuracy), from the score files (which name tasks by position)."""
    scores = root / "score_all" / f"score_{language}" / MODEL
    found: dict[str, tuple[bool, float]] = {}
    for kind in KINDS:
        kept = [entry for entry in ids if entry.startswith(kind + "_")]
        kept.sort(key=lambda entry: int(entry.rsplit("_", 1)[1]))
        lines = [json.loads(line) for line in (scores / f"data_{kind}_score.json").read_text("utf-8").splitlines()]
        failed = {kept[line["id"]] for line in lines[1:] if not line.get("valid", True)}
        process: dict[str, float] = {}
        process_file = scores / f"data_{kind}_process.json"
        if process_file.exists():
            for line in process_file.read_text("utf-8").splitlines():
                for name, detail in json.loads(line).items():
                    process[kept[int(name.rsplit("_", 1)[1])]] = float(detail["process_accuracy"])
        for entry in kept:
            found[entry] = (entry not in failed, process.get(entry, 1.0))
    return found


def record(reference: Path, python: str) -> dict[str, Any]:
    tasks: list[AceTask] = load_tasks()
    chosen = plan(tasks)
    model = ImperfectAce(tasks, chosen)
    results: dict[str, tuple[bool, float]] = {}
    with serving(model.completion) as url, tempfile.TemporaryDirectory() as scratch:
        for language in ("en", "zh"):
            ids = [key.split("/", 1)[1] for key in chosen if key.startswith(language + "/")]
            root = run_directory(reference, Path(scratch) / language, language, set(ids))
            env = {**os.environ, "GPT_AGENT_BASE_URL": url, "GPT_AGENT_API_KEY": "unused", "GPT_BASE_URL": url,
                   "GPT_API_KEY": "unused", "PYTHONHASHSEED": "0"}  # fmt: skip
            common = ["--model", MODEL, "--category", "agent", "--language", language]
            for script, extra in (("generate.py", ["--user-model", MODEL]), ("eval_main.py", [])):
                subprocess.run([python, "stubbed.py", script, *common, *extra], cwd=root, env=env, check=True,
                               stdout=subprocess.DEVNULL)  # fmt: skip
            results |= {f"{language}/{entry}": verdict for entry, verdict in verdicts(root, language, ids).items()}
            shutil.rmtree(root / "result_all", ignore_errors=True)
    requests: dict[str, list[list[str]]] = {}
    for key, role, digest in model.requests:
        requests.setdefault(key, []).append([role, digest])
    return {
        "about": f"The reference ACEBench pipeline (github.com/chenchen0103/ACEBench @ {COMMIT}: generate.py with "
        f"--model {MODEL}, then eval_main.py) playing tests/benchmarks/acebench_imperfect.py's scripted agent and "
        "user, recorded by tests/benchmarks/acebench_reference.py: per task, the mistake, the end-state verdict, "
        "the process accuracy, and the requests it sent in order (agent or user, and a digest of the messages).",
        "mistakes": list(MISTAKES),
        "tasks": {key: task_record(chosen[key], results[key], requests.get(key, [])) for key in chosen},
    }


def task_record(mistake: str, verdict: tuple[bool, float], requests: list[list[str]]) -> dict[str, Any]:
    return {"mistake": mistake, "end_state": verdict[0], "process": verdict[1], "requests": requests}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reference", type=Path, required=True)
    parser.add_argument("--python", required=True)
    parser.add_argument("--out", type=Path, default=RECORD)
    arguments = parser.parse_args()
    recorded = record(arguments.reference.resolve(), arguments.python)
    arguments.out.write_text(json.dumps(recorded, ensure_ascii=False, indent=1) + "\n", "utf-8")
    print(f"{len(recorded['tasks'])} tasks recorded in {arguments.out}")


if __name__ == "__main__":
    main()
