"""BFCL's prompting replies are decoded as bfcl-eval decodes them, and no reply's text ever runs."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import anyio
import pytest

from benchmarks.bfcl.data import bfcl_modules
from benchmarks.bfcl.environment import BFCLConversation
from benchmarks.bfcl.play import all_entries
from benchmarks.bfcl.prompting import FAILED_CALL, Undecodable, decode

FUNCTIONS = {"cd", "ls", "f", "g"}
# Replies a weak model writes, each decoded by bfcl-eval's own `default_decode_execute_prompting` too. None of
# them holds code bfcl-eval's decoder would run (it `eval`s arithmetic), so calling it here is safe.
REPLIES = [
    "[cd(folder='doc')]", "[cd(folder='x'), ls(a=True)]", "cd(folder='doc')", "```\n[ls(a=True)]\n```",
    "```python\n[cd(folder='doc'), ls()]\n```",
    "'[cd(folder=\"x\")]'", "I will: [cd(folder='x')]", "[]", "", "  \n", "[cd('doc')]", "[cd(folder=doc)]",
    "[cd(folder=-1)]", "[cd(folder=not True)]", "[f(a=+5)]", "[f(a=~3)]", "[f(a=-'s')]", "[f(a=-x)]",
    "[f(a=2*3+1)]", "[f(a=1/0)]", "[f(a='a'+'b')]", "[f(a=[1]*3)]", "[f(a=2**0.5)]", "[f(a=(-2)**0.5)]",
    "[f(a=True+1)]", "[f(a=x+1)]", "[f(a=1e400)]", "[f(a={})]", "[f(a={'k': {}})]", "[f(a={'k': 1, 'j': [1, {}]})]",
    "[f(a=g(b=1))]", "[f(a=g(1))]", "[f(a=[g(b=1)])]", "[f(a={'k': g(b=1)})]", "[f(a={'g': {'b': 1}})]",
    "[f(a={'a': {'b': 1}})]", "[f(a={1: {'b': 1}})]", "[f(a={None: 1})]", "[f(a=x[1])]", "[f(a=[1][0])]",
    "[f(a=lambda: 1)]", "[f(a=(1, 2))]", "[f(a={1, 2})]", "[f(a=f'x')]", "[f(a=1 if x else 2)]", "[f(a=x.y)]",
    "[f(a=None, b=True, c=...)]", "[f(a=b'x')]", "[a.b.cd(folder='x')]", "[f(**k)]", "[f(a=1, a=2)]",
    "[f(a=[1, 'x', {'k': 'v'}])]", "[f(a={'x\\'y': 1})]", "(f(a=1), g(b=2))", "{f(a=1)}", "[f(a=1)] [g()]",
    "f(a=1), g(b=2)", "[unknown(q='all')]", "`[f(a=1)]`", "[f(a=\"it's\")]", "[cd(folder='x'", "[{'name': 'cd'}]",
    '[{"name": "cd", "arguments": {"folder": "x"}}]', "[cd(folder='a\\nb')]", "[cd(folder='é')]",
]  # fmt: skip


def official_decode(reply: str) -> list[str] | None:
    """bfcl-eval's own decoder: the call sources, or None where it raises (the turn ends)."""
    bfcl_modules()
    from bfcl_eval.model_handler.utils import default_decode_execute_prompting

    try:
        decoded: list[str] = default_decode_execute_prompting(reply)
        return decoded
    except Exception:
        return None


def test_every_reply_decodes_to_the_same_calls_as_bfcl_evals_decoder() -> None:
    differences = []
    for reply in REPLIES:
        try:
            ours: list[str] | None = [call.source for call in decode(reply, FUNCTIONS)]
        except Undecodable:
            ours = None
        theirs = official_decode(reply)
        if ours != theirs:
            differences.append(f"{reply!r}: here {ours}, bfcl-eval {theirs}")
    assert not differences, "\n".join(differences)
    # Both outcomes are exercised: replies that decode (some into several calls) and replies that end the turn.
    outcomes = [official_decode(reply) for reply in REPLIES]
    assert sum(o is None for o in outcomes) >= 15 and sum(bool(o) and len(o) > 1 for o in outcomes) >= 2


