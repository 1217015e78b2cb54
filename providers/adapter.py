"""`Adapter`: what every provider transport shares, whatever carries the request.

One `complete()` is, from the outside in:

    deadline = now + (request.timeout or config.timeout.read)      whole call, retries included
    retrying(...)             our ONE retry layer (NotSent and 429 only; never past the deadline)
      rate_limiter.admit      local token buckets; NotSent when the wait exceeds the deadline
      asyncio.timeout_at      the deadline, enforced here: a transport's timeout is inactivity
        bulkhead.hold         a slot only while the request is in flight
          self._send(...)     the transport: one request, no retries of its own
    parse + validate          invalid JSON or schema-invalid answer -> Rejected (not retried)

Every failure leaves as a `ProviderError` from `jobrouter.providers.classify` (or `CassetteMiss`).
The deadline expiring after the request was sent is `OutcomeUnknown`; expiring while still waiting
for a bulkhead slot, or (native transport) for a connection, DNS or the connect, is `NotSent` (not
retryable: the deadline is spent). What counts as sent depends on what the transport can see: the
native transport (`sees_sending`) marks it from aiohttp's trace when the request's headers went out
(`jobrouter.providers.http_wire.Sent`); the litellm transport cannot see inside litellm, so for it
the request counts as sent from the moment it holds a bulkhead slot, and a deadline expiring while
litellm still waits for a connection is `OutcomeUnknown` (a known, conservative over-report).

A transport (`LiteLLMProvider`, `OpenAIHttpProvider`) supplies `_request` (build the request
from a `CompletionRequest`; the messages as `_wire_messages` gives them), `_send` (send it once)
and `_read` (the answer's text, model and reported usage). Everything else is here, once: the
key from its environment variable (registered for redaction), the system text folded for a chat
format without a system role, the schema asked for or added as an instruction, the deadline, the
bulkhead, the rate limiter, the retry layer, structured-output checks, and `inspect_prompt`
(llama.cpp's /extras tokenizer for a chat format, litellm's offline counter for a hosted model).
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from typing import Any, Self

from jobrouter.providers import _litellm, pricing, prompt_inspection, structured
from jobrouter.providers.base import Completion, CompletionRequest, Message, PromptInspection, Usage
from jobrouter.providers.chat_formats import FORMATS, fold_system
from jobrouter.providers.classify import classify
from jobrouter.providers.config import ProviderConfig, provider_fingerprint
from jobrouter.providers.errors import NotSent, OutcomeUnknown, ProviderError, Rejected
from jobrouter.providers.http_wire import Sent, Wire, WireTimeouts
from jobrouter.providers.redact import register_secret
from jobrouter.providers.resilience import Bulkhead, RateLimiter, retrying

# Sent as the key when `api_key_env` is None (a keyless local server). The openai SDK refuses
# to build a request without some key, and that refusal would be an unclassifiable error.
KEYLESS_API_KEY = "no-key"
# bytes a llama.cpp /extras answer may hold (a token list for a whole prompt: ids of a few bytes
# each), bounded like every answer (`jobrouter.providers.bounded_body`)
EXTRAS_ANSWER_LIMIT = 16 * 1024 * 1024


@dataclass(frozen=True)
class Answer:
    """What a transport read from a successful answer (None: the answer did not say)."""

    text: str
    model: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str | None = None  # "stop", "length" (cut off at max_tokens), ...


class Adapter:
    """A configured provider; subclasses supply the transport (`_request`, `_send`, `_read`)."""

    # True: `_send` sets its `Sent` mark when the request goes out; False: it counts as sent
    # from the moment the attempt holds a bulkhead slot (the transport cannot see more)
    sees_sending = False

    def __init__(self, name: str, config: ProviderConfig) -> None:
        self._name = name
        self._config = config
        self._fingerprint = provider_fingerprint(name, config)
        self.bulkhead = Bulkhead(config.max_concurrency)
        self.rate_limiter = RateLimiter(
            name, config.rate_limit.requests_per_minute, config.rate_limit.tokens_per_minute
        )
        # the provider's one aiohttp session (llama.cpp /extras; the native transport's calls)
        self._wire = Wire(
            WireTimeouts(connect=config.timeout.connect, read=config.timeout.read),
            connections=config.max_concurrency,
            provider=name,
        )
        self._closed = False
        self._price: pricing.Pricing | None = None
        if config.api_key_env is not None:
            # known from the start, not only from the first call: a process that never calls
            # this provider (an HTTP front, `jobrouter resolve`) still scrubs its key from an
            # operator's result and from every text it stores
            register_secret(os.environ.get(config.api_key_env))

    @property
    def name(self) -> str:
        return self._name

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    @property
    def model(self) -> None:
        """None: an attempt records the model the answer names (the configured model string is
        a route, e.g. ``openai/gpt-4o-mini``, not what the provider reports)."""
        return None

    @property
    def config(self) -> ProviderConfig:
        return self._config

    @property
    def price(self) -> pricing.Pricing:
        """What this provider's tokens cost (`jobrouter.providers.pricing`), resolved once:
        by `warm_up` before a process calls it, else at the first use."""
        if self._price is None:
            self._price = pricing.resolve_price(self._name, self._config)
        return self._price

    # --- what a transport supplies ------------------------------------------------------------

    def _request(self, request: CompletionRequest, messages: tuple[Message, ...]) -> Any:
        raise NotImplementedError

    async def _send(self, built: Any, sent: Sent) -> Any:
        raise NotImplementedError

    def _read(self, response: Any) -> Answer:
        raise NotImplementedError

    def _ready(self) -> None:
        """Called first in every `complete` (litellm's transport imports litellm here)."""

    # --- shared -------------------------------------------------------------------------------

    def _api_key(self) -> str:
        env = self._config.api_key_env
        if env is None:
            return KEYLESS_API_KEY
        key = os.environ.get(env)
        if not key:
            raise NotSent(
                f"environment variable {env} (api_key_env) is not set or empty",
                provider=self._name,
                retryable=False,
                counts_against_health=False,
            )
        register_secret(key)  # a provider may echo it: scrubbed from every error text
        return key

    def _system_role(self) -> bool:
        fmt = FORMATS.get(self._config.chat_format or "")
        return fmt is None or "system" in fmt.roles

    def _wire_messages(
        self, messages: tuple[Message, ...], output_schema: dict[str, Any] | None
    ) -> tuple[Message, ...]:
        """The messages as they go out: system text folded for a format without a system role,
        the schema instruction added when the provider cannot be asked for a schema."""
        cfg = self._config
        sent = fold_system(cfg.chat_format, messages)
        if (
            output_schema is not None
            and structured.response_format(cfg.structured_output, output_schema) is None
        ):
            sent = structured.with_instruction(sent, output_schema, self._system_role())
        return sent

    def _response_format(self, request: CompletionRequest) -> dict[str, Any] | None:
        if request.output_schema is None:
            return None
        return structured.response_format(self._config.structured_output, request.output_schema)

    def _built(self, request: CompletionRequest) -> Any:
        """`_request`, any failure to build it a definite `NotSent` (not retried: the same
        request fails the same way) rather than an unrecognised error, which the router would
        have to record as an outcome unknown for a request that never left."""
        try:
            return self._request(
                request, self._wire_messages(request.messages, request.output_schema)
            )
        except ProviderError:
            raise
        except Exception as exc:
            raise NotSent(
                f"the request could not be built: {type(exc).__name__}: {exc}",
                provider=self._name,
                retryable=False,
                counts_against_health=False,
            ) from exc

    async def complete(self, request: CompletionRequest) -> Completion:
        if self._closed:  # nothing can leave a closed client: provably not sent
            raise NotSent(
                f"provider {self._name!r} is closed",
                provider=self._name,
                retryable=False,  # the same closed provider refuses the same way
                counts_against_health=False,  # our lifecycle, not the provider's health
            )
        self._ready()
        built = self._built(request)  # NotSent when it cannot be built: nothing was sent
        budget = request.timeout or self._config.timeout.read
        deadline = asyncio.get_running_loop().time() + budget
        estimate = _estimate_tokens(request) if self._config.rate_limit.tokens_per_minute else 0

        async def attempt() -> Any:
            return await self._attempt(built, estimate, deadline, budget)

        response = await retrying(attempt, self._config.retry, deadline=deadline)
        return self._completion(response, request, estimate)

    async def _attempt(self, built: Any, estimate: int, deadline: float, budget: float) -> Any:
        loop = asyncio.get_running_loop()
        await self.rate_limiter.admit(estimate, budget=deadline - loop.time())
        holding = False
        sent = Sent()
        scope = asyncio.timeout_at(deadline)
        try:
            async with scope, self.bulkhead.hold():
                holding = True
                if not self.sees_sending:
                    sent.set()
                return await self._send(built, sent)
        except TimeoutError as exc:
            if not scope.expired():
                raise classify(exc, self._name) from exc
            if not holding:
                raise NotSent(
                    f"no bulkhead slot free (limit {self.bulkhead.limit}) within the "
                    f"{budget:g}s deadline",
                    provider=self._name,
                    counts_against_health=False,
                ) from exc
            if not sent.is_set:
                raise NotSent(
                    f"deadline of {budget:g}s passed before the request was sent (waiting "
                    "for a connection, DNS or the connect)",
                    provider=self._name,
                    retryable=False,
                ) from exc
            raise OutcomeUnknown(
                f"deadline of {budget:g}s passed with the request in flight", provider=self._name
            ) from exc
        except ProviderError:
            raise
        except Exception as exc:
            raise classify(exc, self._name) from exc

    def _completion(self, response: Any, request: CompletionRequest, estimate: int) -> Completion:
        answer = self._read(response)
        prompt_tokens, completion_tokens = reported_usage(
            answer.prompt_tokens, answer.completion_tokens
        )
        if estimate:
            self.rate_limiter.settle(estimate, (prompt_tokens or 0) + (completion_tokens or 0))
        output = None
        if request.output_schema is not None:
            output = structured.parse_output(
                answer.text,
                request.output_schema,
                provider=self._name,
                prompt_tokens=prompt_tokens,
                finish_reason=answer.finish_reason,
            )
        cost = pricing.charge(self.price, prompt_tokens, completion_tokens)
        return Completion(
            text=answer.text,
            output=output,
            model=answer.model,
            usage=Usage(
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                cost_usd=cost.usd,
                cost_source=cost.source,
                cost_unknown=cost.unknown,
            ),
            finish_reason=answer.finish_reason,
        )

    # --- prompt inspection --------------------------------------------------------------------

    async def inspect_prompt(
        self, messages: tuple[Message, ...], output_schema: dict[str, Any] | None = None
    ) -> PromptInspection:
        """How the server receives `messages` sent with `output_schema` (as `complete` sends
        them), and what it would count if their system text were lost."""
        cfg = self._config
        sent = self._wire_messages(messages, output_schema)
        bare = None
        if any(m.role == "system" for m in messages):
            bare = self._wire_messages(
                tuple(m for m in messages if m.role != "system"), output_schema
            )
        if cfg.chat_format is None:
            return prompt_inspection.inspect_hosted(
                _litellm.load(), cfg.model, sent, cfg.context_window, bare=bare
            )
        window = cfg.context_window
        if window is None:
            window = prompt_inspection.context_window(_litellm.load(), cfg.model, None)
        inspection = await prompt_inspection.inspect_llama(
            cfg.chat_format, sent, self._tokenize, self._detokenize, window, bare=bare
        )
        if fold_system(cfg.chat_format, messages) is messages:
            return inspection
        # The system text travels folded into the first user turn: check that it is there.
        present = all(
            m.content in (inspection.rendered or "") for m in messages if m.role == "system"
        )
        return inspection.model_copy(
            update={
                "accepted_roles": prompt_inspection.ALL_ROLES,
                "system_rendered": present,
                "notes": (
                    *inspection.notes,
                    "the adapter folds the system text into the first "
                    "user turn, as Gemma's own chat template does",
                ),
            }
        )

    async def _tokenize(self, text: str) -> list[int]:
        """Token ids from the llama.cpp server's own tokenizer (BOS added, specials parsed)."""
        answer = await self._extras(prompt_inspection.TOKENIZE_PATH, {"input": text})
        tokens = answer.get("tokens")
        if not isinstance(tokens, list):
            raise Rejected(
                f"{prompt_inspection.TOKENIZE_PATH} answered without a token list",
                provider=self._name,
            )
        return [int(t) for t in tokens]

    async def _detokenize(self, tokens: list[int]) -> str:
        """The server's text for `tokens` (control tokens come back empty)."""
        answer = await self._extras(prompt_inspection.DETOKENIZE_PATH, {"tokens": tokens})
        text = answer.get("text")
        if not isinstance(text, str):
            raise Rejected(
                f"{prompt_inspection.DETOKENIZE_PATH} answered without a text", provider=self._name
            )
        return text

    async def _extras(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self._config.api_base is None:
            raise ValueError(f"provider {self._name!r}: chat_format needs api_base")
        url = prompt_inspection.server_root(self._config.api_base) + path
        body = {**body, "model": self._config.model.split("/", 1)[-1]}
        headers = {
            "Authorization": f"Bearer {self._api_key()}",
            "Content-Type": "application/json",
        }
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        try:
            _, content = await self._wire.post(url, data, headers, limit=EXTRAS_ANSWER_LIMIT)
        except Exception as exc:
            raise classify(exc, self._name) from exc
        try:
            answer = json.loads(content)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
            raise Rejected(
                f"{path} answered no JSON ({type(exc).__name__}): {content[:120]!r}",
                provider=self._name,
            ) from exc
        if not isinstance(answer, dict):
            raise Rejected(
                f"{path} answered {type(answer).__name__}, not an object", provider=self._name
            )
        return answer

    async def warm_up(self) -> None:
        """Resolve the price now (litellm's cost map is a 3.5 MB JSON parse when the config
        gives none), on a thread: the loop goes on answering meanwhile."""
        if self._price is None:
            loop = asyncio.get_running_loop()
            self._price = await loop.run_in_executor(
                None, pricing.resolve_price, self._name, self._config
            )

    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _close_http(self) -> None:
        await self._wire.close()


def reported_usage(prompt: Any, completion: Any) -> tuple[int | None, int | None]:
    """(prompt, completion) tokens as the provider reported them; None where it reported none.

    litellm fills a `usage` the server left out with zeros, and no non-empty prompt counts 0 tokens:
    a 0 prompt count is "not reported", never a count (certification compares it with its own, see
    `jobrouter.contracts.rendering`). A value that is not an integer is not a report either.
    """
    prompt = prompt if isinstance(prompt, int) and not isinstance(prompt, bool) else None
    completion = (
        completion if isinstance(completion, int) and not isinstance(completion, bool) else None
    )
    if not prompt:
        return None, completion or None
    return prompt, completion


def _estimate_tokens(request: CompletionRequest) -> int:
    """Cheap upper-ish estimate for the tokens-per-minute bucket (4 chars a token + answer)."""
    chars = sum(len(m.content) for m in request.messages)
    return chars // 4 + 1 + (request.max_tokens or 0)
