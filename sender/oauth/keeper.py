"""The token keeper: one access token per mailbox, got with the refresh-token grant and renewed before it expires.

Refreshes are shared. Worker threads of one agent wait on the mailbox's lock; the agents of one host take a file
lock beside the refresh token and, once they hold it, read the access token another agent may just have written
(`.access`): one refresh per expiry on the host, however many workers want a token at that moment. A token the
server refused is renewed once (whoever holds the lock first); the others find the new one.

A refused grant (`invalid_grant`: revoked, expired, password changed) is a person's job: the keeper pauses the
mailbox (`on_refused`) with the reason naming `sendhost mailbox authorize`, and asks the endpoint again only once
the refresh token's file changed. An endpoint that cannot be reached is transient: the keeper waits a growing
delay before it asks again, and says how long (TokenUnavailable.delay_s).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sender.oauth.errors import TokenUnavailable
from sender.oauth.files import host_lock, read_json, read_text, token_files, write_json, write_private
from sendhost import signals
from sendhost.errors import SecretUnavailable
from sendhost.model import Credential, OAuthSettings
from sendhost.private_paths import refresh_token_file_problem

log = logging.getLogger("sendhost.sender.oauth")

# A token is renewed when MARGIN_SHARE of its lifetime is left, never with less than MIN_MARGIN_S (the time a
# refresh and a login take), and never more than half its lifetime early (a 15 s token is not renewed at each use).
MARGIN_SHARE = 0.1
MIN_MARGIN_S = 3.0
DEFAULT_LIFETIME_S = 3600.0  # RFC 6749 makes expires_in optional; providers send it
REQUEST_TIMEOUT_S = 15.0
BACKOFF_S = (2.0, 300.0)  # first and longest wait after the endpoint could not be reached
# The grant errors only a person can fix (RFC 6749 section 5.2); others (server_error, temporarily_unavailable,
# a gateway's 503) are the endpoint's trouble and pass.
REFUSALS = ("invalid_grant", "invalid_client", "unauthorized_client", "invalid_scope")


def refresh_margin_s(lifetime_s: float) -> float:
    return min(max(MIN_MARGIN_S, lifetime_s * MARGIN_SHARE), lifetime_s / 2)


def refused_reason(error: str, mailbox: str) -> str:
    return f"oauth: refresh refused ({error}); run sendhost mailbox authorize {mailbox}"


def check_credential(credential: Credential, env: Mapping[str, str] | None = None) -> None:
    """What an agent checks at its start: the secret of a password mailbox is there; an oauth2 one has its
    refresh token's file and its client secret. SecretUnavailable naming the fix."""
    if credential.auth != "oauth2":
        credential.secret(env)
        return
    settings = credential.oauth
    if settings is None:
        raise SecretUnavailable(f"mailbox {credential.mailbox}: auth oauth2 without an oauth block")
    settings.client_secret(env)
    if problem := refresh_token_file_problem(settings.refresh_token_file):
        raise SecretUnavailable(f"mailbox {credential.mailbox}: refresh token file {problem}; run sendhost mailbox "
                                f"authorize {credential.mailbox}")
    token_file = Path(settings.refresh_token_file).expanduser()
    try:
        if not read_text(token_file):
            raise SecretUnavailable(f"refresh token file {token_file} of {credential.mailbox} is empty; run "
                                    f"sendhost mailbox authorize {credential.mailbox}")
    except OSError as exc:
        raise SecretUnavailable(f"refresh token file {token_file} of {credential.mailbox}: {exc.strerror}; run "
                                f"sendhost mailbox authorize {credential.mailbox}") from None


@dataclass(frozen=True)
class AccessToken:
    value: str
    expires_at: float  # epoch seconds
    lifetime_s: float

    def fresh(self, now: float) -> bool:
        return now < self.expires_at - refresh_margin_s(self.lifetime_s)

    def as_json(self) -> dict[str, Any]:
        return {"access_token": self.value, "expires_at": self.expires_at, "lifetime_s": self.lifetime_s}

    @classmethod
    def from_json(cls, value: dict[str, Any] | None) -> AccessToken | None:
        try:
            assert value is not None
            return cls(str(value["access_token"]), float(value["expires_at"]), float(value["lifetime_s"]))
        except (AssertionError, KeyError, TypeError, ValueError):
            return None


