"""`make bench`: what the engine costs on top of a bare httpx call, measured as ratios.

Every number is a comparison made in the same run against the same fake provider, which runs in
its own process (`fake_process`): a bare `httpx.AsyncClient` posting the JSON by hand is the
baseline, and `Chain.complete` / `Chain.stream` through the provider adapters is the subject.
The machine's speed cancels out of the ratios; the absolute milliseconds mostly measure the
fake server and are shown only to give the ratios a scale.

Layout, one concern per module:
    contenders    the things measured: `Direct` (baseline) and `ThroughChain`, same interface
    runner        the timing loops: interleaved sequential, bursts at a concurrency
    stats         percentiles and one comparison row (pure)
    cases         which comparisons make up the table
    report        the machine, the table, and the generated part of docs/benchmarks.md
    fake_process  the fake providers as a subprocess

Never asserts an absolute time, and never runs the fake server on the client's event loop.
"""
