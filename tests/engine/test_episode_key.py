"""An episode's identity travels with each of its requests as one header, written and read by `EpisodeKey`."""

from __future__ import annotations

import pytest

from engine.trajectory import EPISODE_HEADER, EpisodeKey


@pytest.mark.parametrize(
    "key",
    [
        EpisodeKey(world="banking", seed=3, sample=2, hinted=True),
        EpisodeKey(world="runs/x/worlds/w-1.py", seed=0, role="designer"),  # a world file's path keeps its slashes
        EpisodeKey(world="acebench", seed=41, role="user"),
    ],
)
def test_a_header_reads_back_as_the_run_and_key_that_wrote_it(key: EpisodeKey) -> None:
    header = key.header("run-7")
    assert list(header) == [EPISODE_HEADER]
    assert EpisodeKey.from_header(header[EPISODE_HEADER]) == ("run-7", key)


@pytest.mark.parametrize(
    ("value", "wrong"),
    [
        ("run/agent/banking/0/plain", "is not run/role/world/seed/hinted/sample"),
        ("run/agent/banking/x/plain/0", "seed and sample are numbers"),
        ("run/agent/banking/0/maybe/0", "hinted is hinted or plain"),
        ("run/critic/banking/0/plain/0", "role"),
    ],
)
def test_a_malformed_header_is_refused_saying_what_is_wrong(value: str, wrong: str) -> None:
    with pytest.raises(ValueError, match=wrong):
        EpisodeKey.from_header(value)
