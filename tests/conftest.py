"""Fixtures shared by every test folder. Keep this file minimal: folder fixtures live beside
their tests (e.g. tests/providers/conftest.py)."""

from __future__ import annotations

import os

import pytest

# Keys of hosted providers that litellm or an SDK would pick up from the environment by itself.
_PROVIDER_KEY_VARS = (
    "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "AZURE_API_KEY",
    "AZURE_OPENAI_API_KEY", "MISTRAL_API_KEY", "COHERE_API_KEY", "GROQ_API_KEY",
    "TOGETHERAI_API_KEY", "DEEPSEEK_API_KEY", "XAI_API_KEY", "OPENROUTER_API_KEY",
    "HUGGINGFACE_API_KEY", "HF_TOKEN", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN", "VERTEXAI_CREDENTIALS", "GOOGLE_APPLICATION_CREDENTIALS",
)


@pytest.fixture(autouse=True)
def _no_live_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test can reach a live provider by accident: provider keys out, litellm offline."""
    for name in {*_PROVIDER_KEY_VARS, *(n for n in os.environ if n.endswith("_API_KEY"))}:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("LITELLM_OFFLINE_MODE", "true")
