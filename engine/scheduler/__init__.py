"""The scheduler process: every cycle it ingests the spool, rolls up, runs the alerts and
publishes the snapshots."""
