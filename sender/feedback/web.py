"""The feedback web service: one-click unsubscribe (RFC 8058), a confirm page, relay events, health and metrics.

    POST /u/<token>   body List-Unsubscribe=One-Click: suppress the row's recipient (200, idempotent)
    GET  /u/<token>   a small page with a confirm button; a GET alone never unsubscribes (link scanners follow it)
    POST /events      JSON {message_id, event, at} (or a list of them), X-Sendhost-Signature: sha256=<hex HMAC>
    GET  /healthz     200 when the ledger answers
    GET  /metrics     Prometheus

Tokens are the agent's (sender.sending.tokens); a token made with a key no longer configured (rotated out) is as
unknown as a forged one: 404, nothing changed. Logs name rows by id, never a recipient's address.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs

import psycopg
import uvicorn
from prometheus_client import CollectorRegistry, Counter, make_asgi_app
from psycopg_pool import ConnectionPool
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route

from sender.errors import LedgerUnavailable
from sender.feedback.metrics import LedgerCollector
from sender.ledger import connection as db
from sender.ledger.events import Applied, Event, Feedback
from sender.ledger.store import Ledger
from sender.sending.tokens import verify_token

log = logging.getLogger("sendhost.sender.web")

ONE_CLICK = "One-Click"
SIGNATURE_HEADER = "x-sendhost-signature"
MAX_BODY = 1 << 20  # a relay's batch of events; anything bigger is not one


@dataclass(frozen=True)
class WebKeys:
    """The unsubscribe keys, current first (then the older one still accepted while rotating), and the events key."""

    unsubscribe: Sequence[bytes]
    events: bytes | None = None

    def row_of(self, token: str) -> int | None:
        for key in self.unsubscribe:
            found = verify_token(key, token)
            if found is not None:
                return found
        return None


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.unsubscribes = Counter("sendhost_unsubscribe_requests", "One-click and confirm-page requests.",
                                    ["method", "outcome"], registry=self.registry)
        self.events = Counter("sendhost_feedback_events", "Relay events received, by outcome.", ["outcome"],
                              registry=self.registry)


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        "<meta name=viewport content='width=device-width, initial-scale=1'>"
        f"<title>{html.escape(title)}</title><style>body{{font:16px/1.5 system-ui,sans-serif;max-width:32em;"
        "margin:3em auto;padding:0 1em}button{font:inherit;padding:.5em 1.5em}</style></head>"
        f"<body><h1>{html.escape(title)}</h1>{body}</body></html>", status_code=status,
        headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"})


def _parse_at(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def create_app(pool: ConnectionPool, keys: WebKeys, metrics: Metrics | None = None) -> Starlette:
    """The ASGI app over a pool of autocommit ledger connections."""
    if metrics is None:
        metrics = Metrics()
        metrics.registry.register(LedgerCollector(pool))

    def unsubscribe(email_id: int) -> Applied:
        with pool.connection() as conn:
            return Feedback(Ledger(conn)).apply(email_id, Event.UNSUBSCRIBED, source="one-click",
                                                ref="one-click", detail="List-Unsubscribe one-click")

    def row_exists(email_id: int) -> bool:
        with pool.connection() as conn:
            return Feedback(Ledger(conn)).has_row(email_id)

    async def unsubscribe_page(request: Request) -> Response:
        token = request.path_params["token"]
        email_id = keys.row_of(token)
        if email_id is None or not await run_in_threadpool(row_exists, email_id):
            metrics.unsubscribes.labels("GET", "unknown").inc()
            log.info("unsubscribe page: unknown or altered token")
            return _page("Link not recognised", "<p>This unsubscribe link is not valid.</p>", 404)
        metrics.unsubscribes.labels("GET", "page").inc()
        action = html.escape(f"/u/{token}", quote=True)
        return _page("Unsubscribe",
                     f"<p>Stop receiving these emails?</p><form method=post action='{action}'>"
                     f"<input type=hidden name=List-Unsubscribe value={ONE_CLICK}>"
                     "<button id=confirm type=submit>Unsubscribe</button></form>")

    async def unsubscribe_post(request: Request) -> Response:
        token = request.path_params["token"]
        email_id = keys.row_of(token)
        if email_id is None:
            metrics.unsubscribes.labels("POST", "unknown").inc()
            log.info("unsubscribe: unknown or altered token")
            return _page("Link not recognised", "<p>This unsubscribe link is not valid.</p>", 404)
        body = (await request.body())[:4096].decode("utf-8", "replace")
        if ONE_CLICK not in parse_qs(body).get("List-Unsubscribe", []):
            metrics.unsubscribes.labels("POST", "bad_body").inc()
            log.info("unsubscribe: row %d: body is not List-Unsubscribe=One-Click", email_id)
            return PlainTextResponse("the body must be List-Unsubscribe=One-Click (RFC 8058)\n", 400)
        result = await run_in_threadpool(unsubscribe, email_id)
        if result is Applied.NO_ROW:
            metrics.unsubscribes.labels("POST", "unknown").inc()
            log.info("unsubscribe: token for row %d, which is not in the ledger", email_id)
            return _page("Link not recognised", "<p>This unsubscribe link is not valid.</p>", 404)
        metrics.unsubscribes.labels("POST", str(result)).inc()
        log.info("unsubscribe: row %d %s", email_id, result)
        return _page("Unsubscribed", "<p id=done>You will not receive these emails again.</p>")

    def apply_events(items: list[dict[str, Any]]) -> list[str]:
        results = []
        with pool.connection() as conn:
            feedback = Feedback(Ledger(conn))
            for item in items:
                results.append(str(feedback.apply_by_message_id(
                    item["message_id"], Event(item["event"]), source="webhook", ref=item["ref"], at=item["at"],
                    detail=item["detail"])))
        return results

    async def events(request: Request) -> Response:
        if keys.events is None:
            return PlainTextResponse("events are not configured on this service\n", 404)
        declared = request.headers.get("content-length", "")
        if not declared.isdigit():
            metrics.events.labels("bad_input").inc()
            return PlainTextResponse("send the events with a Content-Length\n", 411)
        if int(declared) > MAX_BODY:
            metrics.events.labels("too_large").inc()
            return PlainTextResponse(f"send at most {MAX_BODY} bytes\n", 413)
        body = await request.body()
        if len(body) > MAX_BODY:
            metrics.events.labels("too_large").inc()
            return PlainTextResponse("body too large\n", 413)
        expected = "sha256=" + hmac.new(keys.events, body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(request.headers.get(SIGNATURE_HEADER, "").encode(), expected.encode()):
            metrics.events.labels("bad_signature").inc()
            log.warning("events: wrong or missing %s from %s", SIGNATURE_HEADER,
                        request.client.host if request.client else "?")
            return PlainTextResponse(f"wrong or missing {SIGNATURE_HEADER}\n", 401)
        items, problem = _parse_events(body)
        if problem is not None:
            metrics.events.labels("bad_input").inc()
            log.warning("events: %s", problem)
            return PlainTextResponse(problem + "\n", 400)
        results = await run_in_threadpool(apply_events, items)
        for result in results:
            metrics.events.labels(result).inc()
        return JSONResponse({"results": results})

    async def healthz(request: Request) -> Response:
        def ping() -> None:
            with pool.connection(timeout=5) as conn:
                Ledger(conn).ping()

        try:
            await run_in_threadpool(ping)
        except Exception as exc:  # the pool raises PoolTimeout, psycopg errors...
            log.warning("healthz: the ledger does not answer: %s", str(exc).splitlines()[0] if str(exc) else exc)
            return PlainTextResponse("ledger unavailable\n", 503)
        return PlainTextResponse("ok\n")

    async def ledger_down(request: Request, exc: Exception) -> Response:
        log.warning("%s %s: %s", request.method, request.url.path.split("/u/")[0] or "/u", exc)
        return PlainTextResponse("the ledger is unavailable; try again later\n", 503)

    return Starlette(exception_handlers={LedgerUnavailable: ledger_down, psycopg.OperationalError: ledger_down},
                     routes=[
        Route("/u/{token}", unsubscribe_page, methods=["GET"]),
        Route("/u/{token}", unsubscribe_post, methods=["POST"]),
        Route("/events", events, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Mount("/metrics", app=make_asgi_app(registry=metrics.registry)),
    ])


def _parse_events(body: bytes) -> tuple[list[dict[str, Any]], str | None]:
    """The events of a request body, each checked; or a problem naming the first bad one (nothing applied)."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return [], "the body is not JSON; send {\"message_id\": ..., \"event\": ..., \"at\": ...}"
    entries = data if isinstance(data, list) else [data]
    items = []
    allowed = ", ".join(e.value for e in Event)
    for n, entry in enumerate(entries):
        if not isinstance(entry, dict):
            return [], f"event {n} is not an object"
        message_id, event, at = entry.get("message_id"), entry.get("event"), _parse_at(entry.get("at"))
        if not isinstance(message_id, str) or not message_id.strip("<> "):
            return [], f"event {n}: message_id missing or not a string"
        if event not in {e.value for e in Event}:
            return [], f"event {n}: event {event!r} is not one of {allowed}"
        if at is None:
            return [], f"event {n}: at {entry.get('at')!r} is not an ISO 8601 time with a zone"
        detail = entry.get("detail", "")
        items.append({"message_id": message_id, "event": event, "at": at, "ref": at.isoformat(),
                      "detail": detail if isinstance(detail, str) else ""})
    return items, None


def open_pool(database_url: str, size: int = 8) -> ConnectionPool:
    """Autocommit ledger connections, as sender.ledger.connection makes them, shared by the requests."""
    return ConnectionPool(database_url, min_size=1, max_size=size, open=True, timeout=10,
                          kwargs={"autocommit": True, "connect_timeout": db.CONNECT_TIMEOUT_S,
                                  "options": f"-c statement_timeout={db.STATEMENT_TIMEOUT_MS}",
                                  "application_name": "sendhost-web"})


def serve(database_url: str, keys: WebKeys, host: str, port: int) -> None:
    """Serve until SIGINT/SIGTERM (uvicorn handles both and finishes the requests in flight)."""
    with open_pool(database_url) as pool:
        # no access log: the path carries the token, and our own lines say what each request did
        # An idle keep-alive connection outlives the proxy's (nginx keeps upstream ones 60 s): a server that closed
        # first would race the proxy reusing it, and that request would fail.
        config = uvicorn.Config(create_app(pool, keys), host=host, port=port, access_log=False, log_config=None,
                                server_header=False, timeout_graceful_shutdown=10, timeout_keep_alive=75)
        uvicorn.Server(config).run()
