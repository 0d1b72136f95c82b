"""Sign-in on the dashboard: while it applies, a person not signed in sees the sign-in form
and nothing else (no figure, no sidebar, no page); a wrong secret is refused; the right one,
or an OIDC identity, opens every page and names the person."""

from __future__ import annotations

import pytest
from helpers.dashboard_pages import APP, texts
from streamlit import config as streamlit_config
from streamlit.testing.v1 import AppTest

from dashboard.auth import SECRET_ENV, SECRETS_FILE_ENV

SECRET = "correct horse battery staple"
OIDC = """
[auth]
redirect_uri = "https://dash.example.com/oauth2callback"
cookie_secret = "a-long-random-string-for-the-cookie"
client_id = "switchover"
client_secret = "s3cret"
server_metadata_url = "https://id.example.com/.well-known/openid-configuration"
"""


@pytest.fixture
def with_secret(app_env, monkeypatch):
    monkeypatch.delenv(SECRETS_FILE_ENV, raising=False)
    monkeypatch.setenv(SECRET_ENV, SECRET)
    return app_env


@pytest.fixture
def with_oidc(app_env, monkeypatch, tmp_path):
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(OIDC)
    monkeypatch.delenv(SECRET_ENV, raising=False)
    monkeypatch.setenv(SECRETS_FILE_ENV, str(secrets))
    return app_env


def opened(user: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    if user is not None:
        at.user = user
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def sign_in(at: AppTest, name: str, secret: str) -> AppTest:
    at.text_input[0].input(name)
    at.text_input[1].input(secret)
    at.button[0].click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def shows_nothing_of_the_data(at: AppTest) -> None:
    assert not at.metric and not at.dataframe and not at.get("plotly_chart")
    assert not at.sidebar.selectbox  # no window, no timezone, no freshness
    assert not [t for t in at.title if t.value != "Switchover"]  # no page ran


def test_a_person_not_signed_in_sees_only_the_sign_in_form(with_secret):
    at = opened()
    shows_nothing_of_the_data(at)
    assert [t.label for t in at.text_input] == ["Your name", "Dashboard secret"]
    assert at.text_input[1].proto.type == at.text_input[1].proto.PASSWORD


def test_a_wrong_secret_is_refused_and_shows_nothing(with_secret):
    at = sign_in(opened(), "alice", "correct horse battery stapler")
    assert "That is not the dashboard's secret." in [e.value for e in at.error]
    shows_nothing_of_the_data(at)


def test_a_sign_in_without_a_name_is_refused_for_the_record(with_secret):
    at = sign_in(opened(), "  ", SECRET)
    assert any("Give your name" in e.value for e in at.error)
    shows_nothing_of_the_data(at)


def test_the_right_secret_opens_the_pages_and_keeps_the_session_signed_in(with_secret):
    at = sign_in(opened(), "alice", SECRET)
    assert [t.value for t in at.title] == ["Live"]
    assert at.metric  # the figures
    assert "Signed in as **alice**" in [c.value for c in at.sidebar.caption]
    at.switch_page("views/costs.py")
    at.run()
    assert [t.value for t in at.title] == ["Costs"]  # no second sign-in in the session


def test_signing_out_brings_back_the_sign_in_form(with_secret):
    at = sign_in(opened(), "alice", SECRET)
    [sign_out] = [b for b in at.sidebar.button if b.label == "Sign out"]
    sign_out.click()
    at.run()
    shows_nothing_of_the_data(at)
    assert [t.label for t in at.text_input] == ["Your name", "Dashboard secret"]


def test_oidc_asks_a_person_not_signed_in_to_sign_in_and_shows_nothing(with_oidc):
    """st.login itself needs a real identity provider; AppTest seeds st.user instead."""
    at = opened({"is_logged_in": False})
    shows_nothing_of_the_data(at)
    assert [b.label for b in at.button] == ["Sign in"]
    assert not at.text_input  # no shared secret is asked for


def test_an_oidc_identity_opens_the_pages_under_its_email(with_oidc):
    at = opened({"is_logged_in": True, "email": "alice@example.com", "name": "Alice"})
    assert [t.value for t in at.title] == ["Live"]
    assert at.metric
    assert "Signed in as **alice@example.com**" in [c.value for c in at.sidebar.caption]


def test_on_loopback_with_nothing_configured_nobody_is_asked(app_env, monkeypatch):
    monkeypatch.delenv(SECRET_ENV, raising=False)
    monkeypatch.delenv(SECRETS_FILE_ENV, raising=False)
    at = opened()
    assert [t.value for t in at.title] == ["Live"]
    assert "Dashboard secret" not in [t.label for t in at.text_input]
    assert "Signed in as" not in texts(at)


@pytest.fixture
def served_on_every_interface():
    """Streamlit started by hand on 0.0.0.0 (not through `switchover dashboard`)."""
    streamlit_config.set_option("server.address", "0.0.0.0")
    yield
    streamlit_config.set_option("server.address", None)


def test_a_streamlit_started_beyond_loopback_without_a_sign_in_shows_only_the_refusal(
    app_env, monkeypatch, served_on_every_interface
):
    monkeypatch.delenv(SECRET_ENV, raising=False)
    monkeypatch.delenv(SECRETS_FILE_ENV, raising=False)
    at = opened()
    shows_nothing_of_the_data(at)
    [refused] = [e.value for e in at.error]
    assert "the dashboard on 0.0.0.0 needs a sign-in" in refused and SECRET_ENV in refused
