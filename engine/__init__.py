"""Switchover's engine: a fallback chain in front of LLM providers.

The public surface is `__all__`; everything else is internal and may change.
"""

from engine.behaviours.pii import PiiPolicy
from engine.config import Config, load_config, parse_config
from engine.core.attempt import Attempt
from engine.core.clock import Clock, SystemClock, VirtualClock
from engine.core.errors import (
    AccountFault,
    AllProvidersUnavailable,
    AmbiguousFault,
    AttemptError,
    ChainError,
    ConfigError,
    Decision,
    ProviderFault,
    QualityFault,
    RateLimited,
    RequestFailed,
    RequestFault,
    SwitchoverError,
)
from engine.core.messages import (
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
from engine.fallback.chain import Chain, ChainEvent
from engine.fallback.policy import Policy
from engine.fallback.target import Target
from engine.runtime.jobs import Done, Failed, JobPolicy, RetryLater, run_job, run_job_sync
from engine.runtime.switchover import Switchover
from engine.state.breaker import BreakerPolicy, BreakerStore, MemoryBreakerStore

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
    "Done",
    "Failed",
    "Image",
    "JobPolicy",
    "MemoryBreakerStore",
    "Message",
    "MessageEnd",
    "PiiPolicy",
    "Policy",
    "ProviderFault",
    "QualityFault",
    "RateLimited",
    "Request",
    "RequestFailed",
    "RequestFault",
    "Response",
    "RetryLater",
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
    "run_job",
    "run_job_sync",
]
