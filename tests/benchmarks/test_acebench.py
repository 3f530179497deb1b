"""ACEBench Agent core: the apps, executor, parser, checker and prompts, held to the reference's recorded outputs.

`benchmarks/acebench/data/reference_replay.json` holds what the reference executor (chenchen0103/ACEBench @
56dd66c) answered when every task's milestone paths and a set of random call batches were run through it; the
conformance tests replay the same texts here and compare every execution message and end state.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import os
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from benchmarks.acebench.calls import CallSyntaxError, batch_text, call_text, parse_calls
from benchmarks.acebench.checker import (
    TaskScore,
    agent_score,
    check_end_state,
    end_state_correct,
    process_accuracy,
    score_task,
)
from benchmarks.acebench.data import VENDORED, AceTask, DataError, Kind, Language, load_tasks
from benchmarks.acebench.executor import MULTI_TURN_ERROR, UNBOUND_RESULT, AceBackends
from benchmarks.acebench.prompts import (
    MAX_MESSAGES,
    STOP_PHRASE,
    Message,
    agent_recipient,
    agent_system_prompt,
    agent_user_prompt,
    conversation_over,
    next_speaker,
    render_history,
    simulator_messages,
    undecodable_reply,
    user_system_prompt,
)

REFERENCE = json.loads((VENDORED / "reference_replay.json").read_text(encoding="utf-8"))
# What the reference's own executor passes when each path is replayed as written (trailing spaces kept: nine
# milestones end in one, and the reference's decoder then refuses them), any alternative path counting.
REFERENCE_UNSTRIPPED = {
    ("en", "multi_turn"): 21,
    ("en", "multi_step"): 7,
    ("zh", "multi_turn"): 29,
    ("zh", "multi_step"): 11,
}
NOTES_FIGURE = 69  # 20 + 10 + 27 + 12 in shared/notes/bench.md, with a replay method the notes do not give


@pytest.fixture(scope="module")
def tasks() -> dict[str, AceTask]:
    return {task.key: task for task in load_tasks()}


def episode(
    kind: Kind = "multi_step",
    classes: tuple[str, ...] = ("BaseApi", "MessageApi"),
    config: dict[str, Any] | None = None,
    language: Language = "en",
) -> AceBackends:
    config = {"BaseApi": {"wifi": True, "logged_in": True}} if config is None else config
    return AceBackends(AceTask("probe", language, kind, "q", config, [], list(classes), [], [[]]))


def replay(task: AceTask, path: list[str], strip: bool = True) -> tuple[AceBackends, list[str]]:
    """Run a milestone path from a fresh episode, skipping the milestones that do not parse (as the reference's
    agent loop would send those to the user, or multi_step's execution would refuse them)."""
    backends, shown = AceBackends(task), []
    for stone in path:
        try:
            calls = parse_calls(stone.strip() if strip else stone)
        except CallSyntaxError:
            continue
        shown.append(str(backends.execution_message(backends.execute(calls))))
    return backends, shown


def digest(text: str) -> str:
    return text if len(text) <= 160 else "sha256:" + hashlib.sha256(text.encode()).hexdigest()


# Conformance


def test_the_vendored_data_has_30_and_20_tasks_per_language(tasks: dict[str, AceTask]) -> None:
    counts = Counter((task.language, task.kind) for task in tasks.values())
    assert counts == {
        ("en", "multi_turn"): 30,
        ("en", "multi_step"): 20,
        ("zh", "multi_turn"): 30,
        ("zh", "multi_step"): 20,
    }
    assert sum(len(task.milestones) > 1 for task in tasks.values()) == 10  # en and zh multi_step 6-10
    assert all(isinstance(path, list) for task in tasks.values() for path in task.milestones)


def test_replaying_the_milestones_reproduces_the_reference_step_by_step(tasks: dict[str, AceTask]) -> None:
    passed: Counter[tuple[str, str]] = Counter()
    differing, verdicts = [], {}
    for key, task in tasks.items():
        recorded = REFERENCE["replay"][key]
        ok = False
        for path, expected in zip(task.milestones, recorded["shown"], strict=True):
            backends, shown = replay(task, path)
            if shown != expected:
                differing.append(key)
            ok = ok or end_state_correct(backends.state(), task.ground_truth)
        verdicts[key] = ok
        passed[(task.language, task.kind)] += ok
    failing = sorted(key for key, ok in verdicts.items() if not ok)
    report = f"passing per split {dict(passed)}, failing: {failing}"
    assert not differing, f"execution messages differ from the reference for {differing}"
    assert verdicts == {key: recorded["passes"] for key, recorded in REFERENCE["replay"].items()}, report
    assert sum(passed.values()) >= NOTES_FIGURE, report
    assert dict(passed) == {
        ("en", "multi_turn"): 21,
        ("en", "multi_step"): 10,
        ("zh", "multi_turn"): 29,
        ("zh", "multi_step"): 14,
    }, report


def test_replaying_milestones_as_written_matches_the_reference_count(tasks: dict[str, AceTask]) -> None:
    passed: Counter[tuple[str, str]] = Counter()
    for task in tasks.values():
        passed[(task.language, task.kind)] += any(
            end_state_correct(replay(task, path, strip=False)[0].state(), task.ground_truth) for path in task.milestones
        )
    assert dict(passed) == REFERENCE_UNSTRIPPED


def test_random_call_batches_give_the_reference_messages_and_end_states() -> None:
    for number, probe in enumerate(REFERENCE["probes"]):
        backends = episode(probe["kind"], tuple(probe["involved_classes"]), probe["initial_config"], probe["language"])
        shown = [digest(str(backends.respond(text))) for text in probe["texts"]]
        state = json.dumps(backends.state(), sort_keys=True, ensure_ascii=False)
        for turn, (mine, theirs) in enumerate(zip(shown, probe["shown"], strict=True)):
            assert mine == theirs, f"probe {number} turn {turn}: {probe['texts'][turn]}"
        assert hashlib.sha256(state.encode()).hexdigest() == probe["state_sha256"], f"probe {number}: {state[:300]}"


# Executor quirks


def test_a_method_runs_on_every_app_that_has_it_and_the_last_answer_is_the_result() -> None:
    backends = episode(classes=("BaseApi", "MessageApi", "FoodPlatform"), config={"BaseApi": {"wifi": False}})
    assert backends.targets("turn_on_wifi") == ["BaseApi", "MessageApi", "FoodPlatform"]
    assert backends.targets("send_message") == ["MessageApi"]
    assert backends.execute([("turn_on_wifi", {})]) == ['{"status": true, "message": "Wi-Fi has been turned on"}']
    assert all(vars(app)["wifi"] is True for app in backends.instances.values())


def test_every_app_is_loaded_with_the_baseapi_config_which_resets_food_logins() -> None:
    config = {
        "BaseApi": {"wifi": True, "logged_in": False},
        "FoodPlatform": {"wifi": False, "logged_in_users": ["Eve"]},
    }
    backends = episode(classes=("BaseApi", "ReminderApi", "FoodPlatform"), config=config)
    assert [(vars(app)["wifi"], vars(app)["logged_in"]) for app in backends.instances.values()] == [(True, False)] * 3
    assert vars(backends.instances["FoodPlatform"])["logged_in_users"] == []


def test_multi_turn_aborts_the_batch_on_the_first_error_with_the_literal_text() -> None:
    backends = episode("multi_turn", config={"BaseApi": {"wifi": False}})
    calls = [("turn_on_wifi", {}), ("send_message", {"bogus": 1}), ("delete_message", {"message_id": 1})]
    results = backends.execute(calls)
    assert results == ["Error during execution: {str(e)}"] == [MULTI_TURN_ERROR]
    assert backends.execution_message(results) == list(MULTI_TURN_ERROR)  # upstream iterates the bare string
    assert (
        vars(backends.instances["MessageApi"])["wifi"] is True and 1 in vars(backends.instances["MessageApi"])["inbox"]
    )
    assert backends.state() == {}  # an aborted turn does not hand the apps over
    backends.execute([("login_device", {})])
    assert set(backends.state()) == {"BaseApi", "MessageApi"}


def test_multi_step_records_each_error_and_goes_on() -> None:
    backends = episode("multi_step")
    calls = [("turn_on_wifi", {}), ("send_message", {"bogus": 1}), ("delete_message", {"message_id": 1})]
    results = backends.execute(calls)
    assert results[1] == "Error during execution: MessageApi.send_message() got an unexpected keyword argument 'bogus'"
    assert json.loads(results[2]) == {"status": True, "message": "Message ID 1 has been successfully deleted."}
    assert 1 not in vars(backends.instances["MessageApi"])["inbox"]


def test_an_unknown_name_repeats_the_last_result_or_fails_unbound() -> None:
    backends = episode("multi_step")
    first = backends.execute([("no_such_call", {})])
    assert first == [f"Error during execution: {UNBOUND_RESULT}"]
    assert UNBOUND_RESULT == "cannot access local variable 'func_call_result' where it is not associated with a value"
    results = backends.execute([("get_earliest_message_id", {}), ("no_such_call", {})])
    assert results[0] == results[1] and json.loads(results[1])["message_id"] == 3


def test_results_become_text_after_the_batch_so_live_data_shows_its_final_value() -> None:
    config = {"BaseApi": {"wifi": True, "logged_in_users": ["Eve"]}}
    backends = episode(classes=("BaseApi", "FoodPlatform"), config=config)
    results = backends.execute(
        [("view_logged_in_users", {}), ("login_food_platform", {"username": "Frank", "password": "password456"})]
    )
    assert json.loads(results[0])["logged_in_users"] == ["Eve", "Frank"]


def test_state_is_the_saved_attributes_after_a_json_round_trip() -> None:
    backends = episode(classes=("BaseApi", "MessageApi", "ReminderApi"))
    backends.execute(
        [
            ("delete_message", {"message_id": 2}),
            ("send_message", {"sender_name": "Eve", "receiver_name": "Frank", "message": "hi"}),
        ]
    )
    state = backends.state()
    assert set(state) == {"BaseApi", "MessageApi", "ReminderApi"}
    assert set(state["MessageApi"]) == {"inbox"} and set(state["ReminderApi"]) == {"reminder_list"}
    assert list(state["MessageApi"]["inbox"]) == ["1", "3", "4", "5", "6", "7"]  # int keys became strings
    assert state["MessageApi"]["inbox"]["7"] == {"sender_id": "USR100", "receiver_id": "USR101", "message": "hi"}
    state["MessageApi"]["inbox"]["7"]["message"] = "changed"
    assert vars(backends.instances["MessageApi"])["inbox"][7]["message"] == "hi"  # the state is a copy


def test_languages_keep_their_own_behaviours() -> None:
    order = {
        "username": "Grace",
        "merchant_name": "Hema Fresh",
        "items": [{"product": "Organic Vegetable Pack", "quantity": 10}],
    }
    zh_order = {"username": "Grace", "merchant_name": "盒马生鲜", "items": [{"product": "有机蔬菜包", "quantity": 10}]}
    login = ("login_food_platform", {"username": "Grace", "password": "password789"})
    en = episode(classes=("BaseApi", "FoodPlatform")).execute([login, ("add_food_delivery_order", order)])
    zh = episode(classes=("BaseApi", "FoodPlatform"), language="zh").execute(
        [login, ("add_food_delivery_order", zh_order)]
    )
    assert json.loads(en[1])["status"] is True  # 150.0 of a 150.0 balance: en lets it through
    assert json.loads(zh[1]) == {"status": False, "message": "余额不足，无法下单"}  # zh tests >=
    assert episode(classes=("BaseApi", "ReminderApi")).targets("mark_as_notified") == []
    assert episode(classes=("BaseApi", "ReminderApi"), language="zh").targets("mark_as_notified") == ["ReminderApi"]


def test_respond_shows_decoded_results_and_multi_step_refuses_undecodable_text() -> None:
    backends = episode("multi_step", classes=("BaseApi", "FoodPlatform"))
    assert backends.respond("I am done.") == undecodable_reply("en")
    assert backends.state() == {}  # nothing ran
    shown = backends.respond("[check_balance(user_name='Eve'), get_products(merchant_name='Heytea')]")
    assert shown[0] == 500.0 and shown[1].startswith("[{'product': 'Cheese Milk Tea'")  # str() of a list: not JSON
    with pytest.raises(CallSyntaxError):
        episode("multi_turn").respond("no call here")


# The parser


def test_the_parser_reads_calls_as_the_reference_decoder_does() -> None:
    text = """[send_message(sender_name='Eve', message="it's"), delete_message(message_id=-3)]"""
    assert parse_calls(text) == [
        ("send_message", {"sender_name": "Eve", "message": "it's"}),
        ("delete_message", {"message_id": -3}),
    ]
    assert parse_calls("add_food_delivery_order(items=[{'product': 'P', 'quantity': 2}])") == [
        ("add_food_delivery_order", {"items": [{"product": "P", "quantity": 2}]})
    ]
    assert parse_calls("[f('positional', a=Eve, b=now(), c=+5, d=1+2, a=x)]") == [
        ("f", {"a": "x", "b": "now()", "c": -5, "d": 3})
    ]
    assert parse_calls("[1]") == [] and parse_calls("[hello]") == []
    for text in (
        "",
        "[f()]\n",
        "  [f()]",
        "[f(), 1]",
        "Sure: [f()]",
        "[f(a=lambda: 1)]",
        "[f(a={'k': 1})]",
        "[f(**kw)]",
    ):
        with pytest.raises(CallSyntaxError):
            parse_calls(text)


def test_the_parser_refuses_code_without_running_any(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []

    def trap(*arguments: object, **keywords: object) -> None:
        ran.append(repr(arguments))
        raise AssertionError("evaluated")

    monkeypatch.setattr(os, "system", trap)
    monkeypatch.setattr(builtins, "eval", trap)
    monkeypatch.setattr(builtins, "exec", trap)
    for text in ("[__import__('os').system('x')]", "[os.system(command='x')]", "[a.b.c()]"):
        with pytest.raises(CallSyntaxError, match="attribute calls are refused"):
            parse_calls(text)
    assert parse_calls("[f(a=open('x').read())]") == [("f", {"a": "open('x').read()"})]  # only its text, as upstream
    with pytest.raises(CallSyntaxError, match="too"):
        parse_calls("[f(a='x' * 10**9)]")
    assert ran == []


def test_call_text_is_the_milestone_form(tasks: dict[str, AceTask]) -> None:
    assert call_text("delete_message", {"message_id": 3}) == "[delete_message(message_id=3)]"
    assert batch_text([("login_device", {}), ("turn_on_wifi", {})]) == "[login_device(), turn_on_wifi()]"
    stones = {stone.strip() for task in tasks.values() for path in task.milestones for stone in path}
    parsed = {}
    for stone in stones:
        try:
            parsed[stone] = parse_calls(stone)
        except CallSyntaxError:
            continue
    same = [stone for stone, calls in parsed.items() if batch_text(calls) == stone]
    assert (len(stones), len(parsed), len(same)) == (79, 75, 72)  # 4 have unescaped quotes, 3 other quotes or spacing


# The checker


def test_the_end_state_check_is_lenient_on_dict_keys_and_strict_on_values() -> None:
    truth: list[dict[str, Any]] = [
        {"BaseApi": {"wifi": True, "logged_in": True}},
        {"MessageApi": {"inbox": {"1": {"message": "a"}}}},
    ]
    state: dict[str, Any] = {
        "BaseApi": {"wifi": True, "logged_in": True},
        "MessageApi": {"inbox": {"1": {"message": "a"}, "2": {}}},
    }
    assert end_state_correct(state, truth)
    changed = {**state, "MessageApi": {"inbox": {"1": {"message": "b"}}}}
    assert not end_state_correct(changed, truth)
    assert not end_state_correct({"BaseApi": state["BaseApi"]}, truth)  # class count
    assert not end_state_correct({**state, "BaseApi": {"wifi": True, "logged_in": True, "extra": 1}}, truth)
    assert not end_state_correct(
        {"BaseApi": {"wifi": [1]}, "MessageApi": state["MessageApi"]}, [{"BaseApi": {"wifi": [1, 2]}}, truth[1]]
    )


def test_a_misspelled_ground_truth_class_takes_the_verdict_before_it() -> None:
    good: dict[str, Any] = {"BaseApi": {"wifi": True}, "ReminderApi": {"reminder_list": {}}}
    bad: dict[str, Any] = {"BaseApi": {"wifi": False}, "ReminderApi": {"reminder_list": {"9": 1}}}
    truth: list[dict[str, Any]] = [
        {"BaseApi": {"wifi": True}},
        {"ReminderAPI": {"reminder_list": {"1": "never compared"}}},
    ]
    assert end_state_correct(good, truth)
    assert not end_state_correct(bad, truth)
    assert end_state_correct(bad, truth[::-1]) is False  # BaseApi is still checked after the unmatched first
    assert check_end_state({"BaseApi": {"wifi": True}, "X": {}}, [{"BaseAPI": {}}, {"BaseApi": {"wifi": True}}]).ok


def test_process_accuracy_is_the_greedy_in_order_prefix() -> None:
    path = [["[a()]", "[b()]", "[c()]"]]
    assert process_accuracy(["[a()]", "[x()]", "[b()] ", " [c()]"], path, False) == 1.0
    assert process_accuracy(["[b()]", "[a()]"], path, False) == pytest.approx(1 / 3)  # out of order
    assert process_accuracy(["[a()]", "[c()]"], path, False) == pytest.approx(1 / 3)  # a gap ends the search
    assert process_accuracy([], path, True) == 1.0
    assert process_accuracy(["[b()]"], [["[a()]", "[b()]", "[c()]"], ["[b()]", "[c()]", "[d()]"]], False) == 0.333
    assert process_accuracy(["x"], [[]], False) == 1.0


def test_scores_aggregate_per_split_and_into_the_agent_score(tasks: dict[str, AceTask]) -> None:
    task = tasks["en/agent_multi_step_2"]
    backends, _ = replay(task, task.milestones[0])
    scored = score_task(task, backends.state(), task.milestones[0])
    assert scored.end_state_ok and scored.process == 1.0
    scores = [
        TaskScore("a", "en", "multi_turn", True, 1.0),
        TaskScore("b", "en", "multi_turn", False, 0.5),
        TaskScore("c", "en", "multi_turn", False, 0.0),
        TaskScore("d", "en", "multi_step", True, 1.0),
        TaskScore("e", "zh", "multi_step", True, 1.0),
    ]
    summary = agent_score(scores)
    assert (summary.split("en", "multi_turn").end_state, summary.split("en", "multi_turn").process) == (0.333, 0.5)
    assert summary.agent == {"en": 0.666}  # round((0.333 + 1.0) / 2, 3); zh lacks multi_turn: no agent score


# Data errors


def test_data_errors_name_what_is_wrong_and_where(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=re.escape(f"{tmp_path / 'nowhere'} does not exist")):
        load_tasks(tmp_path / "nowhere")
    copy = tmp_path / "data"
    shutil.copytree(VENDORED / "data_en", copy / "data_en")
    with pytest.raises(
        DataError, match=r"data_zh/data_agent_multi_turn\.json is missing.*github\.com/chenchen0103/ACEBench"
    ):
        load_tasks(copy)
    assert len(load_tasks(copy, languages=["en"])) == 50
    target = copy / "data_en" / "data_agent_multi_step.json"
    target.chmod(0o644)
    lines = target.read_text(encoding="utf-8").splitlines()
    target.write_text("\n".join([*lines[:3], "{not json", *lines[3:]]) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=re.escape(f"{target}, line 4: not JSON")):
        load_tasks(copy, languages=["en"])
    entry = json.loads(lines[0])
    del entry["involved_classes"]
    target.write_text("\n".join([json.dumps(entry), *lines[1:]]) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"line 1: entry agent_multi_step_0 has no field 'involved_classes'"):
        load_tasks(copy, languages=["en"], kinds=["multi_step"])
    target.write_text("\n".join(lines[1:]) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"answer id 'agent_multi_step_0' has no task"):
        load_tasks(copy, languages=["en"], kinds=["multi_step"])


# Prompts


def test_the_agent_prompt_holds_the_functions_and_the_history_lines(tasks: dict[str, AceTask]) -> None:
    task = tasks["en/agent_multi_turn_0"]
    dialogue = [
        Message("user", "agent", "Send a message to Frank."),
        Message("agent", "execution", "[turn_on_wifi()]"),
        Message("execution", "agent", [{"status": True, "message": "Wi-Fi has been turned on"}]),
    ]
    history = render_history("multi_turn", dialogue)
    assert history == (
        "user:Send a message to Frank.\nagent:[turn_on_wifi()]\n"
        "execution:[{'status': True, 'message': 'Wi-Fi has been turned on'}]\n"
    )
    prompt = agent_user_prompt(task, history)
    assert prompt.startswith("Below is the list of APIs you can use:\n [{'name': 'turn_on_wifi'")
    assert prompt.endswith("Conversation history 1..t:\n" + history) and str(task.functions) in prompt
    system = agent_system_prompt(task)
    assert "June 11, 2024, 16:00" in system and "airline agent" not in system
    step = tasks["en/agent_multi_step_0"]
    assert (
        render_history("multi_step", dialogue)
        == "user:Send a message to Frank.\nexecution result:[{'status': True, 'message': 'Wi-Fi has been turned on'}]\n"
    )
    # The reference prompts its multi_step agent in Chinese whatever the task's language (it never passes the
    # language on): so must a harness that claims its numbers.
    assert agent_user_prompt(step, "h").startswith("以下是你可以调用的API列表（JSON格式）：[{")
    assert agent_system_prompt(step).startswith("你是") and agent_system_prompt(step, "en").startswith("You are")
    assert "finish conversation" in agent_system_prompt(step) and "June 11" not in agent_system_prompt(step)


def test_travel_tasks_get_the_airline_policy_and_user_rules(tasks: dict[str, AceTask]) -> None:
    travel = tasks["zh/agent_multi_turn_20"]
    assert travel.involved_classes == ["Travel"]
    assert "当前时间为2024年7月15日08:00" in agent_system_prompt(travel) and "模拟手机助手" not in agent_system_prompt(
        travel
    )
    chat = simulator_messages(
        travel, [Message("user", "agent", "我想订票"), Message("agent", "user", "agent:请提供用户ID")]
    )
    assert f"Instruction: {travel.question}" in chat[0]["content"] == user_system_prompt(travel)
    assert [m["role"] for m in chat] == ["system", "user", "system", "user"] and chat[1][
        "content"
    ] == "今天有什么需要帮助的吗？"
    assert chat[3]["content"] == "请提供用户ID"
    phone = tasks["en/agent_multi_turn_0"]
    assert simulator_messages(phone, [])[1]["content"] == "Is there anything you need help with today?"


def test_routing_and_the_stop_rule_follow_the_reference_loops() -> None:
    assert agent_recipient("multi_turn", "[turn_on_wifi()]") == "execution"
    assert agent_recipient("multi_turn", "Which message should I delete? [1] or [2]") == "user"
    assert agent_recipient("multi_turn", "Done. [turn_on_wifi()]") == "user"  # the whole text must decode
    assert agent_recipient("multi_step", "[turn_on_wifi()] then more") == "execution"
    assert next_speaker("multi_step", 3, Message("agent", "user", "hello")) == "execution"
    assert next_speaker("multi_turn", 3, Message("agent", "user", "hello")) == "user"
    assert conversation_over(2, f"ok, {STOP_PHRASE}") and not conversation_over(1, STOP_PHRASE)
    assert not conversation_over(5, ["finish", "conversation"]) and MAX_MESSAGES == 40
