"""The sign-in every page passes through (app.py calls `gate` before the navigation), and who
is acting on the dashboard (`acting`), for the operator actions (dashboard.operator).

Which sign-in applies is dashboard.auth's answer. Without one, nothing is asked (loopback
only: the command refuses a wider address, and so does this gate when Streamlit was started
another way on one) and the person is "local". With one, a person not signed in sees the
sign-in form and nothing else: no sidebar, no figure, no page. The shared secret keeps a person
signed in for their browser session (st.session_state, on the server: a reload asks again);
OIDC keeps them signed in with Streamlit's own identity cookie.
"""

from __future__ import annotations

import time

import streamlit as st

from dashboard import auth

WRONG_SECRET_DELAY_S = 1.0  # each wrong secret waits this long: guessing is slow
_NAME = "sign_in_name"  # the name a person signed in with the shared secret gave
_ACTING = "sign_in_acting"  # who this run's actions are recorded as (set by `gate`)


def gate() -> str:
    """The person using the dashboard (an e-mail, a name, or "local"). When sign-in applies
    and nobody is signed in, draws only the sign-in form and stops the run."""
    sign_in = auth.configured()
    refused = auth.refusal(_listening_on(), sign_in)
    if refused is not None:
        st.error(refused, icon=":material/lock:")
        st.stop()
    if sign_in.method == "oidc":
        person = _oidc(sign_in)
    elif sign_in.method == "secret":
        person = _secret()
    else:
        person = auth.LOCAL_USER
    st.session_state[_ACTING] = auth.acting_as(person)
    return person


def acting() -> str | None:
    """Who an operator action of this run is recorded as ("dashboard: alice@example.com");
    None before `gate` let anybody in (the forms are then not drawn)."""
    return st.session_state.get(_ACTING)


def _listening_on() -> str:
    """The address the server answers on. A real run always has one: the command line's, or
    127.0.0.1 from dashboard/.streamlit/config.toml; only AppTest, which has no server, has
    none."""
    return st.get_option("server.address") or "127.0.0.1"


def _secret() -> str:
    name = st.session_state.get(_NAME)
    if name:
        if _sign_out_pressed(name):
            st.session_state.pop(_NAME, None)
            st.session_state.pop(_ACTING, None)
            st.rerun()
        return name
    _heading("Sign in with the dashboard's shared secret.")
    with st.form("sign_in"):
        given = st.text_input("Your name", help="Recorded with the silences and switches you make")
        secret = st.text_input("Dashboard secret", type="password")
        if st.form_submit_button("Sign in", type="primary"):
            if not given.strip():
                st.error("Give your name: it is recorded with what you do here.")
            elif auth.secret_matches(secret):
                st.session_state[_NAME] = given.strip()
                st.rerun()
            else:
                time.sleep(WRONG_SECRET_DELAY_S)
                st.error("That is not the dashboard's secret.", icon=":material/lock:")
    st.stop()


def _oidc(sign_in: auth.SignIn) -> str:
    if st.user.get("is_logged_in"):
        person = str(st.user.get("email") or st.user.get("name") or "signed-in user")
        if _sign_out_pressed(person):
            st.session_state.pop(_ACTING, None)
            st.logout()
        return person
    _heading("Sign in with your organisation's account.")
    if st.button("Sign in", type="primary", key="sign_in_oidc"):
        if sign_in.provider is None:
            st.login()
        else:
            st.login(sign_in.provider)
    st.stop()


def _heading(how: str) -> None:
    st.title("Switchover")
    st.markdown(
        f"{how} The dashboard shows costs, request ids and provider errors: it is open to "
        "signed-in people only."
    )


def _sign_out_pressed(person: str) -> bool:
    with st.sidebar:
        st.caption(f"Signed in as **{person}**")
        return st.button("Sign out", key="sign_out", icon=":material/logout:")
