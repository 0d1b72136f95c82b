"""Where the engine is put together for a caller: the composition root (`build`: providers,
pricer, breakers, shared state, chains), the in-process `Switchover`, fault drills run on it,
background jobs."""
