"""The dashboard beyond loopback only with a sign-in: `switchover dashboard` and `switchover up`
refuse before anything starts, and say in one line how to configure one; on loopback nothing
is needed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dashboard.auth import (
    CONFIG_ENV,
    SECRET_ENV,
    SECRETS_FILE_ENV,
    SignIn,
    configured,
    is_loopback,
    refusal,
    secret_matches,
    secrets_files,
)
from engine.cli.dashboard_process import launch
from engine.core.errors import ConfigError

OIDC = """
[auth]
redirect_uri = "https://dash.example.com/oauth2callback"
cookie_secret = "a-long-random-string-for-the-cookie"
client_id = "switchover"
client_secret = "s3cret"
server_metadata_url = "https://id.example.com/.well-known/openid-configuration"
"""
NAMED_OIDC = """
[auth]
redirect_uri = "https://dash.example.com/oauth2callback"
cookie_secret = "a-long-random-string-for-the-cookie"

[auth.okta]
client_id = "switchover"
client_secret = "s3cret"
server_metadata_url = "https://id.example.com/.well-known/openid-configuration"
"""


def bare_environ(tmp_path: Path, **extra: str) -> dict[str, str]:
    """This machine's environment without any sign-in, and a home without secrets.toml."""
    env = {k: v for k, v in os.environ.items() if k not in (SECRET_ENV, SECRETS_FILE_ENV)}
    return {**env, "HOME": str(tmp_path / "home"), **extra}


def switchover(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args],
        env=bare_environ(tmp_path, **extra),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,  # a safety net: a refusal takes a second or two
    )


def test_the_dashboard_beyond_loopback_without_a_sign_in_exits_before_streamlit_starts(tmp_path):
    result = switchover(tmp_path, "dashboard", "--host", "0.0.0.0", "--port", "1")
    assert result.returncode != 0
    [line] = result.stderr.strip().splitlines()
    assert "the dashboard on 0.0.0.0 needs a sign-in" in line
    assert SECRET_ENV in line and "[auth]" in line
    assert "streamlit" not in result.stdout.lower()  # Streamlit never said a word


def test_up_with_a_dashboard_beyond_loopback_without_a_sign_in_starts_nothing(tmp_path):
    (tmp_path / "switchover.toml").write_text('[providers.p]\nkind = "openai"\n')
    data = tmp_path / "data"
    result = switchover(
        tmp_path, "up", "--no-demo", "--dashboard-host", "0.0.0.0", "--data-dir", str(data)
    )
    assert result.returncode != 0
    assert "needs a sign-in" in result.stderr and SECRET_ENV in result.stderr
    assert not (data / "logs").exists()  # no child was started
    assert "started" not in result.stdout


def test_the_shared_secret_lets_the_dashboard_listen_beyond_loopback(tmp_path):
    config = tmp_path / "switchover.toml"
    config.write_text("")
    environ = bare_environ(tmp_path, **{SECRET_ENV: "correct horse"})
    command, env = launch(
        host="0.0.0.0", port=8600, data_dir=tmp_path / "data", config=config, environ=environ
    )
    assert command[1:4] == ["-m", "streamlit", "run"]
    assert command[command.index("--server.address") + 1] == "0.0.0.0"
    assert command[command.index("--server.port") + 1] == "8600"
    assert "correct horse" not in " ".join(command)  # the secret stays in the environment
    assert env["SWITCHOVER_DATA_DIR"] == str(tmp_path / "data")
    assert env[CONFIG_ENV] == str(config.resolve())  # where the operator switches go


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "[::1]"])
def test_loopback_needs_no_sign_in(tmp_path, host):
    command, _ = launch(
        host=host, port=8501, data_dir=None, config=tmp_path / "none.toml",
        environ=bare_environ(tmp_path),
    )  # fmt: skip
    assert command[command.index("--server.address") + 1] == host


@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.5", "::", "", None])
def test_every_other_address_is_beyond_loopback(host):
    assert not is_loopback(host)
    assert refusal(host, SignIn("none")) is not None
    assert refusal(host, SignIn("secret", SECRET_ENV)) is None


def test_an_oidc_secrets_file_is_a_sign_in_and_is_handed_to_streamlit(tmp_path):
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(OIDC)
    environ = bare_environ(tmp_path, **{SECRETS_FILE_ENV: str(secrets)})
    assert configured(environ) == SignIn("oidc", str(secrets))
    command, _ = launch(
        host="0.0.0.0", port=8501, data_dir=None, config=tmp_path / "none.toml", environ=environ
    )
    assert command[command.index("--secrets.files") + 1] == str(secrets)


def test_oidc_in_a_provider_table_names_that_provider_for_st_login(tmp_path):
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(NAMED_OIDC)
    assert configured({}, [secrets]) == SignIn("oidc", str(secrets), provider="okta")


def test_oidc_wins_over_the_shared_secret_when_both_are_configured(tmp_path):
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(OIDC)
    assert configured({SECRET_ENV: "x"}, [secrets]).method == "oidc"


@pytest.mark.parametrize("missing", ["cookie_secret", "redirect_uri", "server_metadata_url"])
def test_an_incomplete_auth_section_is_no_sign_in(tmp_path, missing):
    secrets = tmp_path / "secrets.toml"
    secrets.write_text("\n".join(line for line in OIDC.splitlines() if missing not in line))
    assert configured({}, [secrets]) == SignIn("none")
    with pytest.raises(ConfigError, match="needs a sign-in"):
        launch(
            host="0.0.0.0", port=8501, data_dir=None, config=tmp_path / "none.toml",
            environ=bare_environ(tmp_path, **{SECRETS_FILE_ENV: str(secrets)}),
        )  # fmt: skip


def test_the_last_secrets_file_with_an_auth_section_decides_as_in_streamlit(tmp_path):
    home, project = tmp_path / "home.toml", tmp_path / "project.toml"
    home.write_text(OIDC)
    project.write_text("[auth]\nredirect_uri = 'https://x/oauth2callback'\n")  # incomplete
    assert configured({}, [home, project]) == SignIn("none")
    project.write_text("other = 1\n")  # no [auth]: the home file's stands
    assert configured({}, [home, project]).method == "oidc"


def test_streamlits_secrets_files_are_searched_home_project_then_the_app_folder(tmp_path):
    found = secrets_files({}, cwd=tmp_path / "work", home=tmp_path / "home")
    assert found[:2] == [
        tmp_path / "home" / ".streamlit" / "secrets.toml",
        tmp_path / "work" / ".streamlit" / "secrets.toml",
    ]
    assert found[2].parts[-3:] == ("dashboard", ".streamlit", "secrets.toml")
    assert secrets_files({SECRETS_FILE_ENV: "/etc/x.toml"}) == [Path("/etc/x.toml")]


def test_the_shared_secret_matches_only_itself():
    environ = {SECRET_ENV: "correct horse"}
    assert secret_matches("correct horse", environ)
    assert not secret_matches("correct horsf", environ)
    assert not secret_matches("", environ)
    assert not secret_matches("", {})  # no secret configured: nothing matches
