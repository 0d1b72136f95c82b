"""An [[slo]] objective as a value: a leaf that the alert rules (engine.config.alerting) carry and
engine.config.slo parses, so that neither imports the other's module to name it."""

from __future__ import annotations

from dataclasses import dataclass

MIN_REQUESTS = 20  # per window: below this a single failure would read as a huge burn rate


@dataclass(frozen=True, slots=True)
class Slo:
    name: str
    route: str
    target: float  # availability, as a share: 0.999
    min_requests: int = MIN_REQUESTS

    @property
    def budget(self) -> float:
        """The share of counted requests allowed to fail."""
        return 1.0 - self.target
