"""The what-if simulator: a scenario's traffic through the real chain on a virtual clock, once
without its incident (the baseline) and once per backup candidate with it, each run into a store
of its own, so that "what would this outage have cost with Haiku as the backup?" is answered by
the live product's own pricing, rollups and incident detection, never by a model of them.

    scenario.py            a scenario from TOML, checked (scenario_traffic.py: its traffic and
                           latency); scenario_toml.py writes one back (`to_toml`)
    scenarios/             the library, found by name (`switchover simulate anthropic-529-peak`)
    from_store.py          scenarios from the team's recorded traffic and incidents
    recorded_incidents.py  the recorded incidents a replay reads (fault_schedule.py: their faults)
    arrivals.py            the seeded requests, and the daily curve
    simulated.py           the provider that answers from a scenario instead of a network
    fastforward.py         requests that cannot differ from a quiet success, answered as columns
    candidates.py          the chains compared: a candidate in the backups' place
    simulate.py            the runs, in parallel for a large scenario
    results.py             what a run found, compared with the baseline (result_parts.py: its
                           values; calibration.py: how far a replay is from the record)
    report.py              the comparison in words, and the command line's table
    job.py                 a simulation as a job in a process of its own (job_process.py)
    live.py                a scenario run for real over HTTP: the fidelity check (bench.fidelity)
"""
