"""What a shared breaker store (engine.state.breaker_sqlite, engine.state.breaker_redis) does while
its
backend cannot be used: this process's own `MemoryBreakerStore` answers, `fallbacks` counts the
calls so answered, and the backend is tried again `retry_s` later (in the caller's time). Once
it answers again, what this process learnt alone is dropped and the shared state is used."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping

from engine.state.breaker import BreakerPolicy, MemoryBreakerStore, OnChange


class MemoryFallback(ABC):
    """The part of a shared store that falls back to memory; the store says when its backend
    is down (`_backend_down`) and calls `_use_memory` before each use of it."""

    def __init__(
        self,
        policy: BreakerPolicy | None,
        policies_by_key: Mapping[str, BreakerPolicy] | None,
        on_change: OnChange | None,
        retry_s: float,
    ) -> None:
        self._policy = policy or BreakerPolicy()
        self._policies = dict(policies_by_key or {})
        self._on_change = on_change
        self._retry_s = retry_s
        self._memory = self._new_memory()
        self.fallbacks = 0  # calls answered from memory because the backend could not be used
        self._retry_at: float | None = None  # caller time; None: at the next admit or record

    def policy_for(self, key: str) -> BreakerPolicy:
        return self._policies.get(key, self._policy)

    @abstractmethod
    def _backend_down(self) -> bool:
        """Whether the shared backend (SQLite file, Redis) cannot be used now."""

    def _use_memory(self, now: float) -> bool:
        """Whether this call is answered from memory: the backend is down and not yet due for
        another try."""
        if not self._backend_down():
            return False
        if self._retry_at is None:
            self._retry_at = now + self._retry_s
        if now < self._retry_at:
            self.fallbacks += 1
            return True
        return False  # time to try the backend again

    def _new_memory(self) -> MemoryBreakerStore:
        return MemoryBreakerStore(self._policy, self._policies, self._on_change)
