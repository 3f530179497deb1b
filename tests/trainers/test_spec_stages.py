"""A staged spec (`trainers.designer.stages`): each stage's grammar admits only names already written.

Soundness: random walks through every stage (byte by byte with llguidance, the trainer's engine) give specs
that are JSON in the format's shape and never name a missing table, field, tool or record, never repeat a
table, tool or record key, and never plan without a change or a question; the failures left are the ones a
grammar cannot see (a plan the world refuses at run time). Completeness: a sound hand-written spec, split at
the stage boundaries, is admitted stage by stage and compiles. The trainer restricts each stage's tokens by
that stage's own grammar.
"""

from __future__ import annotations

import dataclasses
import json
import random
from typing import Any

import anyio
import pytest

from engine.gbnf import GrammarRules
from engine.trajectory import SampledSpan
from tests.grammar_walk import admits, random_reply
from toolworlds.spec import Spec, SpecError, parse_spec
from toolworlds.spec_compile import compile_spec
from toolworlds.untrusted.validate import validate_spec
from trainers.config import DesignerConfig
from trainers.constrained import AdmittedTokens, GrammarRestrictions
from trainers.designer.budget import SPEC_BUDGET
from trainers.designer.stages import KEY_CHOICES_TOKENS, SpecStages, key_except, name_except
from trainers.designer.task_text import TaskText, tool_name
from trainers.rows import TrainingRow

# What a grammar holds: none of these may ever be a walk's problem.
HELD = ("not JSON", "no table named", "no field named", "no tool named", "already defined", "duplicate key",
        "not a key this format has", "required, but missing", "fit in max_steps", "reserved", "is refused")  # fmt: skip

LIBRARY_STAGES = [
    '{"spec_version": 1, "name": "library", "description": "A small library.", "tables": [{"name": "books", '
    '"fields": {"book_id": {"type": "string"}, ',
    '"title": {"type": "string"}, ',
    '"on_loan": {"type": "boolean", "default": false}}',
    ', "key": "book_id", "records": [{"book_id": "B1", "title": "Emma"}, ',
    '{"book_id": "B2", "title": "Dune"}, ',
    '{"book_id": "B3", "title": "Dune Messiah", "on_loan": true}]}, ',
    '{"name": "members", "fields": {"member_id": {"type": "string"}, ',
    '"name": {"type": "string"}}',
    ', "key": "member_id", "records": [{"member_id": "M1", "name": "Ada"}]}]',
    ', "tools": [{"kind": "search", "name": "search", "description": "Find books by title.", "table": "books", '
    '"field": "title"}, ',
    '{"kind": "update", "name": "borrow", "description": "Borrow a book.", "table": "books", "field": "on_loan", '
    '"value": true, "transitions": [{"from": false, "to": true}]}]',
    ', "task": {"plan": [{"tool": "search", "arguments": {"title": "Dune"}}, ',
    '{"tool": "borrow", "arguments": {"book_id": "B2"}}]',
    ", \"instruction\": \"Please borrow the book 'Dune' with id 'B2'.\"",
    ', "hint": "Search by title first.", "untouched": ["books/B3"]}}',
]


def written(parts: list[str], stages: SpecStages | None = None) -> SpecStages:
    """A stage machine that has written `parts`, one stage each."""
    stages = stages or SpecStages()
    for part in parts:
        stages.grammar()
        stages.wrote(part)
    return stages


def walk(bytes_matcher: Any, rng: random.Random, task_text: TaskText = "written",
         tool_text: TaskText = "written", key_choices: bool = False) -> tuple[str, SpecStages]:  # fmt: skip
    stages, text = SpecStages(task_text=task_text, tool_text=tool_text, key_choices=key_choices), ""
    while (grammar := stages.grammar()) is not None:
        part = random_reply(bytes_matcher, grammar, rng, close=0.15)
        stages.wrote(part)
        text += part
    return text, stages


