"""PROTOTYPE, benchmark only: a provider for OpenAI-compatible servers that skips litellm.

It answers one question of issue 18: how much of a worker's CPU per job is litellm's own
per-call work (the request built by the synchronous `completion()` on an executor thread,
pricing, the logging payload), and so what a transport without it would buy. One aiohttp
session, one POST per call, the answer parsed once. It is NOT a product provider: its errors
are classified coarsely (connect refused: not sent; any other failure: unknown; a status:
rejected), with no retry layer, no rate limit, no circuit: everything `providers/` does for a
real provider is missing. See docs/benchmarks.md for what it measured and the recommendation.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import aiohttp

from providers import Completion, CompletionRequest, Usage
from providers.classify import from_status
from providers.errors import NotSent, OutcomeUnknown


class RawOpenAIProvider:
    def __init__(self, name: str, api_base: str, model: str) -> None:
        self._name = name
        self._url = api_base.rstrip("/") + "/chat/completions"
        self.model = model
        self._session: aiohttp.ClientSession | None = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(f"raw:{self._url}:{self.model}".encode()).hexdigest()

    async def warm_up(self) -> None:
        pass  # nothing to load: aiohttp is imported with this module

    async def complete(self, request: CompletionRequest) -> Completion:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        }
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.output_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": request.output_schema},
            }
        try:
            async with self._session.post(self._url, json=body) as answer:
                if answer.status != 200:
                    raise from_status(answer.status, f"HTTP {answer.status}", self._name)
                data = await answer.json(content_type=None)
        except aiohttp.ClientConnectorError as exc:
            raise NotSent(str(exc), provider=self._name) from exc
        except aiohttp.ClientError as exc:
            raise OutcomeUnknown(str(exc), provider=self._name) from exc
        text = data["choices"][0]["message"]["content"] or ""
        usage = data.get("usage") or {}
        try:
            output = json.loads(text)
        except ValueError:
            output = None
        return Completion(
            text=text,
            output=output,
            model=data.get("model"),
            usage=Usage(
                prompt_tokens=usage.get("prompt_tokens"),
                completion_tokens=usage.get("completion_tokens"),
            ),
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