def test_only_the_entrys_own_functions_run_and_the_rest_fail_as_bfcl_eval_reports() -> None:
    known, unknown, dotted, nested = decode("[cd(folder='x'), open(file='x', mode='w'), os.system(c='ls'), "
                                            "cd(folder=eval(s='1'))]", FUNCTIONS)  # fmt: skip
    assert known.refused is None and known.replayed == "cd(folder='x')"
    assert unknown.source == "open(file='x', mode='w')" and unknown.failure == (
        "Error during execution: name 'open' is not defined"
    )
    assert dotted.refused == "name 'os' is not defined" and nested.refused == "name 'eval' is not defined"
    assert {unknown.replayed, dotted.replayed, nested.replayed} == {FAILED_CALL}
    (called,) = decode("[cd(folder=(lambda: __import__('os').system('id'))())]", FUNCTIONS)  # a string, as there
    assert called.refused is None and ast.literal_eval(called.source.removeprefix("cd(folder=")[:-1]).endswith("()")
    (keyed,) = decode("""[cd(folder={"x': __import__('os').system('id'), 'y": 1})]""", FUNCTIONS)
    assert keyed.refused is not None and "cannot be written between quotes" in keyed.refused


@pytest.mark.parametrize(
    "reply",
    [
        "[f(a=__import__('os').system('touch {sentinel}')+1)]",  # bfcl-eval's decoder `eval`s this
        "[f(a=[x for x in __import__('os').system('touch {sentinel}')])]",
        "[f(a=open('{sentinel}', 'w').close() or 1)]",
        "[f(a=9**9**9)]",
        "[f(a=(10**1000)**1000)]",
        "[f(a='a'*10**9)]",
        "[f(a=[0]*10**9)]",
        "[f(a='%0999999999d' % 1)]",
        "[f(a=" + "[" * 50_000 + "]" * 50_000 + ")]",
        "[f(a=" + "-" * 50_000 + "1)]",
    ],
)
def test_hostile_replies_end_the_turn_without_running_anything(reply: str, tmp_path: Path) -> None:
    sentinel = tmp_path / "ran"
    with pytest.raises(Undecodable):
        decode(reply.format(sentinel=sentinel), FUNCTIONS)
    assert not sentinel.exists()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_text_reply_runs_its_calls_and_answers_with_bfcl_evals_results_message(tmp_path: Path) -> None:
    entries = all_entries()
    seed = next(i for i, e in enumerate(entries) if "GorillaFileSystem" in e.involved_classes and len(e.turns) > 1)
    dialogue = BFCLConversation(entries, "text", anyio.CapacityLimiter(1))
    await dialogue.reset(seed)
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        results = await dialogue.user_turn("[pwd(), open(file='created', mode='w')]")
    finally:
        os.chdir(here)
    assert results is not None and results.calls_run == 2 and results.tools == []
    listed = ast.literal_eval(results.content)
    assert [(item["role"], item["name"]) for item in listed] == [
        ("tool", "pwd()"),
        ("tool", "open(file='created', mode='w')"),
    ]
    assert '"current_working_directory"' in listed[0]["content"]
    assert listed[1]["content"] == "Error during execution: name 'open' is not defined"
    assert not (tmp_path / "created").exists()
    next_turn = await dialogue.user_turn("All done.")  # no calls: the user's next turn
    assert (
        next_turn is not None and next_turn.calls_run == 0 and next_turn.content == entries[seed].turns[1][0]["content"]
    )
    assert dialogue._decoded == [[["pwd()", FAILED_CALL]], []]
    await dialogue.close()
