"""The provider a `ProviderConfig` asks for: its `transport` picks the class.

    transport = "litellm"   `LiteLLMProvider` (the default; any model litellm reaches)
    transport = "openai"    `OpenAIHttpProvider` (aiohttp straight to an OpenAI-compatible
                            `api_base`; `ProviderConfig` allows it only for ``openai/...``)

Both are imported lazily: neither is needed until a provider is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobrouter.providers.config import ProviderConfig

if TYPE_CHECKING:
    from jobrouter.providers.litellm_provider import LiteLLMProvider
    from jobrouter.providers.openai_http import OpenAIHttpProvider


def build_provider(name: str, config: ProviderConfig) -> LiteLLMProvider | OpenAIHttpProvider:
    """The configured provider `name`, reached through its configured transport."""
    if config.transport == "openai":
        from jobrouter.providers.openai_http import OpenAIHttpProvider

        return OpenAIHttpProvider(name, config)
    from jobrouter.providers.litellm_provider import LiteLLMProvider

    return LiteLLMProvider(name, config)
