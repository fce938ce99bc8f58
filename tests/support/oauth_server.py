"""A test OAuth 2.0 authorization server on loopback (Starlette under uvicorn, in a thread of the test process).

What the agent meets at Google's or Microsoft's token endpoint, made short and strict: the refresh-token grant
with **rotating** refresh tokens (each one works once: a second refresh with the same token, as a stampede of
agents would make, gets `invalid_grant`), access tokens that live `lifetime_s` (15 s), `invalid_grant` for a revoked
token, token introspection (RFC 7662) for the submission server, the device authorization grant (RFC 8628)
with a test-side `approve`, and the authorization code grant with PKCE S256 only (RFC 7636): `/authorize` signs in
as `signed_in_as` at once and redirects to a loopback redirect_uri, the token endpoint checks the code verifier.
It records every grant, so a test can count refreshes and see who presented what.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlencode

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from tests.support.net import free_port

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


@dataclass(frozen=True)
class Grant:
    at: float  # server time of the grant
    user: str
    presented: str  # the refresh token presented (device grants: the device code)
    access_token: str
    refresh_token: str = ""  # the one it issued


@dataclass
class AuthorizationState:
    client_id: str
    client_secret: str | None
    lifetime_s: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    refresh_tokens: dict[str, str] = field(default_factory=dict)  # live refresh token -> user
    used: dict[str, str] = field(default_factory=dict)  # rotated-away or revoked refresh token -> user
    access_tokens: dict[str, tuple[str, float]] = field(default_factory=dict)  # token -> (user, expires at)
    grants: list[Grant] = field(default_factory=list)
    refusals: list[tuple[str, str]] = field(default_factory=list)  # (error, refresh token presented)
    devices: dict[str, dict[str, object]] = field(default_factory=dict)  # device code -> its flow
    codes: dict[str, dict[str, str]] = field(default_factory=dict)  # authorization code -> user, challenge, uri
    signed_in_as: str | None = None  # who the browser is signed in as at /authorize
    introspected: list[str] = field(default_factory=list)  # every token a resource server asked about
    down: bool = False  # answer 503 to every token request
    refreshes_held: bool = False  # a refresh-token grant waits, before it is read, until this is False again
    refresh_arrived: threading.Event = field(default_factory=threading.Event)  # a refresh-token grant came

    def issue_refresh_token(self, user: str) -> str:
        token = "rt-" + secrets.token_urlsafe(16)
        with self.lock:
            self.refresh_tokens[token] = user
        return token

    def revoke(self, user: str) -> None:
        with self.lock:
            for token, owner in list(self.refresh_tokens.items()):
                if owner == user:
                    self.used[token] = self.refresh_tokens.pop(token)

    def approve(self, user_code: str, user: str) -> None:
        with self.lock:
            for flow in self.devices.values():
                if flow["user_code"] == user_code:
                    flow["user"] = user
                    return
        raise KeyError(user_code)

    def snapshot(self) -> tuple[list[Grant], list[tuple[str, str]]]:
        with self.lock:
            return list(self.grants), list(self.refusals)

    def _tokens_for(self, user: str, presented: str) -> dict[str, object]:
        access = "at-" + secrets.token_urlsafe(16)
        refresh = "rt-" + secrets.token_urlsafe(16)
        now = time.time()
        self.access_tokens[access] = (user, now + self.lifetime_s)
        self.refresh_tokens[refresh] = user
        self.grants.append(Grant(now, user, presented, access, refresh))
        return {"access_token": access, "token_type": "Bearer", "expires_in": int(self.lifetime_s),
                "refresh_token": refresh, "scope": "smtp"}


async def _form(request: Request) -> dict[str, str]:
    """The urlencoded body (RFC 6749 section 4.1.3: the token endpoint takes only that; no multipart parser needed)."""
    return {key: values[0] for key, values in parse_qs((await request.body()).decode()).items()}


def _error(error: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": error, "error_description": f"test server: {error}"}, status_code=status)


def _s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def build_app(state: AuthorizationState) -> Starlette:
    async def token(request: Request) -> JSONResponse:
        form = await _form(request)
        if state.down:
            return JSONResponse({"error": "temporarily_unavailable"}, status_code=503)
        if form.get("client_id") != state.client_id or form.get("client_secret") != state.client_secret:
            return _error("invalid_client", 401)
        grant_type = form.get("grant_type")
        if grant_type == "refresh_token":
            state.refresh_arrived.set()
            while state.refreshes_held:  # a refresh in flight, as long as the test needs (the loop serves others)
                await asyncio.sleep(0.02)
        with state.lock:
            if grant_type == "refresh_token":
                presented = str(form.get("refresh_token", ""))
                user = state.refresh_tokens.pop(presented, None)
                if user is None:
                    state.refusals.append(("invalid_grant", presented))
                    return _error("invalid_grant")
                state.used[presented] = user  # rotation: this refresh token never works again
                return JSONResponse(state._tokens_for(user, presented))
            if grant_type == DEVICE_GRANT:
                code = str(form.get("device_code", ""))
                flow = state.devices.get(code)
                if flow is None:
                    return _error("invalid_grant")
                if flow["user"] is None:
                    return _error("authorization_pending")
                del state.devices[code]
                return JSONResponse(state._tokens_for(str(flow["user"]), code))
            if grant_type == "authorization_code":
                issued = state.codes.pop(str(form.get("code", "")), None)  # a code works once
                if issued is None or form.get("redirect_uri") != issued["redirect_uri"]:
                    return _error("invalid_grant")
                if _s256(form.get("code_verifier", "")) != issued["challenge"]:
                    state.refusals.append(("invalid_grant", "code_verifier"))
                    return _error("invalid_grant")
                return JSONResponse(state._tokens_for(issued["user"], "authorization_code"))
        return _error("unsupported_grant_type")

    async def device_authorization(request: Request) -> JSONResponse:
        form = await _form(request)
        if form.get("client_id") != state.client_id:
            return _error("invalid_client", 401)
        code, user_code = secrets.token_urlsafe(16), secrets.token_hex(4).upper()
        with state.lock:
            state.devices[code] = {"user_code": user_code, "user": None}
        base = f"{request.url.scheme}://{request.url.netloc}"
        return JSONResponse({"device_code": code, "user_code": user_code, "verification_uri": f"{base}/device",
                             "expires_in": 600, "interval": 1})

    async def authorize(request: Request) -> Response:
        query = request.query_params
        redirect_uri = query.get("redirect_uri", "")
        if query.get("client_id") != state.client_id or not redirect_uri.startswith("http://127.0.0.1:"):
            return _error("invalid_client", 401)  # never redirect to an unchecked place
        if query.get("response_type") != "code" or query.get("code_challenge_method") != "S256" \
                or not query.get("code_challenge") or state.signed_in_as is None:
            refused = {"error": "invalid_request", "state": query.get("state", "")}
            return RedirectResponse(f"{redirect_uri}?{urlencode(refused)}")
        code = secrets.token_urlsafe(16)
        with state.lock:
            state.codes[code] = {"user": state.signed_in_as, "challenge": str(query["code_challenge"]),
                                 "redirect_uri": redirect_uri}
        return RedirectResponse(f"{redirect_uri}?{urlencode({'code': code, 'state': query.get('state', '')})}")

    async def introspect(request: Request) -> JSONResponse:
        form = await _form(request)
        with state.lock:
            state.introspected.append(str(form.get("token", "")))
            found = state.access_tokens.get(str(form.get("token", "")))
        if found is None or found[1] <= time.time():
            return JSONResponse({"active": False})
        return JSONResponse({"active": True, "username": found[0], "exp": int(found[1]), "token_type": "Bearer"})

    async def metadata(request: Request) -> JSONResponse:
        base = f"{request.url.scheme}://{request.url.netloc}"
        return JSONResponse({"issuer": base, "token_endpoint": f"{base}/token",
                             "device_authorization_endpoint": f"{base}/device_authorization",
                             "authorization_endpoint": f"{base}/authorize",
                             "introspection_endpoint": f"{base}/introspect"})

    return Starlette(routes=[
        Route("/token", token, methods=["POST"]),
        Route("/device_authorization", device_authorization, methods=["POST"]),
        Route("/authorize", authorize),
        Route("/introspect", introspect, methods=["POST"]),
        Route("/.well-known/oauth-authorization-server", metadata),
    ])


@dataclass
class AuthorizationServer:
    base: str
    state: AuthorizationState

    @property
    def token_url(self) -> str:
        return f"{self.base}/token"

    @property
    def introspection_url(self) -> str:
        return f"{self.base}/introspect"


@contextmanager
def authorization_server(*, client_id: str = "sendhost-test", client_secret: str | None = "s3cret",
                         lifetime_s: float = 15.0) -> Iterator[AuthorizationServer]:
    state = AuthorizationState(client_id, client_secret, lifetime_s)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(build_app(state), host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, name="oauth-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test authorization server did not start")
        time.sleep(0.02)
    try:
        yield AuthorizationServer(f"http://127.0.0.1:{port}", state)
    finally:
        server.should_exit = True
        thread.join(10)
