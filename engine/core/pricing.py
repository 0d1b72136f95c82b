"""What an attempt cost, in USD, from genai-prices' bundled data or an override from config.

Pure: no clock, no I/O, never the network. genai-prices can fetch newer prices (`UpdatePrices`)
and then swaps its process-wide snapshot for what it fetched; we never start that and never read
that snapshot (we keep our own of the bundled data), so a cost's source, "genai-prices <version>",
says exactly which numbers were used, whatever else runs in the process.

The one convention to get right: genai-prices' `input_tokens` is ALL input tokens, cache reads
and writes included (its Anthropic extractor adds the three; it bills what is left after the
cache tokens at the input price). Ours excludes them (engine/core/messages.py), so we add them back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import cache, lru_cache
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.core.attempt import Attempt

__all__ = ["GENAI_PRICES_SOURCE", "PriceOverride", "Pricer", "UnitPrices", "known_price_provider"]

GENAI_PRICES_SOURCE = f"genai-prices {version('genai-prices')}"
_MTOK = Decimal(1_000_000)
# genai-prices' price keys for the four token counts an Attempt carries, in Rates order.
_KEYS = ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok")
Rates = tuple[Any, ...]  # USD per million tokens, in _KEYS order: Decimal, or TieredPrices


@dataclass(frozen=True, slots=True, kw_only=True)
class PriceOverride:
    """A price from config, for a model genai-prices lacks or prices wrongly, in USD per million
    tokens. Cached tokens cost the input price unless given (a server without a cache discount)."""

    input_mtok: Decimal
    output_mtok: Decimal
    cache_read_mtok: Decimal | None = None
    cache_write_mtok: Decimal | None = None
    source: str  # where the number came from: a price page, a contract, "our GPU cost"

    def __post_init__(self) -> None:
        if not self.source.strip():
            raise ValueError("a PriceOverride needs a source: say where this price comes from")
        for key in _KEYS:
            value = getattr(self, key)
            if value is not None and not (
                isinstance(value, Decimal) and value.is_finite() and value >= 0
            ):
                raise ValueError(f"{key} must be a non-negative Decimal (got {value!r})")


@dataclass(frozen=True, slots=True)
class UnitPrices:
    """USD per token. Where a model has no cache prices, cache_read and cache_write equal
    `input`: such a provider bills cached tokens as ordinary input (genai-prices does the same)."""

    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write: Decimal
    source: str


class Pricer:
    """Prices attempts. `overrides` are keyed `provider/model` (the configured provider name) or
    by a bare model name for every provider; they win over genai-prices. `price_providers` maps a
    configured provider name to the genai-prices provider whose prices it charges (an
    OpenAI-compatible server selling Llama is "groq" or "together", not "openai"); by default a
    provider's kind ("anthropic", "openai") is its genai-prices provider."""

    def __init__(
        self,
        overrides: Mapping[str, PriceOverride] | None = None,
        *,
        price_providers: Mapping[str, str] | None = None,
    ) -> None:
        self._overrides = {
            key: (_rates(*(getattr(o, k) for k in _KEYS)), True, f"override: {o.source}")
            for key, o in (overrides or {}).items()
        }
        self._price_providers = dict(price_providers or {})

    def warm(self) -> None:
        """Load genai-prices' data now (~0.3 s, pydantic), at a process's start: else the
        first attempt priced pays for it, inside its request's time budget."""
        _snapshot()

    def price(self, attempt: Attempt) -> tuple[Decimal | None, str | None]:
        """The attempt's cost and its source; (None, None) when the model has no known price."""
        a = attempt
        found = self._find(a.provider, a.provider_kind, a.model, a.started_at)
        if found is None:
            return None, None
        rates, exact, source = found
        counts = (a.input_tokens, a.output_tokens, a.cache_read_tokens, a.cache_write_tokens)
        if not any(counts):
            return Decimal(0), source  # nothing used, nothing billed (not even a per-request fee)
        if not exact:
            return _genai_prices_cost(self._provider_id(a.provider, a.provider_kind), a), source
        total_input = a.input_tokens + a.cache_read_tokens + a.cache_write_tokens
        cost = sum(
            (_tier(r, total_input) * n for r, n in zip(rates, counts, strict=True) if n), Decimal(0)
        )
        return cost / _MTOK, source

    def price_columns(
        self, provider: str, provider_kind: str, model: str, at: datetime, counts: Any
    ) -> tuple[Any, str | None] | None:
        """`price` for many attempts of one target at once (the simulator's fast-forward):
        `counts`, four integer numpy arrays in Attempt order (input, output, cache read, cache
        write). Returns (costs in nano-dollars, rounded half-even as the recorder stores
        them; source), (None, None) when the model has no known price, or None when only
        `price` can say (a per-request fee, a price not a whole number of nano-dollars per
        million tokens): the same rates and tiers, the same rounding."""
        import numpy as np

        found = self._find(provider, provider_kind, model, at)
        if found is None:
            return None, None
        rates, exact, source = found
        if not exact:
            return None
        total_input = counts[0] + counts[2] + counts[3]
        # Σ rate × n with rates in nano-dollars per million tokens: exact in int64 up to
        # ~100 M tokens an attempt at $75 per million.
        scaled = np.zeros(len(total_input), dtype=np.int64)
        try:
            for rate, n in zip(rates, counts, strict=True):
                scaled += _per_row(rate, total_input, np) * n
        except _Inexact:
            return None
        nano, rest = np.divmod(scaled, 1_000_000)  # per million tokens → per token
        half = rest * 2
        nano += (half > 1_000_000) | ((half == 1_000_000) & (nano % 2 == 1))
        nano[(counts[0] + counts[1] + counts[2] + counts[3]) == 0] = 0
        return nano, source

    def rates_at(self, provider: str | None, provider_kind: str, model: str, at: datetime) -> Any:
        """What prices an attempt at `at`, to compare: attempts at instants with equal rates
        cost the same for the same tokens (the simulator prices a week by its price periods,
        not minute by minute)."""
        return self._find(provider, provider_kind, model, at)

    def unit_prices(
        self,
        provider_kind: str,
        model: str,
        at: datetime,
        *,
        provider: str | None = None,
        total_input_tokens: int = 0,
    ) -> UnitPrices | None:
        """Per-token prices valid at `at`. For a model with long-context tiers, the tier that a
        prompt of `total_input_tokens` falls in (the base tier by default). `provider`, the
        configured name, brings in its `provider/model` override and its price provider."""
        found = self._find(provider, provider_kind, model, at)
        if found is None:
            return None
        rates, _, source = found
        return UnitPrices(*(_tier(r, total_input_tokens) / _MTOK for r in rates), source=source)

    def _provider_id(self, provider: str | None, provider_kind: str) -> str:
        return self._price_providers.get(provider or "", provider_kind)

    def _find(
        self, provider: str | None, provider_kind: str, model: str, at: datetime
    ) -> tuple[Rates, bool, str] | None:
        """(rates, exact, source); `exact` when the rates are all genai-prices would charge."""
        found = self._overrides.get(f"{provider}/{model}") if provider else None
        found = found or self._overrides.get(model)
        if found is not None:
            return found
        pair = _model(self._provider_id(provider, provider_kind), model)
        if pair is None:
            return None
        # get_prices picks the price valid at `at` (price changes, off-peak hours): ~0.1 µs.
        return *_rates_of(pair[1].get_prices(at)), GENAI_PRICES_SOURCE


