"""The feedback web service: one-click unsubscribe (RFC 8058), a confirm page, relay events, health and metrics.

    POST /u/<token>   body List-Unsubscribe=One-Click: suppress the row's recipient (200, idempotent)
    GET  /u/<token>   a small page with a confirm button; a GET alone never unsubscribes (link scanners follow it)
    POST /events      JSON {id, message_id, event, at} (or a list of them), X-Sendhost-Signature: t=<unix s>,v1=<hex>
    GET  /c/<token>   a tracked link's redirect, GET /o/<token> the open image (sender.feedback.tracking_web)
    GET  /healthz     200 when the ledger answers
    GET  /metrics/    Prometheus, on its own listener (default loopback), never on the public one

Tokens are the agent's (sender.sending.tokens): they name the row's idempotency key; a token made with a key no
longer configured (rotated out) is as unknown as a forged one: 404, nothing changed. Logs name rows by id, never a
recipient's address.
"""

from __future__ import annotations

import asyncio
import html
import json
import logging
import re
import signal
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import Any
from urllib.parse import parse_qs

import psycopg
import uvicorn
from prometheus_client import CollectorRegistry, Counter, make_asgi_app
from psycopg_pool import ConnectionPool
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route

from sender.errors import LedgerUnavailable
from sender.feedback import signature
from sender.feedback.guard import BodyTooLarge, GuardedH11Protocol, limit_log_rate, read_capped
from sender.feedback.metrics import CachedCollector, LedgerCollector
from sender.feedback.tracking_web import tracking_routes
from sender.ledger import connection as db
from sender.ledger.events import FROM_READING, Applied, Event, Feedback
from sender.ledger.store import Ledger
from sender.sending.tokens import verify_link_token, verify_open_token, verify_row_id_token, verify_token

log = logging.getLogger("sendhost.sender.web")

ONE_CLICK = "One-Click"
SIGNATURE_HEADER = "x-sendhost-signature"
MAX_BODY = 1 << 20  # a relay's batch of events; anything bigger is not one
ONE_CLICK_BODY_MAX = 4096  # "List-Unsubscribe=One-Click" is 26 bytes; a browser's confirm form adds nothing much
# A refusal sent before the body ended closes the connection: otherwise uvicorn would keep reading (and discarding)
# the rest, for as long as the client cares to send it.
CLOSE = {"Connection": "close"}
# The confirm page is a button that unsubscribes: framed inside someone else's page it could be clicked unseen.
NO_FRAMING = {"X-Frame-Options": "DENY", "Content-Security-Policy": "frame-ancestors 'none'"}


@dataclass(frozen=True)
class WebKeys:
    """The unsubscribe keys, current first (then the older one still accepted while rotating), the events key, how
    far an events signature's time may be from our clock, and whether its first form (sha256=, no time) is still
    accepted."""

    unsubscribe: Sequence[bytes]
    events: bytes | None = None
    legacy_signatures: bool = False
    signature_tolerance_s: int = signature.TOLERANCE_S

    def idempotency_key_of(self, token: str) -> uuid.UUID | None:
        for key in self.unsubscribe:
            found = verify_token(key, token)
            if found is not None:
                return found
        return None

    def link_of(self, token: str) -> tuple[uuid.UUID, int] | None:
        """(idempotency key, link index) of a click token made with one of the keys."""
        for key in self.unsubscribe:
            found = verify_link_token(key, token)
            if found is not None:
                return found
        return None

    def open_of(self, token: str) -> uuid.UUID | None:
        for key in self.unsubscribe:
            found = verify_open_token(key, token)
            if found is not None:
                return found
        return None

    def row_id_of(self, token: str) -> int | None:
        """The row id of a first-form token (mail sent before version 9): the ledger decides whether it still
        counts (Feedback.row_of_row_id_token)."""
        for key in self.unsubscribe:
            found = verify_row_id_token(key, token)
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
        self.tracking = Counter("sendhost_tracking_requests", "Tracked-link clicks and open-image loads, by verdict "
                                "(unknown: a token not ours).", ["kind", "verdict"], registry=self.registry)