def save_grant(refresh_token_file: str, refresh_token: str, access_token: str, expires_in_s: float,
               started: float) -> Path:
    """A new authorization's tokens written (`mailbox authorize`, `postmaster authorize`): the refresh token to its
    0600 file and the access token beside it, so the agents start with it instead of spending a refresh. The path
    of the refresh token's file."""
    token_file, access_file, lock_file = token_files(Path(refresh_token_file).expanduser())
    # Ctrl-C waits until both files are written: each write is atomic, and the pair is whole or absent too.
    with signals.held():
        token_file.parent.mkdir(parents=True, exist_ok=True)
        # Under the agents' refresh lock: a refresh in flight finishes (and writes the old grant's rotated token)
        # first, then this overwrites it; without the lock that refresh overwrote the new authorization.
        with host_lock(lock_file):
            write_private(token_file, refresh_token + "\n")
            write_json(access_file, AccessToken(access_token, started + expires_in_s, expires_in_s).as_json())
    return token_file


@dataclass
class _Backoff:
    until: float
    delay_s: float


def _changed(token_file: Path, read: str) -> bool:
    """Whether `token_file` no longer holds the refresh token `read` from it (rewritten, or gone)."""
    try:
        return read_text(token_file) != read
    except OSError:
        return True


class TokenKeeper:
    """Access tokens of the `auth: oauth2` mailboxes; passwords and static tokens of the others, as read at each
    use. Share one between threads."""

    def __init__(self, *, env: Mapping[str, str] | None = None, clock: Callable[[], float] = time.time,
                 on_refused: Callable[[str, str], object] | None = None,
                 timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        """`on_refused(mailbox, reason)` pauses a mailbox whose grant was refused (the agent's: the guard's pause)."""
        self._env = env
        self._clock = clock
        self._on_refused = on_refused
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._mailbox_locks: dict[str, threading.Lock] = {}
        self._tokens: dict[str, AccessToken] = {}
        self._backoff: dict[str, _Backoff] = {}
        self._refused: dict[str, tuple[str, str]] = {}  # token file: (the refresh token refused, the reason)
        self.refreshes = 0  # grants this keeper made (tests and metrics read it)

    def secret(self, credential: Credential) -> str:
        """What `credential` logs in with now: a fresh access token (oauth2), else its password or static token."""
        if credential.auth != "oauth2":
            return credential.secret(self._env)
        return self.access_token(credential).value

    def access_token(self, credential: Credential, *, refused: str | None = None) -> AccessToken:
        """A fresh access token; `refused`: the server refused that one, renew it unless someone already did.
        TokenUnavailable when none can be had now; SecretUnavailable when the settings lack what it takes."""
        settings = credential.oauth
        if settings is None:
            raise SecretUnavailable(f"mailbox {credential.mailbox}: auth oauth2 without an oauth block")
        key = settings.refresh_token_file
        token = self._tokens.get(key)
        if self._usable(token, refused):
            assert token is not None
            return token
        with self._mailbox_lock(key):
            token = self._tokens.get(key)
            if self._usable(token, refused):
                assert token is not None
                return token
            backoff = self._backoff.get(key)
            if backoff is not None and self._clock() < backoff.until:
                raise TokenUnavailable(f"oauth: token endpoint unreachable, next try in "
                                       f"{backoff.until - self._clock():.0f}s", refused=False,
                                       delay_s=backoff.until - self._clock())
            token_file, access_file, lock_file = token_files(Path(settings.refresh_token_file).expanduser())
            with host_lock(lock_file):
                # Another agent may have renewed it while we waited for the lock.
                shared = AccessToken.from_json(read_json(access_file))
                if self._usable(shared, refused):
                    assert shared is not None
                    self._tokens[key] = shared
                    return shared
                token = self._refresh(credential.mailbox, settings, token_file, access_file)
            self._tokens[key] = token
            self._backoff.pop(key, None)
            return token

    def _usable(self, token: AccessToken | None, refused: str | None) -> bool:
        return token is not None and token.value != refused and token.fresh(self._clock())

    def _mailbox_lock(self, key: str) -> threading.Lock:
        with self._lock:
            return self._mailbox_locks.setdefault(key, threading.Lock())

    def _refresh(self, mailbox: str, settings: OAuthSettings, token_file: Path, access_file: Path) -> AccessToken:
        """The refresh-token grant, under the host lock; a rotated refresh token replaces the old one in place and
        the access token is shared, unless the refresh token's file changed meanwhile (a newer file wins)."""
        try:
            refresh_token = read_text(token_file)
        except OSError as exc:
            raise self._refusal(mailbox, token_file, "", f"oauth: refresh token file {token_file}: {exc.strerror}; "
                                f"run sendhost mailbox authorize {mailbox}") from None
        earlier = self._refused.get(str(token_file))
        if earlier is not None and earlier[0] == refresh_token:  # refused before, not authorized again since
            raise self._refusal(mailbox, token_file, refresh_token, earlier[1])
        # late: an agent whose mailboxes all submit with a password never pays for the OAuth client's import
        import requests
        from authlib.integrations.base_client.errors import OAuthError
        from authlib.integrations.requests_client import OAuth2Session

        secret = settings.client_secret(self._env)
        session = OAuth2Session(settings.client_id, secret, scope=settings.scope,
                                token_endpoint_auth_method="client_secret_post" if secret else "none")
        started = self._clock()
        try:
            with session:
                granted = session.refresh_token(settings.token_url, refresh_token=refresh_token,
                                                timeout=self._timeout_s)
        except OAuthError as exc:
            if exc.error in REFUSALS:
                raise self._refusal(mailbox, token_file, refresh_token, refused_reason(exc.error, mailbox)) from None
            raise self._unreachable(settings, f"{exc.error}: {exc.description or ''}".strip()) from None
        except (requests.RequestException, ValueError) as exc:
            raise self._unreachable(settings, f"{type(exc).__name__}: {exc}") from None
        self.refreshes += 1
        rotated = granted.get("refresh_token")
        lifetime = float(granted.get("expires_in") or DEFAULT_LIFETIME_S)
        token = AccessToken(str(granted["access_token"]), started + lifetime, lifetime)
        if _changed(token_file, refresh_token):
            # Written while we asked, by a writer without the lock (a person, an older sendhost's authorize): a
            # new authorization, newer than the old grant's rotated token. Ours serves this process only.
            log.warning("oauth: the refresh token file of %s changed while its token was renewed; the file's token "
                        "is kept and the renewed one not shared", mailbox)
            return token
        if rotated and rotated != refresh_token:
            write_private(token_file, rotated + "\n")
        write_json(access_file, token.as_json())
        log.info("oauth: renewed the access token of %s (lives %.0fs%s)", mailbox, lifetime,
                 ", refresh token rotated" if rotated and rotated != refresh_token else "")
        return token

    def _refusal(self, mailbox: str, token_file: Path, refresh_token: str, reason: str) -> TokenUnavailable:
        self._refused[str(token_file)] = (refresh_token, reason)
        log.error("sender: mailbox %s paused: %s", mailbox, reason)
        if self._on_refused is not None:
            try:
                self._on_refused(mailbox, reason)
            except Exception as exc:  # the next use pauses it again; the refusal stands either way
                log.warning("oauth: could not pause %s: %s", mailbox, exc)
        return TokenUnavailable(reason, refused=True, delay_s=0.0)

    def _unreachable(self, settings: OAuthSettings, why: str) -> TokenUnavailable:
        key = settings.refresh_token_file
        earlier = self._backoff.get(key)
        delay = BACKOFF_S[0] if earlier is None else min(earlier.delay_s * 2, BACKOFF_S[1])
        self._backoff[key] = _Backoff(self._clock() + delay, delay)
        log.warning("oauth: token endpoint %s: %s; next try in %.0fs", settings.token_url, why, delay)
        return TokenUnavailable(f"oauth: token endpoint {settings.token_url} unreachable ({why})", refused=False,
                                delay_s=delay)