def known_price_provider(provider_id: str) -> bool:
    """Whether the bundled genai-prices data has this provider (for config validation)."""
    try:
        _snapshot().find_provider(None, provider_id, None)
    except LookupError:
        return False
    return True


def _rates(input_: Any, output: Any, read: Any, write: Any) -> Rates:
    # No input or output price: no charge (genai-prices' rule; a free moderation model, say).
    # No cache price: cached tokens are billed as input.
    input_ = Decimal(0) if input_ is None else input_
    output = Decimal(0) if output is None else output
    return (input_, output, input_ if read is None else read, input_ if write is None else write)


def _tier(price: Any, total_input_tokens: int) -> Decimal:
    """genai-prices' tier rule: the last tier whose start the whole prompt exceeds prices every
    token of the request (a cliff, not a marginal rate)."""
    if isinstance(price, Decimal):
        return price
    for tier in reversed(price.tiers):
        if total_input_tokens > tier.start:
            return tier.price
    return price.base


def _per_row(price: Any, total_input: Any, np: Any) -> Any:
    """`_tier` for every row: the rate in 1e-9 USD per million tokens, as integers."""

    def nano(value: Decimal) -> int:
        scaled = value * 1_000_000_000
        if scaled != scaled.to_integral_value():
            raise _Inexact
        return int(scaled)

    if isinstance(price, Decimal):
        return np.int64(nano(price))
    rate = np.full(len(total_input), nano(price.base), dtype=np.int64)
    for tier in price.tiers:  # ascending starts: a later tier overrides an earlier one
        rate[total_input > tier.start] = nano(tier.price)
    return rate


