"""The README's library example runs as written against the fake providers."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from simulations.fakes import FakeProviders

README = Path(__file__).parents[2] / "README.md"


def _block(language: str, section: str) -> str:
    """The first `language` code block of the README's `## section`."""
    text = README.read_text()
    start = text.index(f"\n## {section}\n")
    found = re.search(rf"```{language}\n(.*?)```", text[start:], re.DOTALL)
    assert found, f"the README's {section} section has a {language} block"
    return found.group(1)


def test_the_readme_library_example_runs_as_written(tmp_path, monkeypatch: pytest.MonkeyPatch):
    example = _block("python", "Library")
    assert len(example.strip().splitlines()) <= 12, "the example stays about ten lines"
    fake = FakeProviders.start_in_thread()
    try:
        config = _block("toml", "Configuration").replace(
            "https://api.anthropic.com", fake.anthropic_url
        )
        config = config.replace("https://api.openai.com/v1", fake.openai_url)
        (tmp_path / "switchover.toml").write_text(config)
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-anthropic-key")
        monkeypatch.setenv("OPENAI_API_KEY", "test-openai-key")
        fake.script("claude-sonnet-4-5", ["overloaded", "overloaded"])  # so it shows a fallback

        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(example, "README.md", "exec"), {})
    finally:
        fake.close()
    assert printed.getvalue().splitlines() == [
        "echo: Where is my order #1234?",
        "served by claude claude-haiku-4-5 after 3 attempt(s)",
    ]