def ledger_metrics(pool: ConnectionPool) -> Metrics:
    """This process's request counters and the ledger's numbers, the latter a snapshot at most CACHE_S old."""
    metrics = Metrics()
    metrics.registry.register(CachedCollector(LedgerCollector(pool)))
    return metrics


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        "<meta name=viewport content='width=device-width, initial-scale=1'>"
        f"<title>{html.escape(title)}</title><style>body{{font:16px/1.5 system-ui,sans-serif;max-width:32em;"
        "margin:3em auto;padding:0 1em}button{font:inherit;padding:.5em 1.5em}</style></head>"
        f"<body><h1>{html.escape(title)}</h1>{body}</body></html>", status_code=status,
        headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer", **NO_FRAMING})


def _too_large(cap: int) -> Response:
    return PlainTextResponse(f"send at most {cap} bytes\n", 413, headers=CLOSE)


# RFC 3339's date-time: Python's fromisoformat alone is lenient (it takes a NUL or a space for the "T")
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(\.\d{1,9})?([Zz]|[+-]\d\d:\d\d)", re.ASCII)


def _parse_at(value: object) -> datetime | None:
    if not isinstance(value, str) or _RFC3339.fullmatch(value) is None:
        return None
    value = re.sub(r"(\.\d{6})\d+", r"\1", value)  # nanoseconds (some relays send them) to microseconds
    try:
        parsed = datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def create_app(pool: ConnectionPool, keys: WebKeys, metrics: Metrics | None = None) -> Starlette:
    """The ASGI app over a pool of autocommit ledger connections."""
    if metrics is None:
        metrics = ledger_metrics(pool)

    def unsubscribe(email_id: int) -> Applied:
        with pool.connection() as conn:
            return Feedback(Ledger(conn)).apply(email_id, Event.UNSUBSCRIBED, source="one-click",
                                                ref="one-click", detail="List-Unsubscribe one-click")

    def row_of(token: str) -> int | None:
        """The row a token names in the ledger: by its idempotency key, or a first-form token's row id while the
        ledger still accepts those (rows sent before the upgrade, for 30 days)."""
        key = keys.idempotency_key_of(token)
        if key is not None:
            with pool.connection() as conn:
                return Feedback(Ledger(conn)).row_of_idempotency_key(key)
        row_id = keys.row_id_of(token)
        if row_id is None:
            return None  # not ours: no query at all
        with pool.connection() as conn:
            return Feedback(Ledger(conn)).row_of_row_id_token(row_id)

    async def unsubscribe_page(request: Request) -> Response:
        token = request.path_params["token"]
        email_id = await run_in_threadpool(row_of, token)
        if email_id is None:
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
        email_id = await run_in_threadpool(row_of, token)
        if email_id is None:
            metrics.unsubscribes.labels("POST", "unknown").inc()
            log.info("unsubscribe: unknown or altered token")
            return _page("Link not recognised", "<p>This unsubscribe link is not valid.</p>", 404)
        try:
            body = (await read_capped(request, ONE_CLICK_BODY_MAX)).decode("utf-8", "replace")
        except BodyTooLarge:
            metrics.unsubscribes.labels("POST", "too_large").inc()
            return _too_large(ONE_CLICK_BODY_MAX)
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
        # one transaction: an event the ledger refuses undoes those before it, as the docs promise
        with pool.connection() as conn, conn.transaction():
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
            return PlainTextResponse("send the events with a Content-Length\n", 411, headers=CLOSE)
        if int(declared) > MAX_BODY:
            metrics.events.labels("too_large").inc()
            return _too_large(MAX_BODY)
        try:
            body = await read_capped(request, MAX_BODY)
        except BodyTooLarge:  # more than it declared
            metrics.events.labels("too_large").inc()
            return _too_large(MAX_BODY)
        now = time.time()
        refused = signature.problem(keys.events, request.headers.get(SIGNATURE_HEADER, ""), body, now,
                                    legacy_allowed=keys.legacy_signatures,
                                    tolerance_s=keys.signature_tolerance_s)
        if refused is not None:
            metrics.events.labels("bad_signature").inc()
            log.warning("events: %s from %s", refused, request.client.host if request.client else "?")
            return PlainTextResponse(refused + "\n", 401)
        items, ignored, problem = _parse_events(body, datetime.fromtimestamp(now, UTC))
        if problem is not None:
            metrics.events.labels("bad_input").inc()
            log.warning("events: %s", problem)
            return PlainTextResponse(problem + "\n", 400)
        results = await run_in_threadpool(apply_events, items)
        for result in results:
            metrics.events.labels(result).inc()
        if ignored:
            metrics.events.labels("ignored").inc(len(ignored))
            log.info("events: ignored %d of a type not applied: %s", len(ignored),
                     ", ".join(sorted({i["event"] for i in ignored})))
            return JSONResponse({"results": results, "ignored": ignored})
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

    async def gone(request: Request, exc: Exception) -> Response:
        # the client left (or its read deadline closed it) mid-body: nothing to answer, nothing changed
        return PlainTextResponse("the request ended before its body\n", 400, headers=CLOSE)

    return Starlette(exception_handlers={LedgerUnavailable: ledger_down, psycopg.OperationalError: ledger_down,
                                         ClientDisconnect: gone},
                     routes=[
        Route("/u/{token}", unsubscribe_page, methods=["GET"]),
        Route("/u/{token}", unsubscribe_post, methods=["POST"]),
        Route("/events", events, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        *tracking_routes(pool, keys.link_of, keys.open_of, lambda kind, verdict: metrics.tracking.labels(
            kind, verdict).inc()),
    ])


def create_metrics_app(metrics: Metrics) -> Starlette:
    """/metrics/ alone, for its own listener: it names every sending mailbox with its bounces and complaints, which
    is nobody's business on the public unsubscribe listener."""
    return Starlette(routes=[Mount("/metrics", app=make_asgi_app(registry=metrics.registry))])


MAX_MESSAGE_ID = 998  # RFC 5322's line limit: no real Message-ID is longer
MAX_DETAIL = 2000
MAX_EVENT_ID = 200  # relays' ids are 20-40 characters (SendGrid's sg_event_id, Mailgun's id, a UUID)
# How far from our clock an event's `at` may be. Back: relays retry a failed delivery for up to 3 days (SendGrid
# 72 h, Mailgun 8 h), with room for a webhook fixed after a weekend; older news would only count in health windows
# it is no longer part of. Ahead: clock skew, not a date in 2099 that counted in every window until then.
AT_MAX_AGE = timedelta(days=7)
AT_MAX_AHEAD = timedelta(minutes=5)
# What keys an event's replays in sender_feedback.ref: the relay's own id, under a prefix of its own so that no id
# can collide with an inbox reference (a Message-ID, a hash) or `one-click`.
RELAY_REF_PREFIX = "relay:"


def _show(value: object) -> str:
    """A bad value as the answer and the log name it: short, whatever a stranger sent."""
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _text_problem(value: str) -> str | None:
    """Why PostgreSQL would refuse this string (a NUL, a lone surrogate), checked here so it answers 400, not 500."""
    if "\x00" in value:
        return "holds a NUL"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8 (a lone surrogate)"
    return None


def _parse_events(body: bytes, now: datetime) -> tuple[list[dict[str, Any]], list[dict[str, str]], str | None]:
    """The events of a request body, each checked (`at` against `now`), and those of a type the ledger does not
    apply (a vendor's own, like `processed`: id and type, skipped, so one of them does not hold back the
    batch's bounces, which the relay would retry for ever); or a problem naming the first bad one (nothing
    applied)."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return [], [], "the body is not JSON; send {\"id\": ..., \"message_id\": ..., \"event\": ..., \"at\": ...}"
    entries = data if isinstance(data, list) else [data]
    items: list[dict[str, Any]] = []
    ignored: list[dict[str, str]] = []
    names = {e.value for e in Event if e not in FROM_READING}
    allowed = ", ".join(e.value for e in Event if e not in FROM_READING)
    for n, entry in enumerate(entries):
        if not isinstance(entry, dict):
            return [], [], f"event {n} is not an object"
        event_id, message_id = entry.get("id"), entry.get("message_id")
        event, detail = entry.get("event"), entry.get("detail", "")
        if not isinstance(event_id, str) or not event_id.strip():
            return [], [], f"event {n}: id {_show(event_id)} missing or not a string: send the relay's own event id"
        if len(event_id) > MAX_EVENT_ID or _text_problem(event_id):
            return [], [], (f"event {n}: id {_show(event_id)} "
                            f"{_text_problem(event_id) or f'is over {MAX_EVENT_ID} characters'}")
        if isinstance(event, str) and event not in names:
            ignored.append({"id": event_id, "event": event[:MAX_EVENT_ID]})
            continue
        if not isinstance(message_id, str) or not message_id.strip("<> "):
            return [], [], f"event {n}: message_id missing or not a string"
        if len(message_id) > MAX_MESSAGE_ID or _text_problem(message_id):
            return [], [], (f"event {n}: message_id {_show(message_id)} "
                        f"{_text_problem(message_id) or f'is over {MAX_MESSAGE_ID} characters'}")
        if not isinstance(event, str):  # a list or an object is no event type at all
            return [], [], f"event {n}: event {_show(event)} is not one of {allowed}"
        if not isinstance(detail, str):
            return [], [], f"event {n}: detail {_show(detail)} is not a string"
        if len(detail) > MAX_DETAIL or _text_problem(detail):
            return [], [], f"event {n}: detail {_text_problem(detail) or f'is over {MAX_DETAIL} characters'}"
        at = _parse_at(entry.get("at"))
        if at is None:
            return [], [], f"event {n}: at {_show(entry.get('at'))} is not an RFC 3339 time (2026-11-30T10:00:00Z)"
        if not now - AT_MAX_AGE <= at <= now + AT_MAX_AHEAD:
            return [], [], (f"event {n}: at {entry['at']} is outside {now - AT_MAX_AGE:%Y-%m-%dT%H:%M:%SZ} .. "
                        f"{now + AT_MAX_AHEAD:%Y-%m-%dT%H:%M:%SZ} (at most 7 days old, 5 minutes ahead of our clock)")
        items.append({"message_id": message_id, "event": event, "at": at, "ref": RELAY_REF_PREFIX + event_id,
                      "detail": detail})
    return items, ignored, None


POOL_SIZE = 8  # `sender web --pool-size`: the most ledger connections the service holds (docs/pgbouncer.md)


def open_pool(database_url: str, size: int = POOL_SIZE) -> ConnectionPool:
    """Autocommit ledger connections, as sender.ledger.connection makes them (PgBouncer-safe: no startup options, no
    server-side prepared statements), shared by the requests: at most `size`."""
    return ConnectionPool(database_url, min_size=1, max_size=size, open=True, timeout=10,
                          kwargs={"autocommit": True, "connect_timeout": db.CONNECT_TIMEOUT_S,
                                  "prepare_threshold": None, "application_name": "sendhost-web"})


MAX_CONNECTIONS = 1000  # past it uvicorn answers 503 at once; well under the file descriptors we ask for below
MAX_HEADER_BYTES = 16 * 1024  # a request line with a token and a browser's headers fit many times over


def _raise_fd_limit(wanted: int) -> None:
    """Lift the soft open-files limit toward the hard one: at 1,024 (a common default) a few hundred slow clients
    and the pool would exhaust it, and every accept() after that fails."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signals to serve(): two servers share one process, and each would otherwise take
    SIGTERM from the other."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def serve(database_url: str, keys: WebKeys, host: str, port: int, metrics_host: str, metrics_port: int,
          max_connections: int = MAX_CONNECTIONS, pool_size: int = POOL_SIZE) -> None:
    """Serve the public app on host:port and /metrics/ on metrics_host:metrics_port until SIGINT/SIGTERM (uvicorn
    finishes the requests in flight)."""
    _raise_fd_limit(max_connections + 256)
    limit_log_rate()
    with open_pool(database_url, pool_size) as pool:
        metrics = ledger_metrics(pool)
        # no access log: the path carries the token, and our own lines say what each request did
        # An idle keep-alive connection outlives the proxy's (nginx keeps upstream ones 60 s): a server that closed
        # first would race the proxy reusing it, and that request would fail.
        public = _Server(uvicorn.Config(
            create_app(pool, keys, metrics), host=host, port=port, access_log=False, log_config=None,
            server_header=False, timeout_graceful_shutdown=10, timeout_keep_alive=75, http=GuardedH11Protocol,
            limit_concurrency=max_connections, h11_max_incomplete_event_size=MAX_HEADER_BYTES))
        private = _Server(uvicorn.Config(
            create_metrics_app(metrics), host=metrics_host, port=metrics_port, access_log=False, log_config=None,
            server_header=False, timeout_graceful_shutdown=5, http=GuardedH11Protocol, limit_concurrency=64,
            h11_max_incomplete_event_size=MAX_HEADER_BYTES))
        servers = (public, private)

        def stop(sig: int, frame: FrameType | None) -> None:
            for server in servers:
                server.handle_exit(sig, frame)

        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, stop)

        async def both() -> None:
            # one failing to start (its port taken) stops the other: half a service is not what was asked for
            tasks = [asyncio.create_task(server.serve()) for server in servers]
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for server in servers:
                server.should_exit = True
            await asyncio.gather(*tasks, return_exceptions=True)
            for task in done:
                task.result()

        asyncio.run(both())
