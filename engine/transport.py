"""POST a JSON body to an OpenAI-compatible server and get JSON back, at thousands of requests in flight.

Two transports, one interface:

- `AiohttpTransport` (asyncio): one aiohttp session with no pool cap of its own, since the engine's
  limiters already bound what is in flight. This is the hot path. Measured on this 2-core box against a
  loopback server with 50 ms latency, 3,000 requests at 1,000 concurrent: aiohttp 1,600-1,700 req/s;
  the `openai` SDK on its own aiohttp transport 200 req/s (`chat.completions.create` spends ~8 ms per
  request walking the body through its TypedDict transforms), 550 req/s through its raw `post`.
- `OpenAITransport` (any AnyIO backend, trio included): the `openai` SDK's `AsyncOpenAI.post`, with the
  SDK's own retries off (the engine retries). Used where aiohttp cannot run, or when asked for.

Both raise `EndpointFailure`, whose `retryable` says whether trying again can help: transport failures,
timeouts and 5xx can; 4xx and a 200 whose body is not JSON cannot.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Protocol

import sniffio

TransportKind = Literal["auto", "aiohttp", "openai"]


class EndpointFailure(Exception):
    """A request that got no usable answer; `cause` is a short stable label for counting."""

    def __init__(self, cause: str, detail: str, *, retryable: bool, status: int | None = None) -> None:
        super().__init__(f"{cause}: {detail}")
        self.cause = cause
        self.detail = detail
        self.retryable = retryable
        self.status = status


class Transport(Protocol):
    """`path` is under the base URL, or an absolute URL on the same server (llama.cpp's root endpoints)."""

    async def post_json(
        self, path: str, body: dict[str, Any], headers: dict[str, str], timeout: float
    ) -> dict[str, Any]: ...

    async def aclose(self) -> None: ...


def open_transport(base_url: str, api_key: str, kind: TransportKind = "auto") -> Transport:
    """The fastest transport the running event loop supports, unless `kind` names one."""
    if kind == "auto":
        kind = "aiohttp" if sniffio.current_async_library() == "asyncio" else "openai"
    if kind == "aiohttp":
        if sniffio.current_async_library() != "asyncio":
            raise ValueError("the aiohttp transport needs the asyncio backend; use --transport openai on trio")
        return AiohttpTransport(base_url, api_key)
    return OpenAITransport(base_url, api_key)


def _status_failure(status: int, text: str) -> EndpointFailure:
    retryable = status >= 500 or status in (408, 429)
    return EndpointFailure(f"http_{status}", text[:300], retryable=retryable, status=status)


def _decoded(raw: bytes | str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        excerpt = raw[:120] if isinstance(raw, str) else raw[:120].decode("utf-8", "replace")
        raise EndpointFailure("bad_json", f"{error}; body starts {excerpt!r}", retryable=False) from None
    if not isinstance(value, dict):
        raise EndpointFailure("bad_json", f"expected a JSON object, got {type(value).__name__}", retryable=False)
    return value


class AiohttpTransport:
    def __init__(self, base_url: str, api_key: str) -> None:
        import aiohttp

        self._aiohttp = aiohttp
        self._base_url = base_url.rstrip("/")
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=60)
        self._session = aiohttp.ClientSession(
            connector=connector,
            headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"},
            skip_auto_headers=("User-Agent",),
        )

    async def post_json(
        self, path: str, body: dict[str, Any], headers: dict[str, str], timeout: float
    ) -> dict[str, Any]:
        aiohttp = self._aiohttp
        try:
            async with self._session.post(
                path if path.startswith(("http://", "https://")) else self._base_url + path,
                data=json.dumps(body).encode(),
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as response:
                raw = await response.read()
                status = response.status
        except TimeoutError:
            raise EndpointFailure("timeout", f"no answer within {timeout:g} s", retryable=True) from None
        except aiohttp.ClientError as error:
            raise EndpointFailure("connection", repr(error), retryable=True) from None
        if status != 200:
            raise _status_failure(status, raw.decode("utf-8", "replace"))
        return _decoded(raw)

    async def aclose(self) -> None:
        await self._session.close()


class OpenAITransport:
    def __init__(self, base_url: str, api_key: str) -> None:
        import openai

        self._openai = openai
        self._client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)

    async def post_json(
        self, path: str, body: dict[str, Any], headers: dict[str, str], timeout: float
    ) -> dict[str, Any]:
        openai = self._openai
        try:
            response = await self._client.post(
                path,
                body=body,
                cast_to=openai._legacy_response.HttpxBinaryResponseContent,
                options={"headers": headers, "timeout": timeout},
            )
        except openai.APITimeoutError:
            raise EndpointFailure("timeout", f"no answer within {timeout:g} s", retryable=True) from None
        except openai.APIConnectionError as error:
            raise EndpointFailure("connection", repr(error.__cause__ or error), retryable=True) from None
        except openai.APIStatusError as error:
            raise _status_failure(error.status_code, error.response.text) from None
        return _decoded(response.content)

    async def aclose(self) -> None:
        await self._client.close()
