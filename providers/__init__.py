"""Providers: the `Provider` seam, its error taxonomy, and (lazily) the litellm adapter."""

from providers.base import (
    Completion,
    CompletionRequest,
    InspectableProvider,
    Message,
    PromptInspection,
    Provider,
    Usage,
)
from providers.errors import ErrorKind, NotSent, OutcomeUnknown, ProviderError, Rejected

__all__ = [
    "Completion",
    "CompletionRequest",
    "ErrorKind",
    "InspectableProvider",
    "Message",
    "NotSent",
    "OutcomeUnknown",
    "PromptInspection",
    "Provider",
    "ProviderError",
    "Rejected",
    "Usage",
]
