"""Providers: the `Provider` seam, its error taxonomy, and (lazily) the litellm adapter.

`LiteLLMProvider` is resolved on first attribute access (it pulls in jsonschema and tenacity;
litellm itself is imported only when a call is made), so `import providers` stays cheap.
"""

from typing import TYPE_CHECKING, Any

from providers.base import (
    Completion,
    CompletionRequest,
    InspectableProvider,
    MarkerTokens,
    Message,
    PromptInspection,
    Provider,
    Usage,
)
from providers.config import ProviderConfig, provider_fingerprint
from providers.errors import (
    CassetteMiss,
    ErrorKind,
    InvalidOutput,
    NotSent,
    OutcomeUnknown,
    ProviderError,
    Rejected,
)

if TYPE_CHECKING:
    from providers.litellm_provider import LiteLLMProvider

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
        from providers.litellm_provider import LiteLLMProvider

        return LiteLLMProvider
    raise AttributeError(f"module 'providers' has no attribute {name!r}")
