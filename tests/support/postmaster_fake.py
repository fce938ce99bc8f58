"""A FAKE of Google's Gmail Postmaster Tools API v1 on loopback (a thread of the test process), at the adapter
boundary of sender.postmaster: nothing local speaks this API, so tests run the real client against this stand-in
speaking the documented JSON.

    GET /v1/domains                               {"domains": [{"name": "domains/D", "permission": "OWNER"}],
                                                   "nextPageToken": ...}
    GET /v1/domains/{D}/trafficStats              {"trafficStats": [{"name": "domains/D/trafficStats/YYYYMMDD",
        ?startDate.year=&startDate.month=&...       "userReportedSpamRatio": 0.0015, "domainReputation": "HIGH"}],
        &endDate.* (exclusive)&pageSize&pageToken   "nextPageToken": ...}
    POST /token                                   a service account's JWT (RFC 7523) for an access token

Days are served a few per page (`page_size`), so every list is paged. A day the test did not set is absent (no data);
`set_day(..., spam_ratio=None)` serves an entry without userReportedSpamRatio, as proto3 JSON leaves it out.
Errors are Google's shape: `{"error": {"code", "message", "status"}}`; `answer_next` queues replies (a 429 with
Retry-After, a 401) for the next requests whatever they ask; a domain in `forbidden` answers 403.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from joserfc import jwt
from joserfc.jwk import RSAKey

SCOPE = "https://www.googleapis.com/auth/postmaster.readonly"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
STATUS_NAMES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}


@dataclass
class Asked:
    """One request the fake received."""

    method: str
    path: str
    query: dict[str, str]
    token: str | None  # the bearer token presented


@dataclass
class FakePostmasterTools:
    """The fake's state; change it between syncs (a new day, a revised one, a refusal)."""

    page_size: int = 2
    domains: dict[str, dict[date, dict[str, Any]]] = field(default_factory=dict)
    access_tokens: set[str] = field(default_factory=lambda: {"good-token"})
    forbidden: set[str] = field(default_factory=set)
    service_account_key: RSAKey | None = None  # the public half the token endpoint checks assertions with
    service_account_email: str = "sync@project.iam.gserviceaccount.com"
    queued: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    asked: list[Asked] = field(default_factory=list)
    assertions: list[dict[str, Any]] = field(default_factory=list)  # the claims of each JWT accepted
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    def add_domain(self, domain: str) -> None:
        with self.lock:
            self.domains.setdefault(domain, {})

    def set_day(self, domain: str, day: date, spam_ratio: float | None, reputation: str | None = "HIGH") -> None:
        entry: dict[str, Any] = {"name": f"domains/{domain}/trafficStats/{day:%Y%m%d}", "spfSuccessRatio": 1,
                                 "dkimSuccessRatio": 1, "dmarcSuccessRatio": 1}
        if spam_ratio is not None:
            entry["userReportedSpamRatio"] = spam_ratio
        if reputation is not None:
            entry["domainReputation"] = reputation
        with self.lock:
            self.domains.setdefault(domain, {})[day] = entry

    def answer_next(self, status: int, headers: dict[str, str] | None = None) -> None:
        """Answer the next request with `status` (and `headers`) instead of serving it."""
        with self.lock:
            self.queued.append((status, headers or {}))

    def asked_for(self, path_part: str) -> list[Asked]:
        return [a for a in self.asked if path_part in a.path]


def _page_token(offset: int) -> str:
    return base64.urlsafe_b64encode(f"offset:{offset}".encode()).decode()


def _offset(token: str | None) -> int:
    if not token:
        return 0
    return int(base64.urlsafe_b64decode(token.encode()).decode().partition(":")[2])