def compiled(text: str) -> Spec | None:
    """The spec a walk's `text` compiles to; None where it fails, and then never for what a grammar holds."""
    try:
        spec = parse_spec(text)
        compile_spec(spec)
    except SpecError as error:
        assert not [p for p in error.problems if any(kind in p.problem for kind in HELD)], (error, text)
        return None
    return spec


def test_random_walks_through_the_stages_never_break_what_the_grammars_hold(bytes_matcher: Any) -> None:
    rng = random.Random(7)
    compiled = closed_early = meaningful = 0
    stage_counts = []
    for _ in range(40):
        text, stages = walk(bytes_matcher, rng)
        assert stages.stage is None
        stage_counts.append(len(stages.tables) + len(stages.tools))
        try:
            spec = parse_spec(text)
            compile_spec(spec)
            compiled += 1
        except SpecError as error:
            held = [str(p) for p in error.problems if any(kind in p.problem for kind in HELD)]
            assert not held, (held, text)
            assert all(p.path.startswith("task") for p in error.problems), (error, text)
            closed_early += any("changes nothing" in p.problem for p in error.problems)
            continue
        assert len(spec.tables) <= SPEC_BUDGET.tables and len(spec.tools) <= SPEC_BUDGET.tools
        assert len(spec.task.plan) <= SPEC_BUDGET.plan
        assert all(len(table.records) <= SPEC_BUDGET.records for table in spec.tables)
        verdict = anyio.run(lambda: validate_spec(text, seeds=range(1)))  # noqa: B023 (run at once)
        meaning = next((gate for gate in verdict.gates if gate.name == "meaning"), None)
        # the grammars hold that every value is named; that some other word is written, and that a text value
        # is more than punctuation (a key is held to start with a letter or digit), the gate judges
        unheld = ("nothing to do", "punctuation for a name")
        assert meaning is None or meaning.passed or any(kind in meaning.detail for kind in unheld), (meaning, text)
        meaningful += meaning is not None and meaning.passed
    # What is left: a plan with no call to make (the written tools name no record left, no amount fits) closes
    # empty; an answer the question reads may be empty; a record asked about may be gone after the plan.
    assert compiled >= 30 and closed_early <= 4, (compiled, closed_early)
    assert meaningful >= 0.6 * compiled, (meaningful, compiled)  # the rest failed an earlier contract check
    assert len(set(stage_counts)) > 2  # the walks took different paths


def test_walks_with_derived_text_give_tasks_that_mean_what_their_plans_do(bytes_matcher: Any) -> None:
    """Trusted code words the instruction and hint from the plan: every spec that compiles and passes the
    contract checks passes the meaning gate too, and no instruction holds its answer."""
    rng = random.Random(11)
    compiled = smoked = meaningful = 0
    for _ in range(25):
        text, _ = walk(bytes_matcher, rng, task_text="derived")
        try:
            compile_spec(parse_spec(text))
        except SpecError as error:
            assert not [p for p in error.problems if any(kind in p.problem for kind in HELD)], (error, text)
            continue
        compiled += 1
        task = json.loads(text)["task"]
        assert task["instruction"].startswith("Please ") and task["hint"].startswith("Use "), task
        verdict = anyio.run(lambda: validate_spec(text, seeds=range(1)))  # noqa: B023 (run at once)
        gates = {gate.name: gate for gate in verdict.gates}
        if gates["smoke"].passed:
            smoked += 1
            # a value of punctuation alone (a search for '`') is the one thing the wording cannot mend
            assert gates["meaning"].passed or "punctuation for a name" in gates["meaning"].detail, (gates, text)
            meaningful += gates["meaning"].passed
            assert verdict.answer_leak == 0.0, text
    assert compiled >= 18 and smoked >= 0.6 * compiled and meaningful >= 0.8 * smoked, (compiled, smoked, meaningful)


