"""The hostile corpus is contained: nothing escapes, the host is unchanged, no process survives, and the
pool keeps serving honest worlds after every attack."""

from __future__ import annotations

import secrets
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.procfs import process_stats
from tests.sandbox.conftest import FAST_DEADLINES, play_library
from tests.sandbox.hostile import CORPUS, Hostile
from toolworlds.core import Finish, ToolCall
from toolworlds.sandbox import SandboxError, SandboxPool, SandboxSettings
from toolworlds.untrusted.policy import check_policy

pytestmark = pytest.mark.anyio
STRAYS = [Path("/tmp/spadework-escaped"), Path("/dev/shm/spadework-escaped")]
TOKEN_NAME = "SPADEWORK_TEST_TOKEN"


class Host:
    """What an attack would touch if it got out: a world-writable dir, a world-readable secret, a port."""

    def __init__(self, root: Path) -> None:
        self.outside = root / "outside"
        self.outside.mkdir()
        self.outside.chmod(0o777)  # only the sandbox, not file permissions, may stop writes here
        self.secret_text = "TOP-SECRET-" + secrets.token_hex(8)
        self.secret = root / "secret.txt"
        self.secret.write_text(self.secret_text)
        root.chmod(0o755)
        self.secret.chmod(0o644)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.token = secrets.token_hex(12)
        for stray in STRAYS:  # left by an earlier run that failed; each run starts clean
            stray.unlink(missing_ok=True)

    def source(self, attack: Hostile) -> str:
        return attack.source(str(self.outside), str(self.secret), self.port)

    def breaches(self, texts: list[str]) -> list[str]:
        found = [f"wrote {path}" for path in self.outside.iterdir()]
        found += [f"wrote {path}" for path in STRAYS if path.exists()]
        found += ["read the secret" for text in texts if self.secret_text in text]
        found += ["read the parent's environment" for text in texts if self.token in text]
        try:
            self.listener.accept()[0].close()
            found.append("connected to the host")
        except BlockingIOError:
            pass
        return found


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # the pool's I/O is covered on both backends in test_pool; here containment counts


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    with pytest.MonkeyPatch.context() as patch:
        made = Host(tmp_path_factory.mktemp("host"))
        patch.setenv(TOKEN_NAME, made.token)
        yield made
        made.listener.close()


@pytest.fixture(scope="module")
async def hostile_pool(host: Host) -> AsyncIterator[SandboxPool]:
    async with SandboxPool(SandboxSettings(zygotes=2, deadlines=FAST_DEADLINES)) as running:
        yield running


async def attack(pool: SandboxPool, source: str) -> tuple[str, list[str]]:
    """Play the hostile world once; the outcome, and every text that came back from the sandbox."""
    texts: list[str] = []
    try:
        world = await pool.load(source, "hostile.py")
        episode = await pool.open(world)
        texts.append(repr(await episode.reset(0)))
        texts.append(repr(await episode.step(ToolCall(name="act"))))
        texts.append(repr(await episode.step(Finish())))
        await episode.close()
        return "ran", texts
    except SandboxError as error:
        texts.append(str(error))
        return error.reason, texts


def test_the_corpus_is_big_enough() -> None:
    assert len(CORPUS) >= 30
    assert len({attack.name for attack in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("hostile", CORPUS, ids=[attack.name for attack in CORPUS])
async def test_a_hostile_world_is_contained(hostile: Hostile, host: Host, hostile_pool: SandboxPool) -> None:
    outcome, texts = await attack(hostile_pool, host.source(hostile))
    assert host.breaches(texts) == []
    assert outcome in hostile.expect, texts[-1]
    assert all(len(text) < 300_000 for text in texts)  # every reply is bounded
    assert await play_library(hostile_pool) == 1.0  # and the pool still serves an honest world


PROCESS_ATTACKS = {"fork bomb", "a spinning thread", "os.system", "subprocess.run", "ignore signals, then hang"}


async def test_no_process_outlives_the_pool(host: Host) -> None:
    sessions: set[int] = set()
    async with SandboxPool(SandboxSettings(zygotes=2, deadlines=FAST_DEADLINES)) as pool:
        for hostile in CORPUS:
            if hostile.name in PROCESS_ATTACKS:
                sessions.update(pool.zygote_pids)
                await attack(pool, host.source(hostile))
        assert await play_library(pool) == 1.0
        sessions.update(pool.zygote_pids)
        assert pool.killed >= 1  # the hang's process
        assert len(sessions_with_processes(sessions)) == 2  # both zygotes, with their spares
    assert sessions_with_processes(sessions) == {}


def sessions_with_processes(sessions: set[int]) -> dict[int, list[int]]:
    """Processes still alive in any of `sessions` (each zygote leads its own), by session."""
    found: dict[int, list[int]] = {}
    for pid, fields in process_stats():
        if int(fields[3]) in sessions:
            found.setdefault(int(fields[3]), []).append(pid)
    return found


def test_the_policy_would_have_stopped_most_of_them(host: Host) -> None:
    stopped = [attack.name for attack in CORPUS if check_policy(host.source(attack))]
    passed = sorted({attack.name for attack in CORPUS} - set(stopped))
    # What gets past the policy is pure Python inside the world: loops, allocation, recursion, output.
    assert set(passed) <= {
        "infinite loop in a tool", "infinite loop in reset", "infinite loop in the scorer", "infinite loop at import",
        "one huge allocation", "allocate until refused", "recursion", "a huge observation", "a huge exception",
        "flood stdout", "a finaliser that hangs", "SystemExit",
    }, passed  # fmt: skip