def _date(query: dict[str, str], prefix: str) -> date | None:
    parts = [query.get(f"{prefix}.{k}") for k in ("year", "month", "day")]
    if not any(parts):
        return None
    return date(int(parts[0] or 0), int(parts[1] or 0), int(parts[2] or 0))


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        return

    def _reply(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self._reply(status, {"error": {"code": status, "message": message,
                                       "status": STATUS_NAMES.get(status, "UNKNOWN")}}, headers)

    def do_POST(self) -> None:
        fake = self.server.fake
        length = int(self.headers.get("Content-Length", 0))
        form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
        if urlsplit(self.path).path != "/token":
            self._error(404, "no such endpoint")
            return
        if form.get("grant_type") != JWT_BEARER or fake.service_account_key is None:
            self._reply(400, {"error": "unsupported_grant_type"})
            return
        try:
            claims = jwt.decode(form.get("assertion", ""), fake.service_account_key).claims
        except Exception:
            self._reply(400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."})
            return
        if claims.get("iss") != fake.service_account_email or claims.get("scope") != SCOPE \
                or claims.get("aud") != f"{fake.url}/token" or int(claims.get("exp", 0)) < time.time():
            self._reply(400, {"error": "invalid_grant", "error_description": "Invalid JWT: claims refused."})
            return
        token = "sa-" + secrets.token_urlsafe(8)
        with fake.lock:
            fake.assertions.append(dict(claims))
            fake.access_tokens.add(token)
        self._reply(200, {"access_token": token, "expires_in": 3599, "token_type": "Bearer"})

    def do_GET(self) -> None:
        fake = self.server.fake
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        auth = self.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
        with fake.lock:
            fake.asked.append(Asked("GET", parts.path, query, token))
            queued = fake.queued.pop(0) if fake.queued else None
        if queued is not None:
            status, headers = queued
            self._error(status, f"queued answer {status}", headers)
            return
        if token not in fake.access_tokens:
            self._error(401, "Request had invalid authentication credentials. Expected OAuth 2 access token.")
            return
        path = unquote(parts.path)
        if path == "/v1/domains":
            with fake.lock:
                names = sorted(fake.domains)
            entries = [{"name": f"domains/{d}", "permission": "OWNER", "createTime": "2026-01-01T00:00:00Z"}
                       for d in names]
            self._page(entries, "domains", query)
            return
        if path.startswith("/v1/domains/") and path.endswith("/trafficStats"):
            domain = path.removeprefix("/v1/domains/").removesuffix("/trafficStats")
            if domain in fake.forbidden:
                self._error(403, "The caller does not have permission")
                return
            with fake.lock:
                days = fake.domains.get(domain)
                served = dict(days) if days is not None else None
            if served is None:
                self._error(404, f"Requested entity was not found: domains/{domain}")
                return
            start, end = _date(query, "startDate"), _date(query, "endDate")
            if (start is None) != (end is None) or (start and end and end < start):
                self._error(400, "startDate and endDate must both be given, endDate not before startDate")
                return
            chosen = [served[d] for d in sorted(served) if start is None or (start <= d and (end is None or d < end))]
            self._page(chosen, "trafficStats", query)
            return
        self._error(404, "no such endpoint")

    def _page(self, entries: list[dict[str, Any]], key: str, query: dict[str, str]) -> None:
        fake = self.server.fake
        size = min(int(query.get("pageSize") or fake.page_size), fake.page_size)
        offset = _offset(query.get("pageToken"))
        body: dict[str, Any] = {key: entries[offset:offset + size]} if entries[offset:offset + size] else {}
        if offset + size < len(entries):
            body["nextPageToken"] = _page_token(offset + size)
        self._reply(200, body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakePostmasterTools


def write_service_account_key(fake: FakePostmasterTools, path: Path) -> Path:
    """A new service account key in Google's JSON at `path` (0600), its token_uri the fake's, which now checks
    assertions with its public half."""
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    fake.service_account_key = RSAKey.import_key(private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    path.write_text(json.dumps({"type": "service_account", "client_email": fake.service_account_email,
                                "private_key_id": "k1", "private_key": pem, "token_uri": f"{fake.url}/token"}))
    path.chmod(0o600)
    return path


@contextmanager
def fake_postmaster_tools(fake: FakePostmasterTools | None = None) -> Iterator[FakePostmasterTools]:
    """Serve `fake` (a new one by default) on 127.0.0.1 until the block ends; its `url` is set."""
    fake = fake or FakePostmasterTools()
    server = _Server(("127.0.0.1", 0), _Handler)
    server.fake = fake
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="fake-postmaster", daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
