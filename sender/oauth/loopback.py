"""The first refresh token of a mailbox, from the authorization code grant with PKCE and a loopback redirect
(RFC 8252): the person opens the provider's page in a browser, signs in as the mailbox, and the provider redirects
the browser to a one-shot listener on 127.0.0.1 with the code. For providers whose device flow refuses the mail
scope (Google: https://mail.google.com/)."""

from __future__ import annotations

import html
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlsplit

import requests
from authlib.common.security import generate_token
from authlib.integrations.base_client.errors import OAuthError
from authlib.integrations.requests_client import OAuth2Session

from sender.oauth.device import REQUEST_TIMEOUT_S, Tokens
from sender.oauth.metadata import server_metadata
from sendhost.errors import SecretUnavailable
from sendhost.model import OAuthSettings

# Where Google and Microsoft show their sign-in page; generic providers name theirs, or publish it in their RFC 8414
# metadata.
AUTHORIZATION_URLS = {"google": "https://accounts.google.com/o/oauth2/v2/auth",
                      "microsoft": "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/authorize"}
# Google returns a refresh token only for offline access, and again on a later run only with a fresh consent.
EXTRA_PARAMETERS = {"google": {"access_type": "offline", "prompt": "consent"}}


class LoopbackFlowFailed(Exception):
    """The flow ended without a refresh token: denied, timed out, a forged redirect, or a refused exchange."""


@dataclass(frozen=True)
class Redirect:
    """What the browser brought back to the listener."""
    query: dict[str, str]


def authorization_url(settings: OAuthSettings) -> str:
    """The provider's authorization endpoint: named, a preset, or from RFC 8414 metadata at the token URL's origin."""
    if settings.authorization_url:
        return settings.authorization_url
    if settings.provider in AUTHORIZATION_URLS:
        return AUTHORIZATION_URLS[settings.provider].replace("{tenant}", settings.tenant or "common")
    metadata = server_metadata(settings.token_url)
    url = metadata.document.get("authorization_endpoint") if metadata.document else None
    if not isinstance(url, str) or not url:
        raise LoopbackFlowFailed(f"no authorization_url in the oauth block and no authorization_endpoint in "
                                 f"{metadata.url}{f' ({metadata.problem})' if metadata.problem else ''}; "
                                 "add authorization_url")
    return url


def authorize(settings: OAuthSettings, show: Callable[[str, str], None], *, timeout_s: float,
              env: Mapping[str, str] | None = None) -> Tokens:
    """Run the flow to its end: `show(url, redirect_uri)` tells the person which page to open; the redirect must
    come within `timeout_s`."""
    try:
        secret = settings.client_secret(env)
    except SecretUnavailable as exc:
        raise LoopbackFlowFailed(str(exc)) from None
    endpoint = authorization_url(settings)
    # Port 0: the kernel picks a free one; RFC 8252 section 7.3 has the provider accept any port on loopback.
    with _Listener(("127.0.0.1", 0), _Handler) as listener:
        redirect_uri = f"http://127.0.0.1:{listener.server_address[1]}/"
        session = OAuth2Session(settings.client_id, secret, scope=settings.scope, redirect_uri=redirect_uri,
                                code_challenge_method="S256",
                                token_endpoint_auth_method="client_secret_post" if secret else "none")
        with session:
            verifier = generate_token(64)
            url, state = session.create_authorization_url(endpoint, code_verifier=verifier,
                                                          **EXTRA_PARAMETERS.get(settings.provider, {}))
            show(url, redirect_uri)
            query = _wait(listener, timeout_s).query
            if not secrets.compare_digest(query.get("state", "").encode(), state.encode()):
                raise LoopbackFlowFailed("the redirect's state does not match the one sent (a forged or stale "
                                         "redirect); nothing was written, run the command again")
            if "error" in query:
                raise LoopbackFlowFailed(f"the provider ended the flow: {query['error']} "
                                         f"{query.get('error_description', '')}".strip())
            if not query.get("code"):
                raise LoopbackFlowFailed("the redirect carried no code; run the command again")
            try:
                token = session.fetch_token(settings.token_url, code=query["code"], code_verifier=verifier,
                                            timeout=REQUEST_TIMEOUT_S)
            except OAuthError as exc:
                raise LoopbackFlowFailed(f"the provider refused the code: {exc.error} {exc.description or ''}"
                                         .strip()) from None
            except requests.RequestException as exc:
                raise LoopbackFlowFailed(f"token endpoint {settings.token_url}: {exc}") from None
    if not token.get("refresh_token"):
        raise LoopbackFlowFailed("the provider granted no refresh token; ask for offline access in scope "
                                 "(Microsoft: offline_access)")
    return Tokens(str(token["refresh_token"]), str(token["access_token"]), float(token.get("expires_in") or 3600))


# A state we sent is ASCII letters and digits; anything else is not ours and is answered 400 without ending the wait.
STATE_PATTERN = re.compile(r"[A-Za-z0-9._~-]{1,256}")


class _Listener(HTTPServer):
    redirect: Redirect | None = None
    # When the flow gives up: each connection must finish its request by then, so a client that connects and says
    # nothing cannot hold the one-threaded listener past --timeout.
    deadline: float = float("inf")


def _wait(listener: _Listener, timeout_s: float) -> Redirect:
    """The first request that carries a code or an error; others (a favicon, a probe) are answered 404."""
    deadline = time.monotonic() + timeout_s
    listener.deadline = deadline
    while listener.redirect is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise LoopbackFlowFailed(f"no redirect came back within {timeout_s:.0f} s; run the command again "
                                     "(--timeout to wait longer)")
        listener.timeout = remaining
        listener.handle_request()
    return listener.redirect


class _Handler(BaseHTTPRequestHandler):
    def setup(self) -> None:
        assert isinstance(self.server, _Listener)
        super().setup()
        # The socket read timeout; BaseHTTPRequestHandler closes a connection that runs past it.
        self.connection.settimeout(max(0.01, self.server.deadline - time.monotonic()))

    def do_GET(self) -> None:
        query = {key: values[0] for key, values in parse_qs(urlsplit(self.path).query).items()}
        if "code" not in query and "error" not in query:
            self.send_error(404)
            return
        if "state" in query and not STATE_PATTERN.fullmatch(query["state"]):
            self.send_error(400, "malformed state")
            return
        assert isinstance(self.server, _Listener)
        self.server.redirect = Redirect(query)
        body = ("<!doctype html><title>sendhost</title><p>"
                + html.escape("Authorization received; you may close this window.") + "</p>").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return  # the command's own lines say what happened; a request log would bury the prompt
