"""A scripted OpenAI-compatible model on a loopback port, for tests that point two pipelines at one server."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from aiohttp import web

Completion = Callable[[dict[str, Any]], dict[str, Any]]  # request body -> chat.completion response


@contextmanager
def serving(completion: Completion, model: str = "imperfect") -> Iterator[str]:
    """`completion` behind `/v1/chat/completions` (and `/v1/models` listing `model`), in a thread of its own;
    yields the OpenAI base URL."""

    async def chat(request: web.Request) -> web.Response:
        return web.json_response(completion(await request.json()))

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": model, "object": "model"}]})

    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", 0).start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.run_until_complete(runner.cleanup())
        loop.close()
