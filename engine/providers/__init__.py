"""Provider adapters: one module per dialect, each translating neutral types to and from its
wire format. Nothing outside this package sees provider JSON."""

from engine.providers.anthropic import AnthropicProvider
from engine.providers.base import Provider
from engine.providers.http import HttpProvider
from engine.providers.openai import OpenAIProvider

__all__ = ["AnthropicProvider", "HttpProvider", "OpenAIProvider", "Provider"]
