"""One IMAP session to a mailbox, as the inventory's `imap:` settings describe it: TLS or STARTTLS with the
certificate verified, logged in with the mailbox's secret. The inbox reader and the Sent-folder lookup both open
their sessions here, so both connect, authenticate and fail in the same words."""

from __future__ import annotations

import base64
import contextlib
import imaplib
import socket
import ssl
import time
from collections.abc import Iterator, Mapping
from enum import StrEnum

from sender.oauth import TokenKeeper, TokenUnavailable
from sender.oauth.sasl import Mechanism, choose, error_answer, initial_response
from sendhost.errors import SecretUnavailable
from sendhost.model import ImapSettings


class ImapStage(StrEnum):
    """Where opening a session failed (`sendhost mailbox check` reports each)."""

    SECRET = "secret"
    CONNECT = "connect"  # the connection and its TLS
    LOGIN = "login"


class ImapFailure(Exception):
    """The session could not be opened: `why` says so in a line for a person (what failed and what to check)."""

    def __init__(self, why: str, stage: ImapStage = ImapStage.CONNECT) -> None:
        super().__init__(why)
        self.why = why
        self.stage = stage


@contextlib.contextmanager
def logged_in(account: ImapSettings, env: Mapping[str, str] | None, timeout_s: float,
              tokens: TokenKeeper | None = None) -> Iterator[imaplib.IMAP4]:
    """A logged-in session (nothing selected yet), logged out after; ImapFailure when the secret cannot be read,
    the server cannot be reached or its certificate does not verify, or the login is refused. Failures inside the
    session are the caller's to word (they depend on what it was doing). An `auth: oauth2` account logs in with
    the access token `tokens` keeps (default: a keeper of its own, which shares the host's token files)."""
    tokens = tokens or TokenKeeper(env=env)
    try:
        secret = tokens.secret(account.credential)
    except (SecretUnavailable, TokenUnavailable) as exc:
        raise ImapFailure(str(exc), ImapStage.SECRET) from None
    deadline = time.monotonic() + timeout_s
    try:
        imap = connect(account, timeout_s)
    except (OSError, imaplib.IMAP4.error) as exc:  # refused, timed out, TLS or certificate failure
        raise ImapFailure(f"cannot connect to {account.host}:{account.port}: {first_line(exc)}") from None
    try:
        try:
            bound(imap, deadline)  # the connection and the login within timeout_s together
            if account.credential.auth == "oauth2":
                _bearer_login(imap, account, tokens, secret)
            else:
                imap.login(account.username, secret)
        except imaplib.IMAP4.error as exc:
            raise ImapFailure(f"IMAP login as {account.username} refused: {first_line(exc)}; check the imap "
                              "username and secret", ImapStage.LOGIN) from None
        except OSError as exc:  # the server went silent or hung up during the login
            raise ImapFailure(f"IMAP login as {account.username} failed: {first_line(exc)}", ImapStage.LOGIN) from None
        imap.sock.settimeout(timeout_s)  # each later command: timeout_s of its own
        yield imap
    finally:
        with contextlib.suppress(OSError, imaplib.IMAP4.error):
            imap.logout()


def _bearer_login(imap: imaplib.IMAP4, account: ImapSettings, tokens: TokenKeeper, token: str) -> None:
    """AUTHENTICATE with the access token, by the mechanism the server offers; a refused token is renewed once
    and presented again by the same mechanism (a new token, not a second mechanism or password)."""
    offered = " ".join(c.removeprefix("AUTH=") for c in imap.capabilities if c.startswith("AUTH="))
    mechanism = choose(offered)
    if mechanism is None:
        raise imaplib.IMAP4.error(f"the server offers neither OAUTHBEARER nor XOAUTH2 (AUTH={offered or 'none'})")
    try:
        _authenticate(imap, mechanism, account.username, token)
    except imaplib.IMAP4.error:
        try:
            renewed = tokens.access_token(account.credential, refused=token).value
        except TokenUnavailable as exc:
            raise imaplib.IMAP4.error(str(exc)) from None
        _authenticate(imap, mechanism, account.username, renewed)


def _authenticate(imap: imaplib.IMAP4, mechanism: Mechanism, username: str, token: str) -> None:
    # imaplib base64-encodes what the callback returns: the raw initial response, then the failure's answer.
    answers = iter([base64.b64decode(initial_response(mechanism, username, token)),
                    base64.b64decode(error_answer(mechanism))])
    imap.authenticate(mechanism.value, lambda challenge: next(answers, b""))


def bound(imap: imaplib.IMAP4, deadline: float) -> None:
    """Let the session's next command wait at most until `deadline` (time.monotonic()); TimeoutError once it is
    past, before anything is sent."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("timed out")
    imap.sock.settimeout(left)


def connect(account: ImapSettings, timeout_s: float) -> imaplib.IMAP4:
    context = ssl.create_default_context(cafile=account.ca_file) if account.ca_file else \
        ssl.create_default_context()
    if account.security == "tls":
        return imaplib.IMAP4_SSL(account.host, account.port, ssl_context=context, timeout=timeout_s)
    imap = imaplib.IMAP4(account.host, account.port, timeout=timeout_s)
    try:
        imap.starttls(context)
    except BaseException:
        with contextlib.suppress(OSError):  # the failed handshake may have closed the socket already
            imap.shutdown()
        raise
    return imap


def quote(text: str) -> str:
    """An IMAP quoted string (a folder name, a search key): imaplib sends its arguments as they are."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def first_line(exc: BaseException) -> str:
    """An IMAP or socket error in one line for a person."""
    if isinstance(exc, socket.timeout):
        return "timed out"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {exc.verify_message}; set imap ca_file or fix the server's certificate"
    text: object = exc.args[0] if len(exc.args) == 1 else exc
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return (str(text).strip().splitlines() or [type(exc).__name__])[0]
