"""Switchover's engine: a fallback chain in front of LLM providers.

The public surface is `__all__`; everything else is internal and may change.
"""

from engine.breaker import BreakerPolicy, BreakerStore, MemoryBreakerStore
from engine.chain import Chain, ChainEvent, Target
from engine.clock import Clock, SystemClock, VirtualClock
from engine.config import Config, load_config, parse_config
from engine.errors import (
    AccountFault,
    AllProvidersUnavailable,
    AmbiguousFault,
    AttemptError,
    ChainError,
    ConfigError,
    Decision,
    ProviderFault,
    RateLimited,
    RequestFailed,
    RequestFault,
    SwitchoverError,
)
from engine.policy import Policy
from engine.switchover import Switchover
from engine.types import (
    Attempt,
    Image,
    Message,
    MessageEnd,
    Request,
    Response,
    StreamError,
    StreamEvent,
    StreamStart,
    Text,
    TextDelta,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolChoice,
    ToolResult,
    Usage,
    UsageUpdate,
)

__all__ = [
    "AccountFault",
    "AllProvidersUnavailable",
    "AmbiguousFault",
    "Attempt",
    "AttemptError",
    "BreakerPolicy",
    "BreakerStore",
    "Chain",
    "ChainError",
    "ChainEvent",
    "Clock",
    "Config",
    "ConfigError",
    "Decision",
    "Image",
    "MemoryBreakerStore",
    "Message",
    "MessageEnd",
    "Policy",
    "ProviderFault",
    "RateLimited",
    "Request",
    "RequestFailed",
    "RequestFault",
    "Response",
    "StreamError",
    "StreamEvent",
    "StreamStart",
    "Switchover",
    "SwitchoverError",
    "SystemClock",
    "Target",
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
    "VirtualClock",
    "load_config",
    "parse_config",
]
