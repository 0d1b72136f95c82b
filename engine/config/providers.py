"""[providers.NAME]: the servers a route's targets run on, each of one dialect (`kind`).

API keys are never read from the file: a provider names the environment variable that holds
its key (`api_key_env`), and the key is read only when the provider is built
(`ProviderConfig.api_key`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.config.checks import Fail, no_unknown, table_of, valid_name
from engine.core.errors import ConfigError
from engine.core.pricing import GENAI_PRICES_SOURCE, known_price_provider

PROVIDER_KINDS = ("anthropic", "openai")
DEFAULT_BASE_URLS = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com/v1",
}
_PROVIDER_KEYS = (
    "kind",
    "base_url",
    "api_key_env",
    "key_kind",
    "headers",
    "default_max_tokens",
    "connect_timeout_s",
    "price_provider",
    "supports_prefill",
)


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    name: str
    kind: str
    base_url: str
    api_key_env: str | None = None  # None: the server needs no key (a local vLLM, say)
    key_kind: str = "managed"  # "own" (BYOK) or "managed"; recorded on every attempt
    headers: Mapping[str, str] = field(default_factory=dict)
    # None: the adapter's own default (Anthropic requires a value; OpenAI servers need none).
    default_max_tokens: int | None = None
    connect_timeout_s: float = 5.0
    # The genai-prices provider whose prices this server charges, when not its kind's: an
    # OpenAI-compatible server may be "groq", "together", "deepseek", "openrouter"...
    price_provider: str | None = None
    # Whether the server continues a final assistant message (assistant prefill), which a
    # route's `on_stream_failure = "continue"` needs; None: by kind (anthropic yes, openai no).
    supports_prefill: bool | None = None

    def api_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The key from the environment; ConfigError when the named variable is unset."""
        if self.api_key_env is None:
            return None
        environ = os.environ if environ is None else environ
        key = environ.get(self.api_key_env, "")
        if not key:
            raise ConfigError(
                f"providers.{self.name}.api_key_env: environment variable "
                f"{self.api_key_env} is not set"
            )
        return key


def parse_providers(data: Any, fail: Fail) -> dict[str, ProviderConfig]:
    providers = {
        name: _provider(name, table, fail)
        for name, table in table_of(data, "providers", fail).items()
    }
    if not providers:
        raise fail("providers", "define at least one provider, e.g. [providers.claude]")
    return providers


def _provider(name: str, table: Any, fail: Fail) -> ProviderConfig:
    where = f"providers.{name}"
    if not valid_name(name):
        raise fail(where, "a provider name is letters, digits, '.', '_' and '-' (at most 64)")
    table = table_of(table, where, fail)
    if "api_key" in table:
        raise fail(f"{where}.api_key", "keys are never kept in the file; use api_key_env")
    no_unknown(table, _PROVIDER_KEYS, where, fail)
    kind = table.get("kind")
    if kind not in PROVIDER_KINDS:
        raise fail(f"{where}.kind", f"must be one of {', '.join(PROVIDER_KINDS)} (got {kind!r})")
    base_url = table.get("base_url", DEFAULT_BASE_URLS[kind])
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise fail(f"{where}.base_url", f"must be an http(s) URL (got {base_url!r})")
    api_key_env = table.get("api_key_env")
    if api_key_env is not None and (not isinstance(api_key_env, str) or not api_key_env):
        raise fail(f"{where}.api_key_env", "must name an environment variable")
    key_kind = table.get("key_kind", "managed")
    if key_kind not in ("own", "managed"):
        raise fail(f"{where}.key_kind", f"must be 'own' or 'managed' (got {key_kind!r})")
    headers = table.get("headers", {})
    if not isinstance(headers, Mapping) or not all(isinstance(v, str) for v in headers.values()):
        raise fail(f"{where}.headers", "must be a table of strings")
    max_tokens = table.get("default_max_tokens")
    if max_tokens is not None and (
        not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
    ):
        raise fail(f"{where}.default_max_tokens", "must be a positive integer")
    connect_timeout_s = table.get("connect_timeout_s", 5.0)
    if (
        not isinstance(connect_timeout_s, int | float)
        or isinstance(connect_timeout_s, bool)
        or not 0 < connect_timeout_s <= 600
    ):
        raise fail(f"{where}.connect_timeout_s", "must be a number of seconds in (0, 600]")
    price_provider = table.get("price_provider")
    if price_provider is not None and (
        not isinstance(price_provider, str) or not known_price_provider(price_provider)
    ):
        raise fail(
            f"{where}.price_provider",
            f"{GENAI_PRICES_SOURCE} has no provider {price_provider!r} "
            "(its ids are like groq, together, deepseek, openrouter)",
        )
    supports_prefill = table.get("supports_prefill")
    if supports_prefill is not None and not isinstance(supports_prefill, bool):
        raise fail(f"{where}.supports_prefill", f"must be true or false (got {supports_prefill!r})")
    return ProviderConfig(
        name,
        kind,
        base_url.rstrip("/"),
        api_key_env,
        key_kind,
        dict(headers),
        max_tokens,
        float(connect_timeout_s),
        price_provider,
        supports_prefill,
    )
