"""Several model servers behind one object: least-loaded choice, sticky episodes, bounded in-flight, retries.

An episode asks the pool for an endpoint once and keeps it for all its turns, so the server can reuse the
prefix cache of the conversation so far. Each endpoint bounds its own in-flight requests; a request that
fails in a way worth repeating (transport error, timeout, 5xx, 429) is retried with full-jitter
exponential backoff, and anything else fails at once.
"""

from __future__ import annotations

import random
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio

from engine.transport import EndpointFailure, Transport, TransportKind, open_transport


def endpoint_problem(url: str) -> str | None:
    """What makes `url` unusable as an OpenAI base URL (`http://host:port/v1`), or None: a typo caught here is
    a usage error, not every episode of a run failing to connect."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{url!r} is not an http(s) URL with a host, like http://localhost:8000/v1"
    try:
        parts.port  # noqa: B018 (parsing it is the check)
    except ValueError:
        return f"{url!r} has no valid port"
    return None


@dataclass(frozen=True)
class RetryPolicy:
    """Full-jitter exponential backoff: attempt n waits uniform(0, min(cap, base * 2**n)) seconds."""

    attempts: int = 4
    base_s: float = 0.2
    cap_s: float = 5.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        return rng.uniform(0.0, min(self.cap_s, self.base_s * 2**attempt))


@dataclass
class Answer:
    """A server's JSON answer and what it cost to get it."""

    body: dict[str, Any]
    latency_s: float
    attempts: int


class Endpoint:
    """One server: its transport, a cap on requests in flight, and how loaded it is."""

    def __init__(self, url: str, transport: Transport, max_in_flight: int) -> None:
        self.url = url
        self.transport = transport
        self.limiter = anyio.CapacityLimiter(max_in_flight)
        self.episodes = 0
        self.requests = 0
        self.failures = 0

    @property
    def in_flight(self) -> int:
        return int(self.limiter.borrowed_tokens)


class EndpointPool:
    def __init__(self, endpoints: Sequence[Endpoint], retry: RetryPolicy, seed: int = 0) -> None:
        if not endpoints:
            raise ValueError("give at least one endpoint")
        self.endpoints = list(endpoints)
        self.retry = retry
        self._rng = random.Random(seed)

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        urls: Sequence[str],
        *,
        api_key: str = "spadework",
        max_in_flight: int = 4096,
        retry: RetryPolicy | None = None,
        transport: TransportKind = "auto",
    ) -> AsyncIterator[EndpointPool]:
        """Connect to every URL (an OpenAI base URL such as `http://host:8000/v1`); close them after."""
        endpoints = [Endpoint(url, open_transport(url, api_key, transport), max_in_flight) for url in urls]
        try:
            yield cls(endpoints, retry or RetryPolicy())
        finally:
            with anyio.CancelScope(shield=True):
                for endpoint in endpoints:
                    await endpoint.transport.aclose()

    @contextmanager
    def sticky(self) -> Iterator[Endpoint]:
        """The least-loaded endpoint (fewest live episodes, then fewest requests in flight), held for one episode."""
        endpoint = min(self.endpoints, key=lambda candidate: (candidate.episodes, candidate.in_flight))
        endpoint.episodes += 1
        try:
            yield endpoint
        finally:
            endpoint.episodes -= 1

    async def post(
        self, endpoint: Endpoint, path: str, body: dict[str, Any], headers: dict[str, str], timeout: float
    ) -> Answer:
        """POST with retries; raises the last `EndpointFailure` when every attempt failed."""
        started = time.perf_counter()
        for attempt in range(self.retry.attempts):
            try:
                async with endpoint.limiter:
                    endpoint.requests += 1
                    body_out = await endpoint.transport.post_json(path, body, headers, timeout)
                return Answer(body_out, time.perf_counter() - started, attempt + 1)
            except EndpointFailure as failure:
                endpoint.failures += 1
                if not failure.retryable or attempt + 1 == self.retry.attempts:
                    raise
                await anyio.sleep(self.retry.delay(attempt, self._rng))
        raise AssertionError("unreachable: the loop returns or raises")
