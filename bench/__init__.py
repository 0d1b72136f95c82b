"""`make bench`: what the engine costs on top of a bare httpx call, measured as ratios (and
against what LiteLLM's Router costs), what a primary's outage costs a request, and what the
telemetry costs (recording, ingest, one scheduler cycle, the dashboard's reads) against its
targets.

Chain: every number is a comparison made in the same run against the same fake provider, which
runs in its own process (`fake_process`): a bare `httpx.AsyncClient` posting the JSON by hand is
the baseline, and `Chain.complete` / `Chain.stream` through the provider adapters is the
subject. The machine's speed cancels out of the ratios; the absolute milliseconds mostly
measure the fake server and are shown only to give the ratios a scale.

Telemetry: absolute figures on this machine, each beside its target, measured on the real
engine code in temporary directories (each module also runs alone: `python -m bench.<name>`).

Peer: LiteLLM's Router is measured the same way against the same baseline, in a virtual
environment of its own (bench/.venv-litellm, `make bench-venv`): it is never a dependency of
Switchover, so its side runs as a subprocess and reports its samples as JSON.

Layout, one concern per module:
    wire          the baseline, a bare httpx client, importing nothing from engine/
    contenders    the things measured: `Direct` (baseline) and `ThroughChain`, same interface
    peer          LiteLLM's side as a subprocess, and its added time beside the chain's
    litellm_side  LiteLLM's side itself (runs in bench/.venv-litellm only)
    incident      a primary's outage: a request's added time before and after the breaker opens
    breakers      the SQLite breaker store of one host against the memory store, per request
    runner        the timing loops: interleaved sequential, bursts at a concurrency
    stats         percentiles, one comparison row, one telemetry figure (pure)
    cases         which comparisons make up the chain's table
    fake_process  the fake providers as a subprocess
    transports    httpx's default transport against the alternatives under concurrency (alone:
                  `python -m bench.transports`; not part of `make bench`)
    recorder      the recorder hook and a spool flush
    store         spool ingest rows/s; publishing and reading a day of traffic's snapshots
    ingest_profile  where an ingest's time goes (py-spy, DuckDB's profiler; not in `make bench`)
    scheduler     one scheduler cycle over a 1 M- and a 10 M-attempt store, the Live page's reads
    timing        timing engine functions and SQL statements from outside
    telemetry     which figures make up the telemetry table, and their targets
    report        the machine, the tables, and the generated part of docs/benchmarks.md

Never asserts an absolute time, and never runs the fake server on the client's event loop.
"""
