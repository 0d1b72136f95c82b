"""Switchover without real providers, in three folders by role: `fakes/`, the fault-injecting
fake Anthropic and OpenAI providers (for tests, the demo and the simulator); `whatif/`, the
what-if simulator and its library of scenarios; `demo/`, `switchover up --demo`. The demo uses
the other two, the what-if uses the fakes, and the fakes use neither (import-linter's contract in
pyproject.toml)."""