def test_derived_text_is_the_one_text_its_stages_admit(bytes_matcher: Any) -> None:
    stages = SpecStages(task_text="derived")
    for part in LIBRARY_STAGES[:13]:
        stages.grammar()
        stages.wrote(part)
    brief = stages.grammar()
    assert brief is not None and stages.stage == "brief"
    said = "Please find the record in books whose title contains 'Dune', then set the on loan of 'B2' to true"
    assert admits(bytes_matcher, brief, f', "instruction": "{said}."')
    asked = ', "question": {"table": "books", "key": "B1", "field": "title"}, "instruction": "'
    assert admits(bytes_matcher, brief, f"{asked}{said}, and tell me the title of 'B1'.\"")
    assert not admits(bytes_matcher, brief, LIBRARY_STAGES[13])  # the model's own wording
    # B2's title is 'Dune', which the instruction already names: no question whose answer it gives away
    assert not admits(bytes_matcher, brief, asked.replace("B1", "B2") + f"{said}, and tell me the title of 'B2'.\"")
    stages.wrote(f', "instruction": "{said}."')
    hint = stages.grammar()
    assert hint is not None
    assert admits(bytes_matcher, hint, ', "hint": "Use search, then borrow.", "untouched": ["books/B3"]}}')
    assert not admits(bytes_matcher, hint, LIBRARY_STAGES[14])


def test_derived_tools_are_the_ones_trusted_code_names_and_describes(bytes_matcher: Any) -> None:
    """`tool_text="derived"`: the tool stage admits a tool's kind and field, named and described for them,
    never the model's own name (`search`) or a second tool of one name."""
    stages = written(LIBRARY_STAGES[:9], SpecStages(tool_text="derived"))
    tool = stages.grammar()
    assert tool is not None and stages.stage == "tool"
    search = ('{"kind": "search", "name": "find_books_by_title", "description": "Find the record in books whose '
              'title matches.", "table": "books", "field": "title"}')  # fmt: skip
    assert admits(bytes_matcher, tool, f', "tools": [{search}, ')
    assert not admits(bytes_matcher, tool, LIBRARY_STAGES[9])  # named `search` by the model
    assert not admits(bytes_matcher, tool, f', "tools": [{search.replace("Find the record", "Finds one")}, ')
    borrow = ('{"kind": "update", "name": "set_on_loan_of_books", "description": "Set the on loan of a record in '
              'books.", "table": "books", "field": "on_loan", "value": true, "transitions": [{"from": false, '
              '"to": true}]}]')  # fmt: skip
    stages.wrote(f', "tools": [{search}, ')
    after = stages.grammar()
    assert after is not None and admits(bytes_matcher, after, borrow)
    assert not admits(bytes_matcher, after, search + "]")  # its name is written: no second one


def test_walks_with_derived_tools_name_every_tool_for_what_it_does(bytes_matcher: Any) -> None:
    rng = random.Random(5)
    count = 0
    for _ in range(15):
        text, _ = walk(bytes_matcher, rng, task_text="derived", tool_text="derived")
        if (spec := compiled(text)) is None:
            continue
        count += 1
        for tool in spec.tools:
            field = getattr(tool, "field", None) or getattr(tool, "filter_by", None)
            assert tool.name == tool_name(tool.kind, tool.table, field), tool
        hint = json.loads(text)["task"]["hint"]
        named = hint.removeprefix("Use ").rstrip(".").split(", then ")
        assert set(named) <= {tool.name for tool in spec.tools}, (hint, text)
    assert count >= 10, count