class _Inexact(Exception):
    """A rate that is not a whole number of nano-dollars per million tokens."""


# --- genai-prices, imported on first use: it costs ~0.1 s (pydantic), most processes never price


@cache
def _snapshot() -> Any:
    from genai_prices.data import providers
    from genai_prices.data_snapshot import DataSnapshot

    return DataSnapshot(providers=providers, from_auto_update=False)


@lru_cache(maxsize=4096)
def _model(provider_id: str, model: str) -> tuple[Any, Any] | None:
    """genai-prices' (provider, model), or None. The matching is genai-prices' own: case-
    insensitive, dated names (`claude-sonnet-4-5-20250929`, `gpt-4o-2024-08-06`) included."""
    try:
        return _snapshot().find_provider_model(model, None, provider_id, None)
    except LookupError:
        return None


# A ModelPrice is unhashable and lives as long as the bundled data: key by id, keep a reference.
_RATES: dict[int, tuple[Any, Rates, bool]] = {}


def _rates_of(model_price: Any) -> tuple[Rates, bool]:
    """The four per-MTok prices, and whether they are all genai-prices would charge for our
    usage; when not (a per-request fee), `_genai_prices_cost` does the sum at ~90 µs a call."""
    hit = _RATES.get(id(model_price))
    if hit is None:
        from genai_prices.units import _get_registry

        registry = _get_registry()
        ours = [registry.unit_for_price_key(k).dimensions.items() for k in _KEYS]
        exact = True
        for key, value in vars(model_price).items():
            if value is None or key in _KEYS:
                continue
            try:
                dims = registry.unit_for_price_key(key).dimensions
            except KeyError:
                continue  # genai-prices skips a key it has no unit for, and so do we
            # Requests count once per call, and a unit enclosing one of ours would count our
            # tokens; any other unit (audio, 1-hour cache writes, web searches) counts zero.
            if dims.get("family") == "requests" or any(dims.items() <= o for o in ours):
                exact = False
        rates = _rates(*(getattr(model_price, k) for k in _KEYS))
        hit = _RATES[id(model_price)] = (model_price, rates, exact)
    return hit[1], hit[2]


def _genai_prices_cost(provider_id: str, a: Attempt) -> Decimal:
    from genai_prices import Usage

    provider, info = _snapshot().find_provider_model(a.model, None, provider_id, None)
    usage = Usage(
        input_tokens=a.input_tokens + a.cache_read_tokens + a.cache_write_tokens,
        output_tokens=a.output_tokens,
        cache_read_tokens=a.cache_read_tokens,
        cache_write_tokens=a.cache_write_tokens,
    )
    return info.calc_price(usage, provider, genai_request_timestamp=a.started_at).total_price
