"""Providers: the `Provider` seam, its error taxonomy, and (lazily) the two transports.

`LiteLLMProvider` and `OpenAIHttpProvider` are resolved on first attribute access (they pull in
jsonschema and tenacity; litellm itself is imported only when a call is made), so
`import jobrouter.providers` stays cheap.
"""

from typing import TYPE_CHECKING, Any

from jobrouter.providers.base import (
    Completion,
    CompletionRequest,
    InspectableProvider,
    MarkerTokens,
    Message,
    PromptInspection,
    Provider,
    Usage,
)
from jobrouter.providers.config import ProviderConfig, provider_fingerprint
from jobrouter.providers.errors import (
    CassetteMiss,
    ErrorKind,
    InvalidOutput,
    NotSent,
    OutcomeUnknown,
    ProviderError,
    Rejected,
)

if TYPE_CHECKING:
    from jobrouter.providers.litellm_provider import LiteLLMProvider
    from jobrouter.providers.openai_http import OpenAIHttpProvider

__all__ = [
    "CassetteMiss",
    "Completion",
    "CompletionRequest",
    "ErrorKind",
    "InspectableProvider",
    "InvalidOutput",
    "LiteLLMProvider",
    "MarkerTokens",
    "Message",
    "NotSent",
    "OpenAIHttpProvider",
    "OutcomeUnknown",
    "PromptInspection",
    "Provider",
    "ProviderConfig",
    "ProviderError",
    "Rejected",
    "Usage",
    "provider_fingerprint",
]


def __getattr__(name: str) -> Any:
    if name == "LiteLLMProvider":
        from jobrouter.providers.litellm_provider import LiteLLMProvider

        return LiteLLMProvider
    if name == "OpenAIHttpProvider":
        from jobrouter.providers.openai_http import OpenAIHttpProvider

        return OpenAIHttpProvider
    raise AttributeError(f"module 'jobrouter.providers' has no attribute {name!r}")
