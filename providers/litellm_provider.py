"""`LiteLLMProvider`: the `Provider` (and `InspectableProvider`) that calls LLMs through litellm.

The call's shape (deadline, the one retry layer, rate limiter, bulkhead, output checks,
`inspect_prompt`) is `jobrouter.providers.adapter.Adapter`'s; this module is the litellm transport:

    litellm.acompletion       num_retries=0, max_retries=0: litellm and the SDK retry nothing;
                              litellm's timeout is inactivity only (the deadline is the
                              adapter's `asyncio.timeout_at`); client= ours
                              (`jobrouter.providers.litellm_client`): no redirect followed,
                              the answer read within `bounded_body.answer_cap`

Every failure leaves as a `ProviderError` from `jobrouter.providers.classify` (or `CassetteMiss`).
The deadline expiring while the request is in flight is `OutcomeUnknown`; expiring while still
waiting for a bulkhead slot is `NotSent`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from jobrouter.providers import _litellm
from jobrouter.providers.adapter import KEYLESS_API_KEY, Adapter, Answer
from jobrouter.providers.base import CompletionRequest, Message
from jobrouter.providers.bounded_body import answer_cap
from jobrouter.providers.config import ProviderConfig
from jobrouter.providers.http_wire import Sent

if TYPE_CHECKING:
    from jobrouter.providers.litellm_client import LiteLLMClients

__all__ = ["KEYLESS_API_KEY", "LiteLLMProvider"]


class LiteLLMProvider(Adapter):
    """A configured provider reached through litellm (lazily imported on first use)."""

    _open: ClassVar[int] = 0  # instances not yet closed: litellm's client cache is process-wide

    def __init__(self, name: str, config: ProviderConfig) -> None:
        super().__init__(name, config)
        self._litellm_clients: LiteLLMClients | None = None
        LiteLLMProvider._open += 1

    def _ready(self) -> None:
        _litellm.load()

    def _request(self, request: CompletionRequest, messages: tuple[Message, ...]) -> dict[str, Any]:
        """The keyword arguments of the litellm call for `request` (key included)."""
        import httpx  # litellm depends on it; imported here to keep `providers` cheap

        cfg = self._config
        kwargs: dict[str, Any] = {
            **cfg.extra_params,
            "model": cfg.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "api_key": self._api_key(),
            "timeout": httpx.Timeout(cfg.timeout.read, connect=cfg.timeout.connect),
            "num_retries": 0,
            "max_retries": 0,
        }
        optional = {
            "api_base": cfg.api_base,
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "response_format": self._response_format(request),
        }
        kwargs.update({k: v for k, v in optional.items() if v is not None})
        return kwargs

    async def _send(self, built: dict[str, Any], sent: Sent) -> Any:
        from jobrouter.providers.litellm_client import ANSWER_CAP

        litellm = _litellm.load()
        client = self._clients().for_call(litellm, built["api_key"], built["timeout"])
        call = {**built, "client": client} if client is not None else built
        # the cap of this call's answer, read by the client's transport in this same task
        token = ANSWER_CAP.set(answer_cap(self._config.max_answer_bytes, built.get("max_tokens")))
        try:
            return await litellm.acompletion(**call)
        finally:
            ANSWER_CAP.reset(token)

    def _clients(self) -> LiteLLMClients:
        if self._litellm_clients is None:
            from jobrouter.providers.litellm_client import LiteLLMClients

            cfg = self._config
            self._litellm_clients = LiteLLMClients(self._name, cfg.model, cfg.api_base)
        return self._litellm_clients

    def _read(self, response: Any) -> Answer:
        choices = getattr(response, "choices", None) or []
        message = getattr(choices[0], "message", None) if choices else None
        usage = getattr(response, "usage", None)
        finish = getattr(choices[0], "finish_reason", None) if choices else None
        return Answer(
            text=getattr(message, "content", None) or "",
            model=getattr(response, "model", None),
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            finish_reason=finish if isinstance(finish, str) else None,
        )

    async def warm_up(self) -> None:
        """Import litellm and run its first-call setup for this model now, rather than inside
        the first attempt. The import blocks the event loop for seconds and the first call's
        lazy setup takes up to 2.4 s more; a worker (and a certification run) calls this before
        it claims jobs or calls the provider, so neither can stall its heartbeat (claims and
        attempt leases expire) nor push its first calls past their deadlines (outcomes unknown,
        circuits opened for the whole fleet). No request is sent (`_litellm.warm`). The price
        is resolved too (`Adapter.warm_up`)."""
        await super().warm_up()
        await _litellm.warm(self._config.model)

    async def close(self) -> None:
        """Release this provider; the last open one also closes litellm's shared clients."""
        if self._closed:
            return
        self._closed = True
        LiteLLMProvider._open -= 1
        await self._close_http()
        if self._litellm_clients is not None:
            await self._litellm_clients.close()
        if LiteLLMProvider._open == 0:
            await _litellm.close_clients()
