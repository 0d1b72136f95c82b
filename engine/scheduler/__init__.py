"""The scheduler process: every cycle it ingests the spool, rolls up, runs the alerts and
publishes the snapshots.

pipeline.py       the jobs on the one store connection: the cycle, day rollups, traffic profile
snapshots.py      what the cycle publishes for the dashboard and reports, and its SQL
process.py        `switchover scheduler`: the jobs on their clocks, waiting for the database
weekly_report.py  the weekly report, rendered from the published snapshots and sent
"""
