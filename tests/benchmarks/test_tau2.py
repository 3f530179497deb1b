"""`spadework bench tau2`: the vendored release, the tools' answers, the reward, pass^k over trials, resume, and
bad input. Agreement with the official pipeline entry for entry is `test_tau2_differential.py`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from benchmarks.tau2.data import DOMAINS, VENDORED, load_domain
from benchmarks.tau2.evaluator import Said, communicate_checks, judge_messages
from benchmarks.tau2.run import pass_hat_ks
from benchmarks.tau2.toolkit import calculate, to_json_str
from engine.store import read_records
from tests.benchmarks import runs
from tests.benchmarks.scripted import serving
from tests.benchmarks.tau2_imperfect import ImperfectTau2

# Gold actions that fail against the initial database, as the official tools fail them: the tasks where the
# user first gives wrong details (reads), and two retail tasks whose gold write itself fails (the official
# evaluator logs and skips a failing gold action, so those writes are not part of the target database).
RETAIL_FAILING = {
    ("2", "get_product_details"), ("3", "get_product_details"), ("4", "get_product_details"),
    ("35", "find_user_id_by_email"), ("37", "find_user_id_by_email"), ("38", "find_user_id_by_email"),
    ("39", "find_user_id_by_name_zip"), ("46", "get_order_details"), ("47", "get_order_details"),
    ("54", "find_user_id_by_email"), ("55", "find_user_id_by_email"), ("64", "exchange_delivered_order_items"),
    ("67", "find_user_id_by_name_zip"), ("68", "find_user_id_by_name_zip"), ("105", "exchange_delivered_order_items"),
}  # fmt: skip
FAILING_GOLD: dict[str, set[tuple[str, str]]] = {"retail": RETAIL_FAILING, "airline": set()}


def test_the_vendored_release_is_the_official_one() -> None:
    """Every data file is byte for byte the one at the source commit (SOURCE.txt names it): its git blob id."""
    expected = {
        "airline/db.json": "c6a1e817aa9102c5822e83affb3595acbc312701",
        "retail/db.json": "4d67b03b2d39ade5a7ab6facb2edd7ab3e013d48",
    }
    for name, blob in expected.items():
        hashed = subprocess.run(["git", "hash-object", str(VENDORED / name)], capture_output=True, text=True)
        assert hashed.stdout.strip() == blob, name
    airline, retail = load_domain("airline"), load_domain("retail")
    assert (len(airline.tasks), len(retail.tasks)) == (50, 114)
    for domain in (airline, retail):
        # The release's splits: train and test are disjoint and make up base.
        train, test = set(domain.splits["train"]), set(domain.splits["test"])
        assert not train & test and train | test == set(domain.splits["base"])
    assert (len(airline.splits["test"]), len(retail.splits["test"])) == (20, 40)
    assert [tool["function"]["name"] for tool in airline.tools][:2] == ["book_reservation", "calculate"]


@pytest.mark.slow  # a fresh database for each of the 164 tasks: about half a minute
@pytest.mark.parametrize("domain", DOMAINS)
def test_gold_actions_fail_only_where_the_official_tools_fail_them(domain: str) -> None:
    data = load_domain(domain)  # type: ignore[arg-type]
    failing = set()
    for task in data.tasks:
        toolkit = data.fresh_toolkit()
        for action in task.gold_actions:
            if toolkit.call(action.name, dict(action.arguments)).error:
                failing.add((task.id, action.name))
    assert failing == FAILING_GOLD[domain]


def test_a_call_is_answered_as_the_official_environment_answers_it() -> None:
    toolkit = load_domain("airline").fresh_toolkit()
    unknown = toolkit.call("book_flight", {})
    assert (unknown.content, unknown.error) == ("Error: Tool 'book_flight' not found.", True)
    clash = toolkit.call("get_user_details", {"user_id": "mia_li_3668", "tool_name": "x"})
    assert clash.content == "Error: Environment.make_tool_call() got multiple values for argument 'tool_name'"
    missing = toolkit.call("get_user_details", {})
    assert missing.error and "missing 1 required positional argument: 'user_id'" in missing.content
    status = toolkit.call("get_flight_status", {"flight_number": "HAT001", "date": "2024-05-01"})
    assert (status.content, status.error) == ("landed", False)
    user = json.loads(toolkit.call("get_user_details", {"user_id": "mia_li_3668"}).content)
    assert list(user)[:3] == ["user_id", "name", "address"]  # the model's field order, not the file's
    assert user["payment_methods"]["certificate_4856383"]["amount"] == 100.0
    assert to_json_str(3) == '"3"' and to_json_str(None) == "null" and to_json_str("text") == "text"
    before = toolkit.db_hash()
    assert toolkit.call("cancel_reservation", {"reservation_id": "NO6JO3"}).error is False
    assert toolkit.db_hash() != before and load_domain("airline").fresh_toolkit().db_hash() == before


def test_calculate_gives_the_official_figures_and_never_evaluates_code() -> None:
    assert calculate("2 * (3 + 4) / 5") == "2.8"
    assert calculate("100") == "100.0"
    assert calculate("+".join(["1"] * 900)) == "900.0"  # deeper than a recursive evaluator goes
    with pytest.raises(ValueError, match="Invalid characters"):
        calculate("__import__('os')")
    # Python's own words for what eval would refuse, as the official shows them
    for expression, error in [("1 / 0", "division by zero"), ("(1)(2)", "'int' object is not callable"),
                              ("()-1", "unsupported operand type"), ("...", "not 'ellipsis'"),
                              ("1 2", "invalid syntax")]:  # fmt: skip
        with pytest.raises(Exception, match=error):
            calculate(expression)
    # The official's eval computes these for ever; here they are refused at once, in the words a float gives.
    for expression in ("9 ** 9 ** 9", "(9 ** 9999) ** 9999"):
        with pytest.raises(OverflowError, match="int too large to convert to float"):
            calculate(expression)


def test_the_reward_checks_read_the_trajectory_as_the_official_does() -> None:
    said = [Said("assistant", "Hi! How can I help you today?"), Said("user", "I need a refund"),
            Said("assistant", None, [{"name": "x", "arguments": {}}]), Said("tool", "Error: no"),
            Said("assistant", "Your refund is $1,234.")]  # fmt: skip
    checks = communicate_checks(said, ["1234", "refund", "5678"])
    assert [check["met"] for check in checks] == [True, True, False]  # commas dropped, case folded
    messages = judge_messages(said, ["Agent should refund."])
    assert messages[0]["content"].startswith("\n        TASK\n")
    assert "assistant: None\ntool: Error: no\n" in messages[1]["content"]
    assert messages[1]["content"].endswith("expectedOutcomes:\n        ['Agent should refund.']\n        ")


def test_pass_hat_k_follows_the_official_metric() -> None:
    # Two tasks: 2 of 3 trials succeed, 3 of 3 succeed; pass^k averages C(s,k)/C(n,k) over tasks.
    assert pass_hat_ks([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]) == pytest.approx({1: 5 / 6, 2: 2 / 3, 3: 1 / 2})
    assert pass_hat_ks([[1.0], [1.0, 0.0]]) == {1: 0.75}  # k stops at the fewest trials a task has
    assert pass_hat_ks([]) == {}


@pytest.mark.timeout(300)
def test_trials_give_pass_hat_k_and_a_resumed_run_plays_only_what_is_missing(tmp_path: Path) -> None:
    data = load_domain("airline")
    chosen = {"16": "perfect", "14": "skipped_write"}
    model = ImperfectTau2(data, chosen)
    with serving(model.completion) as url:
        common = ["--no-progress", "--endpoint", url, "--model", "imperfect", "--out", str(tmp_path)]
        first = runs.bench("tau2", *common, "--ids", "16", "--trials", "2")
        assert first.returncode == 0, first.stderr[-3000:]
        played = len(model.requests)
        second = runs.bench("tau2", *common, "--ids", "16,14", "--trials", "2")
        assert second.returncode == 0, second.stderr[-3000:]
    # Task 16's two trials were kept; only task 14's were played.
    assert {task for task, _role, _digest in model.requests[played:]} == {"14"}
    records = read_records(tmp_path)
    assert sorted((data.tasks[r.key.seed].id, r.key.sample) for r in records) == [("14", 0), ("14", 1),
                                                                                 ("16", 0), ("16", 1)]  # fmt: skip
    results = runs.results(tmp_path)
    assert results["tasks"] == 2 and results["trials"] == 2
    assert results["pass_hat_ks"] == {"1": 0.5, "2": 0.5}
    assert results["avg_reward"] == 0.5 and results["terminations"] == {"user_stop": 4}
    markdown = (tmp_path / "results.md").read_text()
    assert "| airline | 2 | 2 | 0.500 | 50.0% | 50.0% |" in markdown


def test_bad_input_is_refused_naming_what_is_wrong(tmp_path: Path) -> None:
    cases = [
        (["--domain", "telecom"], "--domain", "telecom"),
        (["--split", "dev"], "--split", "dev"),
        (["--ids", "0,999"], "--ids", "999"),
    ]
    for arguments, option, named in cases:
        completed = runs.bench("tau2", *arguments, "--endpoint", "http://127.0.0.1:9/v1", "--out", str(tmp_path))
        assert completed.returncode == 2, completed.stdout
        assert option in completed.stderr and named in completed.stderr
        assert not (tmp_path / "results.json").exists()


@pytest.mark.slow  # every task of both domains through the CLI: about 1,500 scripted requests
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("domain", DOMAINS)
def test_a_ground_truth_replay_scores_one_on_every_replayable_task(domain: str, tmp_path: Path) -> None:
    """A scripted agent plays each task's gold actions and says what the task asks to communicate; the user
    stops. Every task scores 1.0, except where a gold action fails and the task's judge (scripted to see no
    tool error) reads its error: the gold plays that are not replayable as a model would say them."""
    data = load_domain(domain)  # type: ignore[arg-type]
    model = ImperfectTau2(data, {task.id: "perfect" for task in data.tasks})
    with serving(model.completion) as url:
        completed = runs.bench("tau2", "--no-progress", "--domain", domain, "--endpoint", url, "--model", "gold",
                               "--concurrency", "8", "--out", str(tmp_path), timeout=1800)  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    rewards = {data.tasks[record.key.seed].id: record.reward for record in read_records(tmp_path)}
    judged_errors = {
        task.id
        for task in data.tasks
        if task.evaluation_criteria and task.evaluation_criteria.nl_assertions
        and any(task_id == task.id for task_id, _name in FAILING_GOLD[domain])
    }  # fmt: skip
    assert len(rewards) == len(data.tasks)
    assert {task for task, reward in rewards.items() if reward != 1.0} == judged_errors
