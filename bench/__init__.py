"""`make bench`: what the engine costs on top of a bare httpx call, measured as ratios, and what
the telemetry costs (recording, ingest, one scheduler cycle, the dashboard's reads) against its
targets.

Chain: every number is a comparison made in the same run against the same fake provider, which
runs in its own process (`fake_process`): a bare `httpx.AsyncClient` posting the JSON by hand is
the baseline, and `Chain.complete` / `Chain.stream` through the provider adapters is the
subject. The machine's speed cancels out of the ratios; the absolute milliseconds mostly
measure the fake server and are shown only to give the ratios a scale.

Telemetry: absolute figures on this machine, each beside its target, measured on the real
engine code in temporary directories (each module also runs alone: `python -m bench.<name>`).

Layout, one concern per module:
    contenders    the things measured: `Direct` (baseline) and `ThroughChain`, same interface
    runner        the timing loops: interleaved sequential, bursts at a concurrency
    stats         percentiles, one comparison row, one telemetry figure (pure)
    cases         which comparisons make up the chain's table
    fake_process  the fake providers as a subprocess
    transports    httpx's default transport against the alternatives under concurrency (alone:
                  `python -m bench.transports`; not part of `make bench`)
    recorder      the recorder hook and a spool flush
    store         spool ingest rows/s; publishing and reading a day of traffic's snapshots
    scheduler     one scheduler cycle over a 10 M-attempt store, and the Live page's reads
    timing        timing engine functions and SQL statements from outside
    telemetry     which figures make up the telemetry table, and their targets
    report        the machine, the tables, and the generated part of docs/benchmarks.md

Never asserts an absolute time, and never runs the fake server on the client's event loop.
"""
