"""Every gate through `validate` and `spadework toolworld validate`: good code passes, each flaw is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.sandbox.conftest import LIBRARY_SOURCE
from toolworlds.sandbox import SandboxPool
from toolworlds.untrusted.validate import GATES, validate
from trainers.designer.memory import RememberedWorld
from trainers.designer.prompt import EXAMPLE_WORLD, PROMPT_VERSION, designer_messages
from trainers.documents import Document

pytestmark = pytest.mark.anyio


def edited(old: str, new: str) -> str:
    assert old in LIBRARY_SOURCE
    return LIBRARY_SOURCE.replace(old, new)


FREE_LUNCH = edited("any(b.title == self.wanted for b in loans)", "True")
UNSEEDED = edited("titles = rng.sample(", "titles = random.sample(")
ALIASED = edited("titles = rng.sample(", "draw = random\n        titles = draw.sample(")  # past the static gate
CLOCKED = edited("titles = rng.sample(", "titles = [str(datetime.date.today())] + rng.sample(").replace(
    "import random\n", "import datetime\nimport random\n", 1
)
LEAKY = edited(
    'hint="Search by title to learn the book\'s id."',
    'hint=f"It is {self.wanted}, id B" + str(titles.index(self.wanted))',
)
HANGS = edited(
    "        return [b for b in self.state.books.values() if title.lower()",
    "        while True:\n            pass\n        return [b for b in self.state.books.values() if title.lower()",
)
INSIDER = edited(
    '"""A small library: find a book by title and borrow it."""',
    '"""A small library: find a book by title and borrow it (see `LOAN_RULES`)."""',
)
KNOWS_WHEN_CHECKED = (Path(__file__).parents[1] / "worlds" / "knows_when_checked.py").read_text()
NO_IMPORT = edited("import random\n", "")
REPLY = f"Here is the world you asked for:\n\n```python\n{NO_IMPORT}```\n\nIt has two tools."  # fmt: skip


async def test_a_sound_world_passes_every_gate(pool: SandboxPool) -> None:
    verdict = await validate(LIBRARY_SOURCE, pool)
    assert [gate.name for gate in verdict.gates] == list(GATES)
    assert verdict.valid and verdict.valid_without_repair and verdict.rejection is None
    assert verdict.world is not None and verdict.world.name == "library"
    assert len(verdict.checks) == 8 and all(check.passed for check in verdict.checks)


async def test_a_reply_is_extracted_and_repaired_and_both_validities_are_told(pool: SandboxPool) -> None:
    verdict = await validate(REPLY, pool)
    assert verdict.valid
    assert verdict.fixes == ["added import random"] or any("random" in fix for fix in verdict.fixes)
    assert not verdict.valid_without_repair  # without its import the world cannot build a task


@pytest.mark.parametrize(
    ("text", "gate", "reason"),
    [
        ("I cannot write that world.", "extract", "no code block"),
        (LIBRARY_SOURCE + "\nopen('/etc/passwd')\n", "policy", "forbidden name: open"),
        (LIBRARY_SOURCE + "\nimport os\n", "policy", "import"),
        (LIBRARY_SOURCE + "\nassert False, 'at import'\n", "load", "AssertionError: at import"),
        (FREE_LUNCH, "smoke", "doing nothing does not: seed 0: finishing at once already scores 1.0"),
        (UNSEEDED, "policy", "unseeded randomness: random.sample: draw from the rng build gets"),
        (ALIASED, "smoke", "reset: RuntimeError: unseeded randomness: draw from the rng build() gets"),
        (CLOCKED, "policy", "wall clock: .today(): keep the time in the state"),
        (LEAKY, "smoke", "hint helps without the answer"),
        (HANGS, "smoke", "plays at all: the world crashed"),
        (INSIDER, "smoke", "written for the agent: the description names 'LOAN_RULES', code the agent cannot see"),
        (KNOWS_WHEN_CHECKED, "smoke", "doing nothing does not: seed 0: finishing at once already scores 1.0"),
    ],
    ids=[
        "no code",
        "forbidden name",
        "forbidden import",
        "load error",
        "free lunch",
        "unseeded",
        "unseeded through an alias",
        "wall clock",
        "leaky hint",
        "hang",
        "code in the description",
        "tells checks from plays",
    ],
)
async def test_each_flaw_is_rejected_at_its_gate(pool: SandboxPool, text: str, gate: str, reason: str) -> None:
    verdict = await validate(text, pool)
    assert not verdict.valid and verdict.world is None
    assert verdict.gates[-1].name == gate and not verdict.gates[-1].passed
    assert verdict.rejection is not None and verdict.rejection.startswith(gate) and reason in verdict.rejection


async def test_the_designer_prompt_shows_a_world_that_passes_every_gate(pool: SandboxPool) -> None:
    verdict = await validate(EXAMPLE_WORLD, pool)
    assert verdict.valid, verdict.rejection
    document = Document(source="pydoc:topics/for", title="The for statement", text="The for statement iterates.")
    remembered = RememberedWorld(
        code_hash="0" * 64, name="ledger", iteration=1, document="d", description="A ledger.", tools=["post"],
        source="", scores_plain=[1.0], scores_hinted=[1.0], mean_plain=1.0, mean_hinted=1.0, regret=0.0,
        reward=0.0, status="too_easy",
    )  # fmt: skip
    system, user = designer_messages(document, [remembered])
    assert "The class docstring is what the agent reads first" in system["content"]
    assert EXAMPLE_WORLD in system["content"] and PROMPT_VERSION == "designer-v2"
    assert "The for statement iterates." in user["content"] and "ledger (post)" in user["content"]
    assert "Worlds you wrote before" not in designer_messages(document, [])[1]["content"]
