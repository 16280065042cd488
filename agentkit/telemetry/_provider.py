"""``gen_ai.provider.name`` for a model spec: the backend kind, in the conventions' words.

No standard value fits agentkit's backends but ``openai``, so the others are custom values
(``llama_cpp``, ``acp``, ``claude_cli``, ``scripted``, ``function``, ``replay``…).
"""

from __future__ import annotations

__all__ = ["provider_name"]

_CUSTOM = {"llama": "llama_cpp", "claude-cli": "claude_cli", "record": "recorded"}


def provider_name(spec: str) -> str:
    """The provider of a model spec (``llama`` → ``llama_cpp``, ``openai:gpt-4o`` → ``openai``)."""
    kind = spec.partition(":")[0].strip()
    return _CUSTOM.get(kind, kind.replace("-", "_") or "unknown")