def test_with_key_choices_every_table_lists_its_keys_and_plans_name_only_those(bytes_matcher: Any) -> None:
    """`key_choices`: the records stage writes `"key_choices": true` after the key, whatever the model
    chooses; the compiled tools list the keys; a plan may not name a record its own create made."""
    stages = written(LIBRARY_STAGES[:3], SpecStages(key_choices=True))
    records = stages.grammar()
    assert records is not None and stages.stage == "records"
    listed = LIBRARY_STAGES[3].replace('"book_id", "records"', '"book_id", "key_choices": true, "records"')
    assert admits(bytes_matcher, records, listed) and not admits(bytes_matcher, records, LIBRARY_STAGES[3])
    parts = [*LIBRARY_STAGES[:3], listed, *LIBRARY_STAGES[4:8],
             LIBRARY_STAGES[8].replace('"member_id", "records"', '"member_id", "key_choices": true, "records"'),
             *LIBRARY_STAGES[9:]]  # fmt: skip
    stages = SpecStages(key_choices=True)
    for part in parts:
        grammar = stages.grammar()
        assert grammar is not None and admits(bytes_matcher, grammar, part), part
        stages.wrote(part)
    spec = parse_spec("".join(parts))
    assert all(table.key_choices for table in spec.tables)
    borrow = next(tool for tool in compile_spec(spec).tools() if tool.name == "borrow")
    assert borrow.input_schema["properties"]["book_id"]["enum"] == ["B1", "B2", "B3"]
    # a create then a call on what it created: without key_choices the call may name it, with them it may not
    add = ', "tools": [{"kind": "create", "name": "add", "description": "Add a book.", "table": "books"}, '
    lookup = '{"kind": "lookup", "name": "get", "description": "Get a book.", "table": "books"}]'
    created = ', "task": {"plan": [{"tool": "add", "arguments": {"book_id": "B9", "title": "Emma", "on_loan": false}}, '
    last = LIBRARY_STAGES[5].replace("]}, ", "]}]")  # the books are the only table
    for choices in (False, True):
        stages = written([*LIBRARY_STAGES[:3], listed if choices else LIBRARY_STAGES[3], LIBRARY_STAGES[4], last, add,
                          lookup, created], SpecStages(key_choices=choices))  # fmt: skip
        call = stages.grammar()
        assert call is not None and stages.stage == "call"
        assert admits(bytes_matcher, call, '{"tool": "get", "arguments": {"book_id": "B9"}}]') is not choices
        assert admits(bytes_matcher, call, '{"tool": "get", "arguments": {"book_id": "B1"}}]')


def test_walks_with_key_choices_compile_and_list_every_tables_keys(bytes_matcher: Any) -> None:
    rng = random.Random(3)
    specs = [spec for _ in range(15) if (spec := compiled(walk(bytes_matcher, rng, "derived", key_choices=True)[0]))]
    assert len(specs) >= 10 and all(table.key_choices for spec in specs for table in spec.tables), len(specs)


def test_a_sound_spec_split_at_the_stage_boundaries_is_admitted_stage_by_stage(bytes_matcher: Any) -> None:
    stages = SpecStages()
    for part in LIBRARY_STAGES:
        grammar = stages.grammar()
        assert grammar is not None, part
        assert admits(bytes_matcher, grammar, part), part
        stages.wrote(part)
    assert stages.grammar() is None
    world = compile_spec(parse_spec("".join(LIBRARY_STAGES)))
    assert world.name == "library" and world.expectations.goal_count == 1


def test_a_stage_offers_more_only_while_the_tokens_left_pay_for_it_and_for_the_end(bytes_matcher: Any) -> None:
    """With the reply's tokens left, another field, record, table, tool or call is offered only where the
    tokens pay for this stage, the next item and the cheapest way to the spec's end (`StageTokens`); one token
    short, the stage closes its list, and that close stays admitted."""
    tokens = SPEC_BUDGET.tokens
    records_end = LIBRARY_STAGES[5].removesuffix("]}, ") + "]}]"
    cases = [  # (stages written before, a text that asks for more, one that closes instead, what more costs)
        (0, LIBRARY_STAGES[0], LIBRARY_STAGES[0].removesuffix(", ") + "}",
         tokens.header + tokens.field + tokens.records + tokens.after_tables()),
        (4, LIBRARY_STAGES[4], LIBRARY_STAGES[4].removesuffix(", ") + "]}]", 2 * tokens.record + tokens.after_tables()),
        (5, LIBRARY_STAGES[5], records_end, tokens.record + tokens.table + tokens.records + tokens.after_tables()),
        (9, LIBRARY_STAGES[9], ', "tools": [' + LIBRARY_STAGES[10], 2 * tokens.tool + tokens.after_tools()),
        (11, LIBRARY_STAGES[11], LIBRARY_STAGES[11].removesuffix(", ") + "]", 2 * tokens.call + tokens.after_plan()),
    ]  # fmt: skip
    for written, more, close, cost in cases:
        stages = SpecStages()
        for part in LIBRARY_STAGES[:written]:
            stages.grammar()
            stages.wrote(part)
        enough, short = stages.grammar(cost), stages.grammar(cost - 1)
        assert enough is not None and short is not None
        assert admits(bytes_matcher, enough, more) and admits(bytes_matcher, enough, close), more
        assert not admits(bytes_matcher, short, more) and admits(bytes_matcher, short, close), more


