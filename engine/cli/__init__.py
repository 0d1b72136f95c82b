"""The `switchover` command: one module per command group, and the supervisor behind `up`."""
