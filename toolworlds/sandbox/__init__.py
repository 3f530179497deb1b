"""The sandbox: model-written toolworlds run in confined processes, one per episode, behind the pool's deadlines."""

from toolworlds.sandbox.confine import Limits
from toolworlds.sandbox.pool import (
    Deadlines,
    SandboxEpisode,
    SandboxPool,
    SandboxSettings,
    WorldCodeError,
    WorldInfo,
    WorldLoadError,
    WorldQuarantined,
)
from toolworlds.sandbox.processes import (
    EpisodeLost,
    SandboxError,
    SandboxStartError,
    WorkerCrashed,
    WorkerSettings,
    WorldTimeout,
)

__all__ = [
    "Deadlines",
    "EpisodeLost",
    "Limits",
    "SandboxEpisode",
    "SandboxError",
    "SandboxPool",
    "SandboxSettings",
    "SandboxStartError",
    "WorkerCrashed",
    "WorkerSettings",
    "WorldCodeError",
    "WorldInfo",
    "WorldLoadError",
    "WorldQuarantined",
    "WorldTimeout",
]
