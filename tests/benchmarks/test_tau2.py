"""`spadework bench tau2`: the vendored release, the tools' answers, the reward, pass^k over trials, resume, and
bad input. Agreement with the official pipeline entry for entry is `test_tau2_differential.py`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Literal

import pytest

from benchmarks.tau2.data import DOMAINS, VENDORED, Action, DomainData, Tau2Task, load_domain
from benchmarks.tau2.evaluator import Said, action_checks, communicate_checks, environment_checks, judge_messages
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
FAILING_GOLD: dict[str, set[tuple[str, str]]] = {"retail": RETAIL_FAILING, "airline": set(), "telecom": set()}


def test_the_vendored_release_is_the_official_one() -> None:
    """Every data file is byte for byte the one at the source commit (SOURCE.txt names it): its git blob id."""
    expected = {
        "airline/db.json": "c6a1e817aa9102c5822e83affb3595acbc312701",
        "retail/db.json": "4d67b03b2d39ade5a7ab6facb2edd7ab3e013d48",
        "telecom/db.toml": "6c8a639d85896a049a5daf87332107a840a55aac",
        "telecom/user_db.toml": "1def9a98eabf1d4a5fc95a67387ec294f56196d8",
        "telecom/split_tasks.json": "a5b01687eaaa5c669f792bff33c0d6ec13be36fd",
        "telecom/main_policy_solo.md": "2da88ab26054dbd574e48353e54b4296f0e554dd",
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
    # Telecom keeps the release's `base` tasks only (its tasks.json holds 2,285; base, train and test are in base).
    telecom = load_domain("telecom")
    assert [task.id for task in telecom.tasks] == [task.id for task in telecom.split("base")]
    assert (len(telecom.tasks), len(telecom.splits["train"]), len(telecom.splits["test"])) == (114, 74, 40)
    assert (len(telecom.tools), len(telecom.user_tools or [])) == (13, 30)
    assert [tool["function"]["name"] for tool in airline.tools][:2] == ["book_reservation", "calculate"]


@pytest.mark.slow  # a fresh database for each of the 164 tasks: about half a minute
@pytest.mark.parametrize("domain", DOMAINS)
def test_gold_actions_fail_only_where_the_official_tools_fail_them(domain: str) -> None:
    data = load_domain(domain)
    failing = set()
    for task in data.tasks:
        env = data.fresh_env(task)  # the task's initial state; the gold actions without syncs, as the official
        for action in task.gold_actions:
            if env.toolkit(action.requestor).call(action.name, dict(action.arguments)).error:
                failing.add((task.id, action.name))
    assert failing == FAILING_GOLD[domain]


OVERDUE = "[service_issue]airplane_mode_on|overdue_bill_suspension[PERSONA:None]"


def test_telecom_user_calls_reach_the_phone_and_the_carrier_learns_of_a_payment() -> None:
    """The user's tools act on the phone; after each call the sync carries the line's state to the phone and the
    phone's payment to the carrier's bill (the official `sync_tools`), so the task's assertions can be met."""
    data = load_domain("telecom")
    task = next(task for task in data.tasks if task.id == OVERDUE)
    env = data.fresh_env(task)  # initialization: airplane mode on, the line suspended for bill B1234321
    assert "Airplane Mode" in env.call("check_status_bar", {}, "user").content
    assert env.call("check_status_bar", {}).content == "Error: Tool 'check_status_bar' not found."  # not the agent's
    assert env.call("make_payment", {}, "user").content == "You do not have a payment request."  # not yet
    for action in task.gold_actions:
        assert not env.call(action.name, dict(action.arguments), action.requestor).error, action.name
    assert env.user_tools is not None and env.user_tools.db.surroundings.payment_request is None  # paid and cleared
    assertions = task.evaluation_criteria.env_assertions if task.evaluation_criteria else None
    assert assertions and all(env.check(check.env_type, check.func_name, dict(check.arguments), check.assert_value)
                              for check in assertions)  # fmt: skip
    fresh = data.fresh_env(task)  # nothing done: the same assertions fail
    assert not fresh.check("user", "assert_service_status", {"expected_status": "connected"}, True)


def test_telecom_is_judged_on_the_rebuilt_end_state_and_on_actions_as_the_official_matches_them() -> None:
    data = load_domain("telecom")
    task = next(task for task in data.tasks if task.id == OVERDUE)
    said = _played(data, task, task.gold_actions)
    checks = environment_checks(data, task, said)
    assert checks["env_reward"] == 1.0 and [check["met"] for check in checks["env_assertions"]] == [True, True]
    unpaid = _played(data, task, [action for action in task.gold_actions if action.name != "make_payment"])
    assert environment_checks(data, task, unpaid)["env_reward"] == 0.0
    tampered = [*said[:-1], Said("tool", "Device rebooted? No.")]
    with pytest.raises(ValueError, match="replaying reboot_device"):  # the official's strict replay
        environment_checks(data, task, tampered)
    transfer = Action(action_id="t", name="transfer_to_human_agents", arguments={"summary": "Line suspended."})
    calls = {
        "same call": {"summary": "Line suspended."},
        "no arguments": {},  # the call's own (no) arguments are compared: a match
        "another summary": {"summary": "Other."},
        "an extra argument": {"summary": "Line suspended.", "urgent": True},
    }
    met = {case: action_checks([Said("user", None, [{"name": transfer.name, "arguments": arguments}])],
                               [transfer])[0]["met"] for case, arguments in calls.items()}  # fmt: skip
    assert met == {"same call": True, "no arguments": True, "another summary": False, "an extra argument": False}


