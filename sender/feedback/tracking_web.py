"""The tracking routes of the feedback web service (docs/tracking.md), served on the campaign's own tracking domain:

    GET|HEAD /c/<token>   a redirect (302) to link i of the token's row, as its body is stored; the click recorded
                          with its verdict (sender.feedback.engagement)
    GET      /o/<token>   the 1x1 open image; the open recorded with its verdict

Never an open redirect: a token names a row and the index of one of that row's own links, tagged with the
unsubscribe key; a forged or altered token, a row never sent, or an index past the row's links is a 404 that says
nothing more. A click or an open never changes a row's status or its sequence.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Callable

from psycopg_pool import ConnectionPool
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from sender.feedback.clicks import follow
from sender.feedback.engagement import Hit, classify_open
from sender.ledger.events import Feedback
from sender.ledger.store import Ledger

log = logging.getLogger("sendhost.sender.web")

# The smallest transparent GIF
PIXEL = base64.b64decode("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7")
PRIVATE = {"Cache-Control": "no-store, private", "Referrer-Policy": "no-referrer"}


def _not_found() -> Response:
    return PlainTextResponse("not found\n", 404, headers={"Cache-Control": "no-store"})


def tracking_routes(pool: ConnectionPool, link_of: Callable[[str], tuple[uuid.UUID, int] | None],
                    open_of: Callable[[str], uuid.UUID | None], count: Callable[[str, str], None]) -> list[Route]:
    """The /c and /o routes over `pool`; `link_of` and `open_of` verify a token (None: not ours); `count(kind,
    verdict)` counts each request in the process's metrics."""

    def click(token: str, method: str, user_agent: str) -> str | None:
        named = link_of(token)
        if named is None:
            return None  # not ours: no query at all
        with pool.connection() as conn:
            followed = follow(Feedback(Ledger(conn)), named, method, user_agent)
        if followed is None:
            return None
        count("click", followed.verdict.value)
        log.info("click: row %d link %d: %s%s", followed.row, followed.link + 1, followed.verdict,
                 f" ({followed.rule})" if followed.rule else "")
        return followed.target

    def opened(token: str, method: str, user_agent: str) -> bool:
        key = open_of(token)
        if key is None:
            return False
        with pool.connection() as conn:
            feedback = Feedback(Ledger(conn))
            row = feedback.tracked_row(key)
            if row is None:
                return False
            verdict, rule = classify_open(Hit(method, user_agent, (row.now - row.accepted_at).total_seconds()))
            feedback.record_engagement(row.id, "open", None, verdict.value, rule)
        count("open", verdict.value)
        return True

    async def click_route(request: Request) -> Response:
        target = await run_in_threadpool(click, request.path_params["token"], request.method,
                                         request.headers.get("user-agent", ""))
        if target is None:
            count("click", "unknown")
            return _not_found()
        return RedirectResponse(target, 302, headers=PRIVATE)

    async def open_route(request: Request) -> Response:
        if not await run_in_threadpool(opened, request.path_params["token"], request.method,
                                       request.headers.get("user-agent", "")):
            count("open", "unknown")
            return _not_found()
        return Response(PIXEL, media_type="image/gif", headers=PRIVATE)

    return [Route("/c/{token}", click_route, methods=["GET"]),  # Starlette answers HEAD on a GET route too
            Route("/o/{token}", open_route, methods=["GET"])]

