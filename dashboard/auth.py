"""Who may open the dashboard: which sign-in applies, and whether a host may go without one.

The dashboard shows costs, request ids and provider error messages, so beyond loopback it
never runs without a sign-in. Two ways, both configured outside switchover.toml (the
dashboard reads only its data folder):

    oidc    Streamlit's `st.login`: an `[auth]` section (redirect_uri, cookie_secret, and
            client_id, client_secret, server_metadata_url, at its top or in one provider's
            table) in a secrets.toml Streamlit reads: `SWITCHOVER_DASHBOARD_SECRETS_FILE`
            when set, else the app folder's, the working folder's or the home folder's
            `.streamlit/secrets.toml` (the last that has `[auth]` wins, as in Streamlit)
    secret  `SWITCHOVER_DASHBOARD_SECRET`: one shared secret for a small team; each person
            gives a name, which is who their actions are recorded as

OIDC wins when both are configured (a person's identity rather than a name they type). With
neither, the dashboard answers on loopback only, and the local user is "local".

Pure and standard library only (no Streamlit import): `switchover dashboard` and `switchover
up` ask it before Streamlit starts, and refuse a host beyond loopback without a sign-in.
Never logs or returns a secret: `SignIn.where` names the variable or the file, not its value.
"""

from __future__ import annotations

import hmac
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

SECRET_ENV = "SWITCHOVER_DASHBOARD_SECRET"
# Set by `switchover dashboard --config` for the operator actions (dashboard.operator): the
# routes' targets, and [state] redis_url, where the gateways read their switches.
CONFIG_ENV = "SWITCHOVER_CONFIG"
SECRETS_FILE_ENV = "SWITCHOVER_DASHBOARD_SECRETS_FILE"
APP_DIR = Path(__file__).resolve().parent
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
LOCAL_USER = "local"  # who acts on loopback without a sign-in
_OIDC_SHARED = ("redirect_uri", "cookie_secret")
_OIDC_PROVIDER = ("client_id", "client_secret", "server_metadata_url")
HOW = (
    f"set {SECRET_ENV} (a shared secret), or configure OIDC in an [auth] section of "
    f".streamlit/secrets.toml or the file {SECRETS_FILE_ENV} names (docs/configuration.md, "
    "Dashboard sign-in)"
)

Method = Literal["none", "secret", "oidc"]


@dataclass(frozen=True, slots=True)
class SignIn:
    """The sign-in that applies: its method, where it is configured (a variable's name or a
    file, never a secret) and, for OIDC, the provider `st.login` is given (None: the default
    provider, whose keys are at the top of `[auth]`)."""

    method: Method
    where: str = ""
    provider: str | None = None

    @property
    def required(self) -> bool:
        return self.method != "none"


def is_loopback(host: str | None) -> bool:
    """Whether `host` answers this machine only (an unset address is every interface)."""
    return bool(host) and host.strip("[]").lower() in LOOPBACK


def secrets_files(
    environ: Mapping[str, str] | None = None, *, cwd: Path | None = None, home: Path | None = None
) -> list[Path]:
    """The secrets.toml files Streamlit reads for the dashboard, first to last (a later file's
    sections replace an earlier one's)."""
    environ = os.environ if environ is None else environ
    if environ.get(SECRETS_FILE_ENV):
        return [Path(environ[SECRETS_FILE_ENV])]
    home, cwd = home or Path.home(), cwd or Path.cwd()
    found = [home / ".streamlit" / "secrets.toml", cwd / ".streamlit" / "secrets.toml"]
    app = APP_DIR / ".streamlit" / "secrets.toml"
    return found if app in found else [*found, app]


def oidc_sign_in(files: list[Path]) -> SignIn | None:
    """OIDC when the last `[auth]` among `files` has every key `st.login` needs; else None."""
    section, source = None, None
    for path in files:
        try:
            auth = tomllib.loads(path.read_text()).get("auth")
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
            continue
        if isinstance(auth, dict):
            section, source = auth, path
    if section is None or not all(section.get(key) for key in _OIDC_SHARED):
        return None
    if all(section.get(key) for key in _OIDC_PROVIDER):
        return SignIn("oidc", str(source))
    for name, table in section.items():
        if isinstance(table, dict) and all(table.get(key) for key in _OIDC_PROVIDER):
            return SignIn("oidc", str(source), provider=name)
    return None


def configured(environ: Mapping[str, str] | None = None, files: list[Path] | None = None) -> SignIn:
    """The sign-in configured for this process: OIDC, else the shared secret, else none."""
    environ = os.environ if environ is None else environ
    oidc = oidc_sign_in(secrets_files(environ) if files is None else files)
    if oidc is not None:
        return oidc
    if environ.get(SECRET_ENV):
        return SignIn("secret", SECRET_ENV)
    return SignIn("none")


def refusal(host: str | None, sign_in: SignIn) -> str | None:
    """Why the dashboard must not listen on `host` with `sign_in`, in one line; None when it
    may (loopback, or any sign-in)."""
    if sign_in.required or is_loopback(host):
        return None
    return f"the dashboard on {host or 'every interface'} needs a sign-in: {HOW}"


def secret_matches(given: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether `given` is the shared secret, compared in constant time; never true without
    one configured."""
    environ = os.environ if environ is None else environ
    expected = environ.get(SECRET_ENV, "")
    return bool(expected) and hmac.compare_digest(given.encode(), expected.encode())


def acting_as(person: str) -> str:
    """How an action taken on the dashboard names who took it ("dashboard: alice@example.com"),
    in a switch's `by` and a silence's `created_by`."""
    return f"dashboard: {person}"
