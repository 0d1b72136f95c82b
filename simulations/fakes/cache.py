"""The fake providers' prompt caches: which prompt prefixes each provider holds, and for how long.

A cache belongs to one provider, one model and one prefix, as the real ones do: two providers
of the same dialect (two base URLs) never share one, nor do two models of one provider. Time
is the fake's injected clock, so a history on a virtual clock expires its caches in virtual
time and the live demo in real time.

- Anthropic caches the prefix up to a `cache_control` breakpoint, when that prefix reaches the
  model's minimum (1,024 tokens; 4,096 for Haiku 4.5 and Opus 4.5/4.6; 2,048 for the Haiku 3
  models): cache-write tokens when cold, cache-read tokens for the longest prefix already
  written. A shorter marked prefix is billed as plain input, silently, as the real API does.
- OpenAI caches prompts of at least 1,024 tokens by itself, matching in 128-token steps; it
  reports reads only (its writes cost the input price).

A prefix lives five minutes (both providers' default) after it was last written or read: a
primary that served nothing through a longer outage writes its prompt again when it comes back
(the re-warm), and a backup that takes its traffic starts cold.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable

from simulations.fakes.model import CHARS_PER_TOKEN, PromptUsage, tokens

# The shortest prefix each Anthropic model caches, in tokens, by model id prefix (Anthropic's
# prompt-caching guide); every other model: ANTHROPIC_MIN_TOKENS.
ANTHROPIC_MIN_TOKENS = 1024
_ANTHROPIC_MINIMA = (
    ("claude-haiku-4-5", 4096),
    ("claude-opus-4-5", 4096),
    ("claude-opus-4-6", 4096),
    ("claude-3-5-haiku", 2048),
    ("claude-3-haiku", 2048),
)
OPENAI_MIN_TOKENS, OPENAI_STEP_TOKENS = 1024, 128


def anthropic_minimum(model: str) -> int:
    """The fewest tokens a marked prefix needs for `model` to cache it."""
    return next(
        (n for prefix, n in _ANTHROPIC_MINIMA if model.startswith(prefix)), ANTHROPIC_MIN_TOKENS
    )


class _Entries:
    """Cached prefix digests with the time each expires; a set's `in`, `add` and `update`."""

    def __init__(self, now: Callable[[], float] | None, ttl_s: float) -> None:
        self._now, self._ttl = now, ttl_s
        self._until: dict[bytes, float] = {}

    def __len__(self) -> int:
        return len(self._until)

    def __contains__(self, digest: bytes) -> bool:
        until = self._until.get(digest)
        if until is None:
            return False
        if self._now is not None and until <= self._now():
            del self._until[digest]
            return False
        self.add(digest)  # a read keeps the prefix warm
        return True

    def add(self, digest: bytes) -> None:
        self._until[digest] = math.inf if self._now is None else self._now() + self._ttl

    def update(self, digests: Iterable[bytes]) -> None:
        for digest in digests:
            self.add(digest)

    def drop_expired(self) -> None:
        if self._now is not None:
            now = self._now()
            self._until = {d: until for d, until in self._until.items() if until > now}


class PromptCache:
    """Every provider's cached prefixes, per (provider, dialect, model). `provider` is whatever
    names the provider a request reached (`FakeApp` uses its base URL's host and path).
    `hit_ratio` overrides the caches with a fixed share of every prompt, for simulations that
    want a given hit rate."""

    # Memory bound. Expired prefixes go first; only a cache still over it with live prefixes
    # alone is emptied, since forgetting warm prefixes makes cache writes no provider would.
    MAX_ENTRIES = 200_000
    TTL_S = 300.0

    def __init__(
        self, hit_ratio: float | None = None, now: Callable[[], float] | None = None
    ) -> None:
        self.hit_ratio = hit_ratio
        self._now = now
        self._seen: dict[tuple[str, str, str], _Entries] = {}

    def clear(self) -> None:
        self._seen.clear()

    def _entries(self) -> int:
        return sum(map(len, self._seen.values()))

    def _store(self, key: tuple[str, str, str]) -> _Entries:
        if self._entries() > self.MAX_ENTRIES:
            for entries in self._seen.values():
                entries.drop_expired()
            if self._entries() > self.MAX_ENTRIES:
                self._seen.clear()
        entries = self._seen.get(key)
        if entries is None:
            entries = self._seen[key] = _Entries(self._now, self.TTL_S)
        return entries

    def anthropic(self, provider: str, model: str, segments: list[tuple[str, bool]]) -> PromptUsage:
        """`segments`: each block of tools, system, messages as text, and whether it is a
        cache breakpoint."""
        ends, digests, running = [], [], hashlib.sha256()
        chars = 0
        for text, _ in segments:
            running.update(text.encode())
            chars += len(text)
            ends.append(chars)
            digests.append(running.copy().digest())
        total = tokens(chars)
        if self.hit_ratio is not None:
            return PromptUsage(total, int(total * self.hit_ratio))
        least = anthropic_minimum(model)
        breaks = [i for i, (_, bp) in enumerate(segments) if bp and tokens(ends[i]) >= least]
        if not breaks:
            return PromptUsage(total)
        seen = self._store((provider, "anthropic", model))
        last = breaks[-1]
        hit = next((i for i in range(last, -1, -1) if digests[i] in seen), None)
        read_chars = ends[hit] if hit is not None else 0
        write_chars = 0 if hit == last else ends[last] - read_chars
        seen.update(digests[i] for i in breaks)
        read = read_chars // CHARS_PER_TOKEN
        write = write_chars // CHARS_PER_TOKEN
        return PromptUsage(max(total, read + write), read, write)

    def openai(self, provider: str, model: str, prompt: str) -> PromptUsage:
        total = tokens(len(prompt))
        if self.hit_ratio is not None:
            return PromptUsage(total, int(total * self.hit_ratio))
        first = OPENAI_MIN_TOKENS * CHARS_PER_TOKEN
        step = OPENAI_STEP_TOKENS * CHARS_PER_TOKEN
        if len(prompt) < first:
            return PromptUsage(total)
        seen = self._store((provider, "openai", model))
        running = hashlib.sha256(prompt[:first].encode())
        cached, boundary = 0, first
        while True:
            digest = running.copy().digest()
            if digest in seen:
                cached = boundary // CHARS_PER_TOKEN
            seen.add(digest)
            if boundary + step > len(prompt):
                break
            running.update(prompt[boundary : boundary + step].encode())
            boundary += step
        return PromptUsage(total, cached)
