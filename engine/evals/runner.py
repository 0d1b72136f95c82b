"""Run a case set through every target of a route, each target in isolation, and keep the score.

In isolation: each case goes to one target through a one-target chain, so nothing falls back
and a retry (the route's `primary_retries`) only ever repeats the same target. What will run on
incident day still applies: the route's policy (budget, timeouts), its PII masking and the
target's own prompt; the route's output contract does not (the case's checks judge instead).

Eval traffic must never move production numbers: attempts go to this module's hook only, never
to the recorder or telemetry, and every case gets a fresh in-memory breaker, so an eval neither
opens a production breaker nor skips a case because earlier cases failed. Results go to the
scheduler as a JSON file under `data/control/evals/` (`write_run`); this module never opens
the database.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from engine.config import Config, RouteConfig, TargetConfig
from engine.core.attempt import Attempt
from engine.core.clock import Clock, SystemClock
from engine.core.errors import AllProvidersUnavailable, ChainError, ConfigError, RequestFailed
from engine.core.paths import DataPaths
from engine.core.pricing import Pricer
from engine.evals.cases import Case, CaseSet
from engine.fallback.chain import Chain
from engine.providers.base import Provider
from engine.runtime.build import ChainParts, build_chain, build_pricer, build_providers
from engine.state import control
from engine.state.breaker import MemoryBreakerStore

__all__ = ["EvalResult", "EvalRun", "TargetSummary", "run_eval", "write_run"]

Progress = Callable[[int, int], None]  # (calls done, calls in all)


@dataclass(frozen=True, slots=True)
class EvalResult:
    """One case on one target. `reason`: the first failed check, or `error: <class> <message>`
    when the call failed (then `error` is the error class)."""

    target: str
    case_name: str
    passed: bool
    reason: str | None
    latency_ms: float | None  # of the attempt that answered; None when none did
    cost_usd: Decimal | None  # every attempt of the case; None when the model has no price
    input_tokens: int
    output_tokens: int
    error: str | None = None


@dataclass(frozen=True, slots=True)
class TargetSummary:
    target: str
    cases: int
    passed: int
    pass_rate: float
    p50_ms: float | None
    p95_ms: float | None
    cost_usd: Decimal | None
    meets_minimum: bool


@dataclass
class EvalRun:
    run_id: str
    route: str
    cases_file: str
    started_at: datetime
    finished_at: datetime
    cases: int  # per target
    min_pass_rate: float
    results: list[EvalResult] = field(default_factory=list)

    def summaries(self) -> list[TargetSummary]:
        """One per target, in the route's order."""
        by_target: dict[str, list[EvalResult]] = {}
        for result in self.results:
            by_target.setdefault(result.target, []).append(result)
        return [_summary(t, rs, self.min_pass_rate) for t, rs in by_target.items()]

    @property
    def all_meet_minimum(self) -> bool:
        return all(s.meets_minimum for s in self.summaries())

    def to_dict(self) -> dict[str, Any]:
        """The JSON the scheduler takes in (the tables in engine/store/eval_drill_tables.py)."""
        return {
            "run_id": self.run_id,
            "route": self.route,
            "cases_file": self.cases_file,
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat(),
            "cases": self.cases,
            "min_pass_rate": self.min_pass_rate,
            "results": [
                {
                    "target": r.target,
                    "case_name": r.case_name,
                    "passed": r.passed,
                    "reason": r.reason,
                    "latency_ms": r.latency_ms,
                    "cost_usd": None if r.cost_usd is None else f"{r.cost_usd:.9f}",
                    "input_tokens": r.input_tokens,
                    "output_tokens": r.output_tokens,
                    "error": r.error,
                }
                for r in self.results
            ],
        }


async def run_eval(
    config: Config,
    route: str,
    cases: CaseSet,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    environ: Mapping[str, str] | None = None,
    clock: Clock | None = None,
    concurrency: int = 4,
    progress: Progress | None = None,
) -> EvalRun:
    """Every case of `cases` on every target of `route`, at most `concurrency` calls at once.
    ConfigError for an unknown route or a provider whose key is not in the environment."""
    if route not in config.routes:
        known = ", ".join(sorted(config.routes)) or "none configured"
        raise ConfigError(f"unknown route {route!r} (routes: {known})")
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    clock = clock or SystemClock()
    route_config = config.routes[route]
    names = dict.fromkeys(t.provider for t in route_config.targets)
    providers = build_providers(config, names, clock=clock, transport=transport, environ=environ)
    pairs = [(target, case) for target in route_config.targets for case in cases.cases]
    evaluator = _Evaluator(
        config, route_config, providers, clock, build_pricer(config), len(pairs), progress
    )
    started = clock.wall()
    gate = asyncio.Semaphore(concurrency)

    async def limited(target: TargetConfig, case: Case) -> EvalResult:
        async with gate:
            return await evaluator.evaluate(target, case)

    try:
        if progress is not None:
            progress(0, len(pairs))
        results = await asyncio.gather(*(limited(t, c) for t, c in pairs))
    finally:
        await _close(providers)
    return EvalRun(
        run_id=uuid.uuid4().hex[:12],
        route=route,
        cases_file=cases.source,
        started_at=started,
        finished_at=clock.wall(),
        cases=len(cases.cases),
        min_pass_rate=cases.min_pass_rate,
        results=list(results),
    )


