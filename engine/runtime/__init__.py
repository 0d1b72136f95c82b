"""Where the engine is put together for a caller: the in-process `Switchover`, the per-route
chains, background jobs."""
