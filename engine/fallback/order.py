"""Which order a route tries its targets in: operator switches, health scores, own keys first.

    Arranger                                 what the chain calls, per request
    TargetOrder.arrange(route, targets)      the route's arranger
      ├── switches.disabled(route)           targets an operator turned off (one stat, or a
      │                                      Redis read cached ~1 s)
      ├── scores.scores(names)               recent success rates (engine.state.health_scores);
      │                                      only on adaptive routes
      └── order_targets(...)                 pure: filter, sort, break ties with the rng

Switches (targets an operator turned off, drills) are kept by `engine.state.switches`.

Ordering is an optimisation: nothing here may fail a request. A missing or unreadable switch
file or an unreachable Redis means "nothing disabled" (or the last switches known), and a
route whose every target is disabled tries them all rather than none.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, TypeVar

from engine.state.health_scores import NO_DATA, HealthScores
from engine.state.switches import Switches

if TYPE_CHECKING:
    from engine.fallback.target import Target

log = logging.getLogger("switchover.ordering")

T = TypeVar("T")
_FORMAT = 1


class Arranger(Protocol):
    """The order a chain tries its targets in for one request; None on a chain keeps them as
    configured."""

    async def arrange(self, route: str, targets: Sequence[Target]) -> Sequence[Target]:
        """The targets in the order this request should try them (a subset when the operator
        disabled some, never empty)."""
        ...

    async def drills(self, route: str) -> Mapping[str, datetime]:
        """Targets under a fault drill on `route`, with the drill's end (wall clock)."""
        ...


# --- the order (pure) --------------------------------------------------------------------------


def order_targets(
    targets: Sequence[T],
    *,
    name: Callable[[T], str],
    own_key: Callable[[T], bool],
    scores: Mapping[str, float] | None,
    disabled: frozenset[str],
    own_keys_first: bool,
    rng: random.Random,
) -> list[T]:
    """`targets` without the disabled ones (all of them when every one is disabled: a disabled
    target may still answer, no target certainly will not), in configured order, or by score
    (highest first, ties in random order) when `scores` is given; own-key targets first when
    `own_keys_first`, each group keeping its order. A target missing from `scores` scores 1.0."""
    kept = [t for t in targets if name(t) not in disabled] or list(targets)
    if scores is not None:
        # Shuffled, then stably sorted: equal scores end up in random order. Ties are the
        # normal case (every healthy target scores 1.0), so an adaptive route spreads its
        # traffic over its healthy targets, which keeps every target's score fresh.
        rng.shuffle(kept)
        kept.sort(key=lambda t: -scores.get(name(t), NO_DATA))
    if own_keys_first:
        kept.sort(key=lambda t: not own_key(t))  # stable: the order above holds in each group
    return kept


class TargetOrder:
    """One route's ordering policy. `scores=None`: the route is not adaptive (configured
    order); `switches=None`: no operator switches."""

    def __init__(
        self,
        *,
        scores: HealthScores | None,
        switches: Switches | None,
        own_keys_first: bool,
        rng: random.Random | None = None,
    ) -> None:
        self.scores = scores
        self.switches = switches
        self.own_keys_first = own_keys_first
        self.rng = rng or random.Random()
        self._all_disabled: set[str] = set()  # routes warned about, until they recover

    async def arrange(self, route: str, targets: Sequence[Target]) -> list[Target]:
        """The targets to try for one request on `route`, in order; never raises."""
        try:
            disabled = await self.switches.disabled(route) if self.switches else frozenset()
            names = [t.name for t in targets]
            scores = await self.scores.scores(names) if self.scores is not None else None
            self._warn_if_all_disabled(route, names, disabled)
            return order_targets(
                targets,
                name=lambda t: t.name,
                own_key=lambda t: t.key_kind == "own",
                scores=scores,
                disabled=disabled,
                own_keys_first=self.own_keys_first,
                rng=self.rng,
            )
        except Exception:
            log.exception("ordering route %s failed; its configured order is used", route)
            return list(targets)

    async def drills(self, route: str) -> dict[str, datetime]:
        """Targets of `route` under a fault drill now, with its end (wall clock); never raises."""
        if self.switches is None:
            return {}
        try:
            return await self.switches.drilled(route)
        except Exception:
            log.exception("reading the drills of route %s failed; none applies", route)
            return {}

    def _warn_if_all_disabled(self, route: str, names: list[str], disabled: frozenset[str]) -> None:
        if not disabled.issuperset(names):
            self._all_disabled.discard(route)
        elif route not in self._all_disabled:
            self._all_disabled.add(route)
            log.warning("every target of route %s is disabled; all are tried regardless", route)