@pytest.mark.parametrize(
    ("stage", "text", "admitted"),
    [
        (3, ', "key": "title", "records": [{"title": "Emma"}, ', True),  # any plain string field may be the key
        (1, '"model_config": {"type": "string"}, ', False),  # a name pydantic reserves
        (2, '"title": {"type": "integer"}}', False),  # a field of the table already
        (4, '{"book_id": "B1", "title": "Emma again"}, ', False),  # a key written before
        (4, '{"book_id": "][", "title": "Emma again"}, ', False),  # a key starts with a letter or a digit
        (4, '{"book_id": "Ü-7", "title": "Emma again"}, ', True),
        (6, '{"name": "books", "fields": {"member_id": {"type": "string"}, ', False),  # a table name used before
        (8, ', "key": "member_id", "records": [{"member_id": "M1", "name": "Ada"}]}, ', False),  # a third table
        (9, ', "tools": [{"kind": "search", "name": "find", "description": "Find.", "table": "shelves", '
            '"field": "title"}, ', False),  # a table never written
        (9, ', "tools": [{"kind": "search", "name": "find", "description": "By loan.", "table": "books", '
            '"field": "on_loan"}, ', False),  # search needs a string field
        (9, ', "tools": [{"kind": "search", "name": "find", "description": "Find.", "table": "books", '
            '"field": "title"}]', False),  # the tools end before any of them changes something
        (10, '{"kind": "search", "name": "search", "description": "Again.", "table": "books", "field": "title"}]',
         False),  # a tool name used before
        (12, '{"tool": "search", "arguments": {"title": "Dune"}}]', True),  # read last: a change came before
        (14, ', "hint": "Search by title.", "untouched": ["books/B2"]}}', False),  # the plan names B2
        (14, ', "hint": "Please borrow the book \'Dune\' with id \'B2\'."}}', False),  # the instruction again
        (14, ', "hint": "Search \'Dune\'."}}', False),  # a hint quotes no value
        (14, ', "hint": "Dune is a book to search for."}}', False),  # a hint starts with a step
        (14, ', "hint": "Use borrow after a search."}}', True),
        (14, ', "hint": "Look up the title, then borrow."}}', True),
        (13, ', "question": {"table": "books", "key": "B2", "field": "on_loan"}, "instruction": "Please borrow '
             'the book \'Dune\' with id \'B2\'."', True),  # a question may follow a change
        (13, ', "instruction": "Please borrow the book \'Dune\'."', False),  # B2, which the plan types, unnamed
        (13, ', "instruction": "Borrow \'Dune\' with id \'B2\'."', False),  # no sentence's opening
        (13, ', "instruction": "Please borrow the book \'B2\' named \'Dune\'."', False),  # in the plan's order
        (11, ', "task": {"plan": [{"tool": "borrow", "arguments": {"book_id": "B9"}}]', False),  # never written
        (11, ', "task": {"plan": [{"tool": "borrow", "arguments": {"book_id": "B3"}}]', False),  # on loan
        (12, '{"tool": "search", "arguments": {"title": ""}}]', False),  # an empty search is refused
        (12, '{"tool": "search", "arguments": {"title": "]["}}]', False),  # 3 of 16 designs searched for it
        (12, '{"tool": "search", "arguments": {"title": "2 Dune]["}}]', True),

    ],
)  # fmt: skip
def test_each_stage_admits_only_what_names_the_written_and_repeats_none_of_it(
    bytes_matcher: Any, stage: int, text: str, admitted: bool
) -> None:
    grammar = written(LIBRARY_STAGES[:stage]).grammar()
    assert grammar is not None
    assert admits(bytes_matcher, grammar, text) is admitted, text


