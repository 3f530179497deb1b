"""Record what the official tau2 pipeline makes of the scripted imperfect agent, user and judge (`tau2_imperfect`).

    python -m tests.benchmarks.tau2_reference --tau2 PATH [--out FILE]

PATH is the `tau2` command of an installation of github.com/sierra-research/tau2-bench at
a2c024725189473d2d7cea3a5cfdbcc67478e41f (Python 3.12; `pip install -e` of the checkout, whose data/ folder must
hold the release's data, airline's db.json included) with pydantic pinned to what spadework resolves (2.14.4),
so that a validation error reads the same on both sides. For each domain the official `tau2 run` (its agent,
user simulator and, in retail, NL-assertion judge are litellm clients, pointed here at the scripted server
through OPENAI_BASE_URL; no retries, one simulation at a time, the differential test's step limit) plays the
planned tasks; each task's termination and reward, and a digest of every request, go to
`benchmarks/tau2/data/reference_imperfect.json`, which `test_tau2_differential.py` holds spadework to.
Network-free and about two minutes; run it again only when the plan, the limits or the scripted parties change.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.tau2.data import DOMAINS, VENDORED, Domain, load_domain
from tests.benchmarks.scripted import serving
from tests.benchmarks.tau2_imperfect import ImperfectTau2, mistakes_of, plan

COMMIT = "a2c024725189473d2d7cea3a5cfdbcc67478e41f"
RECORD = VENDORED / "reference_imperfect.json"
MODEL = "openai/imperfect"  # litellm's OpenAI provider, which reads its base URL from the environment
MAX_STEPS = 40  # both pipelines run with this limit, so a dialogue that never ends costs 40 requests, not 200


def chosen_tasks(domain: Domain) -> dict[str, str]:
    """Task id -> mistake: the domain's first tasks that change the database, one per mistake."""
    data = load_domain(domain)
    return plan(data, data.tasks)


def record_domain(tau2: Path, domain: Domain) -> dict[str, Any]:
    data = load_domain(domain)
    chosen = chosen_tasks(domain)
    model = ImperfectTau2(data, chosen)
    with tempfile.TemporaryDirectory() as scratch, serving(model.completion) as url:
        saved = Path(scratch) / "run"
        environment = {**os.environ, "OPENAI_API_KEY": "scripted", "OPENAI_BASE_URL": url, "OPENAI_API_BASE": url}
        command = [str(tau2), "run", "--domain", domain, "--agent-llm", MODEL, "--user-llm", MODEL,
                   "--task-ids", *chosen, "--num-trials", "1", "--max-concurrency", "1", "--max-retries", "0",
                   "--max-steps", str(MAX_STEPS), "--save-to", str(saved)]  # fmt: skip
        completed = subprocess.run(command, env=environment, cwd=scratch, capture_output=True, text=True, timeout=3600)
        if completed.returncode != 0:
            raise SystemExit(f"tau2 run failed for {domain}:\n{completed.stderr[-4000:]}")
        simulations = json.loads((saved / "results.json").read_text())["simulations"]
    requests: dict[str, list[list[str]]] = {}
    for task, role, digest in model.requests:
        requests.setdefault(task, []).append([role, digest])
    tasks = {}
    for simulation in simulations:
        task = simulation["task_id"]
        reward = (simulation.get("reward_info") or {}).get("reward")
        tasks[task] = {"mistake": chosen[task], "termination": simulation["termination_reason"], "reward": reward,
                       "requests": requests.get(task, [])}  # fmt: skip
    places = {task.id: place for place, task in enumerate(data.tasks)}
    return dict(sorted(tasks.items(), key=lambda item: places[item[0]]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tau2", type=Path, required=True, help="the official `tau2` command")
    parser.add_argument("--out", type=Path, default=RECORD)
    arguments = parser.parse_args()
    record = {
        "about": "What github.com/sierra-research/tau2-bench @ " + COMMIT + " (`tau2 run`, max steps "
        f"{MAX_STEPS}, no retries) made of the scripted imperfect agent, user and judge, recorded by "
        "tests/benchmarks/tau2_reference.py: per task, the mistake, the termination, the reward and a digest of "
        "every request (role, digest) in order.",
        "commit": COMMIT,
        "max_steps": MAX_STEPS,
        "mistakes": {domain: list(mistakes_of(load_domain(domain))) for domain in DOMAINS},
        "domains": {domain: record_domain(arguments.tau2, domain) for domain in DOMAINS},
    }
    arguments.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"recorded {sum(len(tasks) for tasks in record['domains'].values())} tasks to {arguments.out}")


if __name__ == "__main__":
    main()
