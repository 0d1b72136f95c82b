"""A prompt per target: the same intent, worded for each model.

A route's targets may each carry a prompt from `[prompts.NAME]` in switchover.toml: a `system`
prompt that replaces the caller's, or a `template` that wraps it (`{system}` stands for the
caller's system prompt). The prompt's `version` is recorded on every attempt that sent it, so
a change of wording can be told apart in telemetry from a change of provider. Applied per
attempt, after PII masking: the masked request is what every target's prompt wraps.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.messages import Request

SYSTEM_SLOT = "{system}"


@dataclass(frozen=True, slots=True)
class TargetPrompt:
    name: str
    version: str
    system: str | None = None  # replaces the caller's system prompt
    template: str | None = None  # wraps it: SYSTEM_SLOT is replaced by the caller's

    def __post_init__(self) -> None:
        if (self.system is None) == (self.template is None):
            raise ValueError("a prompt needs exactly one of system or template")

    @property
    def label(self) -> str:
        """What the attempt records: `name@version`."""
        return f"{self.name}@{self.version}"

    def apply(self, request: Request) -> Request:
        if self.system is not None:
            return request.replace(system=self.system)
        assert self.template is not None
        # str.replace, not str.format: a template may hold JSON braces of its own.
        wrapped = self.template.replace(SYSTEM_SLOT, request.system or "").strip()
        return request.replace(system=wrapped or None)