def test_a_plan_that_changes_nothing_must_ask_a_question(bytes_matcher: Any) -> None:
    stages = SpecStages()
    for part in [*LIBRARY_STAGES[:11], ', "task": {"plan": [{"tool": "search", "arguments": {"title": "Dune"}}]']:
        stages.grammar()
        stages.wrote(part)
    grammar = stages.grammar()
    assert grammar is not None and stages.stage == "brief"
    brief = ", \"instruction\": \"Tell me who wrote 'Dune' and 'B2'?\""
    assert not admits(bytes_matcher, grammar, brief)
    asked = ', "question": {"table": "books", "key": "B2", "field": "title"}' + brief
    assert admits(bytes_matcher, grammar, asked)
    assert not admits(bytes_matcher, grammar, asked.replace('"B2"', '"B9"'))  # no such record


def test_no_question_is_offered_whose_answer_is_empty(bytes_matcher: Any) -> None:
    """A question whose answer is blank would be refused by the compiler (2 of 16 designs of one measured
    iteration were); a plan of reads alone may end only where some question has an answer."""
    untitled = LIBRARY_STAGES[4].replace('"Dune"', '" "')
    stages = SpecStages()
    plan = ', "task": {"plan": [{"tool": "search", "arguments": {"title": "Dune"}}]'
    for part in [*LIBRARY_STAGES[:4], untitled, *LIBRARY_STAGES[5:11], plan]:
        stages.grammar()
        stages.wrote(part)
    grammar = stages.grammar()
    assert grammar is not None and stages.stage == "brief"
    brief = ", \"instruction\": \"Tell me the title of 'Dune' and 'B2'?\""
    asked = ', "question": {"table": "books", "key": "B2", "field": "title"}' + brief
    assert not admits(bytes_matcher, grammar, asked)  # B2's title is blank
    assert admits(bytes_matcher, grammar, asked.replace("B2", "B1"))
    assert admits(bytes_matcher, grammar, asked.replace('"title"', '"on_loan"'))  # false is an answer
    keyless = SpecStages()  # a table of its key alone has nothing to ask: a read cannot end the plan
    for part in [LIBRARY_STAGES[0].removesuffix(", ") + "}", ', "key": "book_id", "records": [{"book_id": "B1"}]}]',
                 ', "tools": [{"kind": "lookup", "name": "find", "description": "Find.", "table": "books"}, ',
                 '{"kind": "delete", "name": "drop", "description": "Drop.", "table": "books"}]']:  # fmt: skip
        keyless.grammar()
        keyless.wrote(part)
    call = keyless.grammar()
    assert call is not None and keyless.stage == "task"
    assert not admits(bytes_matcher, call, ', "task": {"plan": [{"tool": "find", "arguments": {"book_id": "B1"}}]')
    assert admits(bytes_matcher, call, ', "task": {"plan": [{"tool": "drop", "arguments": {"book_id": "B1"}}]')


