"""`OpenAIHttpProvider`: an OpenAI-compatible server called directly over aiohttp, without litellm.

Selected by ``transport = "openai"`` on a provider whose `model` is ``openai/<name>`` and that has
an `api_base` (`jobrouter.providers.config`): litellm's per-call work (request building through its
handlers, response objects, logging and cost tasks) is most of a worker's CPU per job
(docs/benchmarks.md), and for a server that already speaks the OpenAI chat API none of it is needed.
Everything that decides what a call means is shared with the litellm transport
(`jobrouter.providers.adapter.Adapter`): the whole-call deadline, the ONE retry layer, bulkhead,
rate limiter, chat-format folding, structured output, usage reporting, `inspect_prompt`.

One request, as sent::

    POST {api_base}/chat/completions
    Authorization: Bearer <key from api_key_env, or "no-key">
    {"model": "<model without openai/>", "messages": [...], "temperature": ..., "max_tokens":
     ..., "response_format": ..., **extra_params}        (keys left out when not set)

on this provider's one `aiohttp.ClientSession` (`jobrouter.providers.http_wire`: a connector of at
least `max_concurrency` kept-alive connections, socket connect timeout `timeout.connect`, inactivity
timeout `timeout.read`; the deadline bounds the whole call, reading the answer included). The answer
is read within `bounded_body.answer_cap` (`max_answer_bytes`, else sized to `max_tokens`), decoded
within the same cap; longer is `AnswerTooLarge`. A redirect is never followed. aiohttp, not httpx:
one POST costs about a tenth of the CPU (docs/benchmarks.md, `python -m tests.bench.http_clients`).
vcrpy records and replays aiohttp, so `jobrouter.providers.cassettes` works unchanged. Failures go
through `jobrouter.providers.classify` like litellm's: a refused or timed-out connect is `NotSent`;
a read timeout, a reset or a connection closed after the request left is `OutcomeUnknown`; an HTTP
error answer (its body read first) by its status (`STATUS_TABLE`), quoting the body's
`error.message`; a success status whose body is not a chat completion is `Rejected`
(`classify.malformed_answer`). The cost is priced as the litellm transport's is
(`jobrouter.providers.pricing`: the configured price, else litellm's shipped map read as a file,
without importing litellm).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from jobrouter.providers.adapter import Adapter, Answer
from jobrouter.providers.base import CompletionRequest, Message
from jobrouter.providers.bounded_body import answer_cap
from jobrouter.providers.classify import malformed_answer
from jobrouter.providers.config import OPENAI_PREFIX
from jobrouter.providers.http_wire import Sent

# Built once: json.dumps with an option builds a new encoder on every call.
_ENCODER = json.JSONEncoder(ensure_ascii=False)


@dataclass(frozen=True)
class _Request:
    url: str
    body: bytes
    headers: dict[str, str]
    limit: int  # bytes the answer may hold, decoded (`bounded_body.answer_cap`)


@dataclass(frozen=True)
class _Reply:
    status: int
    body: bytes


class OpenAIHttpProvider(Adapter):
    """A configured OpenAI-compatible provider reached with one aiohttp session."""

    sees_sending = True

    def _request(self, request: CompletionRequest, messages: tuple[Message, ...]) -> _Request:
        cfg = self._config
        if cfg.api_base is None or not cfg.model.startswith(OPENAI_PREFIX):
            # ProviderConfig refuses this; a config built another way must not reach the wire
            raise ValueError("transport 'openai' needs model 'openai/<name>' and api_base")
        body: dict[str, Any] = {
            **cfg.extra_params,
            "model": cfg.model[len(OPENAI_PREFIX) :],
            "messages": [{"role": m.role, "content": m.content} for m in messages],
        }
        optional = {
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "response_format": self._response_format(request),
        }
        body.update({k: v for k, v in optional.items() if v is not None})
        return _Request(
            url=cfg.api_base.rstrip("/") + "/chat/completions",
            body=_ENCODER.encode(body).encode("utf-8"),
            headers={
                "Authorization": f"Bearer {self._api_key()}",
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
            limit=answer_cap(cfg.max_answer_bytes, request.max_tokens),
        )

    async def _send(self, built: _Request, sent: Sent) -> _Reply:
        # an error answer raises HttpStatusError (body read): `Adapter._attempt` classifies it
        status, body = await self._wire.post(
            built.url, built.body, built.headers, sent, limit=built.limit
        )
        return _Reply(status, body)

    def _read(self, response: _Reply) -> Answer:
        try:
            data = json.loads(response.body)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
            raise malformed_answer(
                f"not JSON ({exc}): {response.body[:120]!r}", self._name, response.status
            ) from exc
        choices = data.get("choices") if isinstance(data, dict) else None
        first = choices[0] if isinstance(choices, list) and choices else None
        message = first.get("message") if isinstance(first, dict) else None
        if not isinstance(message, dict):
            raise malformed_answer(
                f"no choices[0].message: {response.body[:120]!r}", self._name, response.status
            )
        content = message.get("content")
        usage = data.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        model = data.get("model")
        finish = first.get("finish_reason") if isinstance(first, dict) else None
        return Answer(
            text=content if isinstance(content, str) else "",
            model=model if isinstance(model, str) else None,
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            finish_reason=finish if isinstance(finish, str) else None,
        )

    async def warm_up(self) -> None:
        """Make the HTTP session now (aiohttp's import, the connector), sending nothing; the
        price is resolved too (`Adapter.warm_up`)."""
        await super().warm_up()
        self._wire.open()

    async def close(self) -> None:
        """Close this provider's HTTP session; a second call does nothing."""
        if self._closed:
            return
        self._closed = True
        await self._close_http()
