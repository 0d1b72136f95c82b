"""Switchover's engine: a fallback chain in front of LLM providers.

The public surface is `__all__`; everything else is internal and may change.

Each public name is loaded from its module on first use (PEP 562), so that importing one part
of the engine loads only what that part needs: `engine.fallback.chain` or `engine.core.money`
never load the store (DuckDB, PyArrow), Redis or aiohttp because `engine` is their package.
"""

# Where each public name lives.
_HOMES = {
    "engine.behaviours.pii": ("PiiPolicy",),
    "engine.config": ("Config", "load_config", "parse_config"),
    "engine.core.attempt": ("Attempt",),
    "engine.core.clock": ("Clock", "SystemClock", "VirtualClock"),
    "engine.core.errors": (
        "AccountFault",
        "AllProvidersUnavailable",
        "AmbiguousFault",
        "AttemptError",
        "ChainError",
        "ConfigError",
        "Decision",
        "ProviderFault",
        "QualityFault",
        "RateLimited",
        "RequestFailed",
        "RequestFault",
        "SwitchoverError",
    ),
    "engine.core.messages": (
        "Image",
        "Message",
        "MessageEnd",
        "Request",
        "Response",
        "StreamError",
        "StreamEvent",
        "StreamStart",
        "Text",
        "TextDelta",
        "Tool",
        "ToolCall",
        "ToolCallDelta",
        "ToolCallStart",
        "ToolChoice",
        "ToolResult",
        "Usage",
        "UsageUpdate",
    ),
    "engine.fallback.chain": ("Chain", "ChainEvent"),
    "engine.fallback.policy": ("Policy",),
    "engine.fallback.target": ("Target",),
    "engine.runtime.jobs": ("Done", "Failed", "JobPolicy", "RetryLater", "run_job", "run_job_sync"),
    "engine.runtime.switchover": ("Switchover",),
    "engine.state.breaker": ("BreakerPolicy", "BreakerStore", "MemoryBreakerStore"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = sorted(_HOME_OF)


def __getattr__(name: str) -> object:
    import importlib

    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