def test_plans_that_must_change_never_end_on_a_read(bytes_matcher: Any) -> None:
    """`plans="change"`: a read may open the plan but never end it, whatever question could follow; once a
    call changed something, a read may end it. With one call a plan, that call is a change."""
    search = '{"tool": "search", "arguments": {"title": "Dune"}}'
    borrow = '{"tool": "borrow", "arguments": {"book_id": "B2"}}'
    grammars = {}
    for rule in ("any", "change"):
        stages = SpecStages(plans=rule)
        for part in LIBRARY_STAGES[:11]:
            stages.grammar()
            stages.wrote(part)
        grammars[rule] = stages.grammar()
    opening = ', "task": {"plan": ['
    assert admits(bytes_matcher, grammars["any"], f"{opening}{search}]")
    assert not admits(bytes_matcher, grammars["change"], f"{opening}{search}]")
    for rule in ("any", "change"):
        assert admits(bytes_matcher, grammars[rule], f"{opening}{search}, ")  # a change may still follow
        assert admits(bytes_matcher, grammars[rule], f"{opening}{borrow}]")
    after_change = SpecStages(plans="change")
    for part in [*LIBRARY_STAGES[:11], f"{opening}{borrow}, "]:
        after_change.grammar()
        after_change.wrote(part)
    assert admits(bytes_matcher, after_change.grammar(), f"{search}]")
    one_call = SpecStages(dataclasses.replace(SPEC_BUDGET, plan=1), plans="change")
    for part in LIBRARY_STAGES[:11]:
        one_call.grammar()
        one_call.wrote(part)
    grammar = one_call.grammar()
    assert admits(bytes_matcher, grammar, f"{opening}{borrow}]")
    assert not admits(bytes_matcher, grammar, f"{opening}{borrow}, ")
    assert not admits(bytes_matcher, grammar, f"{opening}{search}, ")


def test_the_tools_end_only_once_one_of_them_can_change_a_record_as_written(bytes_matcher: Any) -> None:
    """5 of 16 designs of one measured arm ended their tools on a transfer with nothing to move and closed
    with an empty plan: a tool list ends only on a change that can be called on the records as written."""

    def tools_grammar(balance: int) -> str:
        stages = SpecStages()
        for part in ['{"spec_version": 1, "name": "bank", "description": "A bank.", "tables": [{"name": "accounts", '
                     '"fields": {"account_id": {"type": "string"}, ', '"balance": {"type": "integer"}, ',
                     '"open": {"type": "boolean", "default": true}}',
                     f', "key": "account_id", "records": [{{"account_id": "A1", "balance": {balance}}}, ',
                     '{"account_id": "A2", "balance": 0}]}]']:  # fmt: skip
            stages.grammar()
            stages.wrote(part)
        grammar = stages.grammar()
        assert grammar is not None and stages.stage == "tool"
        return grammar

    head = ', "tools": [{"kind": "%s", "name": "act", "description": "Act.", "table": "accounts"'
    transfer, update = head % "transfer" + ', "field": "balance"', head % "update" + ', "field": "open"'
    empty, funded = tools_grammar(0), tools_grammar(5)
    assert not admits(bytes_matcher, empty, transfer + "}]")  # nothing to move: not the last tool
    assert admits(bytes_matcher, empty, transfer + "}, ") and admits(bytes_matcher, empty, head % "delete" + "}]")
    assert admits(bytes_matcher, funded, transfer + "}]")
    assert not admits(bytes_matcher, funded, transfer + ', "minimum": 9}]')  # a minimum may leave nothing to move
    assert admits(bytes_matcher, funded, transfer + ', "minimum": 9}, ')
    # every account is open: a transition from closed changes none of them, one from open does
    close, reopen = '{"from": true, "to": false}', '{"from": false, "to": true}'
    assert admits(bytes_matcher, empty, f'{update}, "transitions": [{close}]}}]')
    assert not admits(bytes_matcher, empty, f'{update}, "transitions": [{reopen}]}}]')
    assert admits(bytes_matcher, empty, f'{update}, "transitions": [{reopen}]}}, ')
    assert admits(bytes_matcher, empty, f'{update}, "value": false, "transitions": [{close}]}}]')
    assert not admits(bytes_matcher, empty, f'{update}, "value": true, "transitions": [{close}]}}]')
    assert admits(bytes_matcher, empty, f'{update}, "value": true}}]')