def write_run(paths: DataPaths, run: EvalRun) -> Path:
    """Hand `run` to the scheduler, as a control-plane request (engine.state.control)."""
    return control.submit(paths.evals_inbox, run.run_id, run.to_dict())


class _Evaluator:
    """Runs one case on one target and turns what happened into an EvalResult."""

    def __init__(
        self,
        config: Config,
        route: RouteConfig,
        providers: Mapping[str, Provider],
        clock: Clock,
        pricer: Pricer,
        total: int,
        progress: Progress | None,
    ) -> None:
        self.config, self.route, self.providers = config, route, providers
        self.clock, self.pricer = clock, pricer
        self.total, self.done, self.progress = total, 0, progress
        self._attempts: dict[str, list[Attempt]] = {}

    def _chain(self, target: TargetConfig) -> Chain:
        """The route's chain (every option it sets) over this one target, with a breaker of
        its own and this evaluator's hook only: no fallback, no production breaker touched, no
        attempt recorded to telemetry."""
        policy = self.route.policy
        parts = ChainParts(
            self.config,
            self.providers,
            MemoryBreakerStore(policy.breaker_policy()),
            self.clock,
            hooks=[self._keep],
        )
        # The case's checks judge the answer, not the route's output contract.
        return build_chain(
            parts,
            self.route,
            targets=[target],
            order=None,
            contract=None,
            fall_back_on_quality=False,
        )

    def _keep(self, attempt: Attempt) -> None:
        self._attempts.setdefault(attempt.request_id, []).append(attempt)

    async def evaluate(self, target: TargetConfig, case: Case) -> EvalResult:
        request_id = uuid.uuid4().hex
        reason, error, text = None, None, None
        try:
            response = await self._chain(target).complete(case.request(), request_id=request_id)
            text = response.text
        except ChainError as exc:
            error, message = _error_of(exc)
            reason = f"error: {error} {message}"[:300]
        attempts = self._attempts.pop(request_id, [])
        if text is not None:
            reason = case.check(text)
        served = [a.latency_ms for a in attempts if a.served]
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, self.total)
        return EvalResult(
            target=target.name,
            case_name=case.name,
            passed=text is not None and reason is None,
            reason=reason,
            latency_ms=served[-1] if served else None,
            cost_usd=self._cost(attempts),
            input_tokens=sum(a.input_tokens for a in attempts),
            output_tokens=sum(a.output_tokens for a in attempts),
            error=error,
        )

    def _cost(self, attempts: list[Attempt]) -> Decimal | None:
        costs = [self.pricer.price(a)[0] for a in attempts]
        return _total(costs)


async def _close(providers: Mapping[str, Provider]) -> None:
    await asyncio.gather(*(p.aclose() for p in providers.values()))


def _error_of(exc: ChainError) -> tuple[str, str]:
    """(error class, message) of a failed call: the provider's error, as classified."""
    if isinstance(exc, RequestFailed):
        return exc.error.error_class, exc.error.message
    if isinstance(exc, AllProvidersUnavailable) and exc.errors:
        last = exc.errors[-1]
        return last.error_class, last.message
    return "all_providers_unavailable", str(exc)


def _summary(target: str, results: list[EvalResult], min_pass_rate: float) -> TargetSummary:
    passed = sum(r.passed for r in results)
    rate = passed / len(results) if results else 0.0
    latencies = sorted(r.latency_ms for r in results if r.latency_ms is not None)
    total = _total([r.cost_usd for r in results])
    return TargetSummary(
        target=target,
        cases=len(results),
        passed=passed,
        pass_rate=rate,
        p50_ms=_quantile(latencies, 0.5),
        p95_ms=_quantile(latencies, 0.95),
        cost_usd=total,
        meets_minimum=rate >= min_pass_rate,
    )


def _total(costs: list[Decimal | None]) -> Decimal | None:
    """The sum of `costs`; None when one is unknown (a model without a price)."""
    known = [c for c in costs if c is not None]
    return sum(known, Decimal(0)) if len(known) == len(costs) else None


def _quantile(ordered: list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks, as DuckDB's quantile_cont (the dashboard's)."""
    if not ordered:
        return None
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