def _played(data: DomainData, task: Tau2Task, actions: list[Action]) -> list[Said]:
    """The trajectory of `actions` played in order from the task's initial state, by whoever the action names."""
    env, said = data.fresh_env(task), []
    for action in actions:
        role: Literal["user", "assistant"] = action.requestor
        said += [Said(role, None, [{"name": action.name, "arguments": action.arguments}]),
                 Said("tool", env.call(action.name, dict(action.arguments), action.requestor).content)]  # fmt: skip
    return said


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


def test_a_user_who_stops_at_once_ends_the_simulation_before_the_agent_speaks(tmp_path: Path) -> None:
    """The official ends on the user's first `###STOP###` (one step, the agent never asked); the engine asks the
    agent once before an episode can end, and that reply stays out of the simulation."""
    asked: list[str] = []

    def completion(body: dict[str, Any]) -> dict[str, Any]:
        user = str(body["messages"][0]["content"]).startswith("# User Simulation Guidelines")
        asked.append("user" if user else "agent")
        content = "Never mind. ###STOP###" if user else "I will cancel everything."
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}

    with serving(completion) as url:
        completed = runs.bench("tau2", "--no-progress", "--domain", "telecom", "--ids", OVERDUE, "--endpoint", url,
                               "--model", "imperfect", "--out", str(tmp_path))  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-2000:]
    (record,) = read_records(tmp_path)
    card = json.loads(record.scorecard or "{}")
    assert (card["termination"], card["steps"], record.reward) == ("user_stop", 1, 0.0)
    assert asked == ["user", "agent"]

    # A run none of whose simulations was scored has no average reward (the official metrics leave failures out).
    def silent(body: dict[str, Any]) -> dict[str, Any]:
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": ""}}]}

    with serving(silent) as url:
        runs.bench("tau2", "--no-progress", "--domain", "telecom", "--ids", OVERDUE, "--endpoint", url,
                   "--model", "imperfect", "--out", str(tmp_path / "silent"))  # fmt: skip
    results = runs.results(tmp_path / "silent")
    assert results["avg_reward"] is None and results["infra_errors"] == 1
    assert "| telecom | 1 | 1 | n/a (none scored) |" in (tmp_path / "silent" / "results.md").read_text()


def test_bad_input_is_refused_naming_what_is_wrong(tmp_path: Path) -> None:
    cases = [
        (["--domain", "banking"], "--domain", "banking"),
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
    data = load_domain(domain)
    rewards: dict[str, float | None] = {}
    for round_ in _distinct_scenarios(data.tasks):  # the scripted user knows its task by its scenario alone
        model = ImperfectTau2(data, {task.id: "perfect" for task in round_})
        out = tmp_path / f"round{len(rewards)}"
        with serving(model.completion) as url:
            completed = runs.bench("tau2", "--no-progress", "--domain", domain, "--endpoint", url, "--model", "gold",
                                   "--ids", ",".join(task.id for task in round_), "--concurrency", "8",
                                   "--out", str(out), timeout=1800)  # fmt: skip
        assert completed.returncode == 0, completed.stderr[-3000:]
        rewards |= {data.tasks[record.key.seed].id: record.reward for record in read_records(out)}
    judged_errors = {
        task.id
        for task in data.tasks
        if task.evaluation_criteria and task.evaluation_criteria.nl_assertions
        and any(task_id == task.id for task_id, _name in FAILING_GOLD[domain])
    }  # fmt: skip
    assert len(rewards) == len(data.tasks)
    assert {task for task, reward in rewards.items() if reward != 1.0} == judged_errors


def _distinct_scenarios(tasks: list[Tau2Task]) -> list[list[Tau2Task]]:
    """The tasks in rounds, none of which holds two tasks with the same user scenario (telecom's 114 tasks
    have 15 scenarios; every airline and retail task has its own)."""
    rounds: list[list[Tau2Task]] = []
    for task in tasks:
        scenario = str(task.user_scenario)
        place = next((place for place, round_ in enumerate(rounds)
                      if all(str(other.user_scenario) != scenario for other in round_)), None)  # fmt: skip
        if place is None:
            rounds.append([task])
        else:
            rounds[place].append(task)
    return rounds