def test_design_settings_build_stages_under_their_plan_rules() -> None:
    stages = DesignerConfig(format="spec", plans="change", plan_calls=1, task_text="derived").spec_stages()
    assert (stages.plans, stages.budget.plan, stages.task_text) == ("change", 1, "derived")
    assert stages.budget.tables == SPEC_BUDGET.tables  # only the plan's length is the setting's
    listed = DesignerConfig(format="spec", key_choices=True).spec_stages()
    assert listed.key_choices and listed.budget.tokens.records == SPEC_BUDGET.tokens.records + KEY_CHOICES_TOKENS
    assert DesignerConfig().spec_stages().budget == SPEC_BUDGET


def test_names_and_keys_other_than_the_used_ones(bytes_matcher: Any) -> None:
    used = {"search", "sea", "borrow"}
    rules = GrammarRules()
    grammar = rules.grammar(name_except(used, rules))
    for name in used:
        assert not admits(bytes_matcher, grammar, json.dumps(name)), name
    for name in ("se", "seas", "searches", "b", "borrowed", "x", "return_book"):
        assert admits(bytes_matcher, grammar, json.dumps(name)), name
    assert not admits(bytes_matcher, grammar, '"Search"') and not admits(bytes_matcher, grammar, '"1a"')
    longest = "a" * SPEC_BUDGET.name
    rules = GrammarRules()
    grammar = rules.grammar(name_except({longest}, rules))
    assert not admits(bytes_matcher, grammar, json.dumps(longest))
    assert not admits(bytes_matcher, grammar, json.dumps(longest + "a")), "longer than the budget"
    assert admits(bytes_matcher, grammar, json.dumps(longest[:-1])) and admits(bytes_matcher, grammar, '"b"')
    rules = GrammarRules()
    keys = rules.grammar(key_except({"B-1", "a]^\\\\"}, rules))
    assert not admits(bytes_matcher, keys, '"B-1"') and admits(bytes_matcher, keys, '"B-12"')
    assert admits(bytes_matcher, keys, '"B-2"') and admits(bytes_matcher, keys, '"Ä ö"')
    assert not admits(bytes_matcher, keys, '"a/b"') and not admits(bytes_matcher, keys, '" B"')


def test_the_trainer_restricts_each_stage_by_its_own_grammar(embedded_policy: tuple[Any, Any]) -> None:
    """A staged reply as the engine records it (ids per stage, a span per stage): the trainer refuses none of
    its tokens, and at a stage's first token admits only what that stage's grammar starts with."""
    _, tokenizer = embedded_policy
    stages, completion, spans = SpecStages(), [], []
    for part in LIBRARY_STAGES:
        grammar = stages.grammar()
        assert grammar is not None
        spans.append(SampledSpan(start=len(completion), grammar=grammar))
        completion += tokenizer.encode(part, add_special_tokens=False)
        stages.wrote(part)
    completion.append(tokenizer.convert_tokens_to_ids("<|im_end|>"))
    ones = [1] * len(completion)
    row = TrainingRow(role="designer", group="g", prompt_ids=[1], completion_ids=completion, env_mask=ones,
                      logprobs=[0.0] * len(completion), spans=spans, reward=0.5)  # fmt: skip
    restrictions = GrammarRestrictions(tokenizer)
    restrictions.prepare([row])
    restriction = restrictions.find([1], completion)
    assert restriction is not None and not restriction.refused
    admitted = restriction.admitted(len(tokenizer))
    positions = list(restriction.positions)
    records = positions.index(spans[3].start)  # `, "key": ` opens the records stage, whatever came before
    first = {tokenizer.decode([t]) for t in range(len(tokenizer)) if admitted[records][t]}
    assert first and all(', "key": "'.startswith(text) for text in first), sorted(first)[:10]
    whole = AdmittedTokens(tokenizer).restriction(spans[0].grammar, completion, [1] * len(completion))
    assert whole.refused, "one grammar for the whole reply would refuse the later stages"
