"""`sendhost sender web` under uvicorn on loopback, against a real ledger: RFC 8058 one-click unsubscribe, the
confirm page in a real headless Chromium, bad tokens, relay events with an HMAC, and 1,000 concurrent clicks."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import secrets
import socket
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psycopg
import pytest

from sender.ledger.events import Feedback
from sender.sending.tokens import make_row_id_token, make_token
from tests.sender.web_server import WebServer, row_token, sent_row, signed, web_server
from tests.support.cdp import chromium_page
from tests.support.chromium import chromium_or_skip

ONE_CLICK = {"content": b"List-Unsubscribe=One-Click",
             "headers": {"Content-Type": "application/x-www-form-urlencoded"}}


def _changes(database_url: str) -> tuple[int, ...]:
    """Everything a request could have written."""
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT (SELECT count(*) FROM sender_suppressions), (SELECT count(*) FROM sender_feedback),"
                           " (SELECT count(*) FROM sender_events), (SELECT count(*) FROM sender_emails "
                           "WHERE status <> 'sent')").fetchone()
    assert row is not None
    return tuple(int(n) for n in row)


def test_one_click_post_suppresses_and_a_resend_is_refused(web: WebServer, feedback: Feedback) -> None:
    row, _ = sent_row(feedback, "L1", "alice@rcpt.example")
    feedback.ledger.enqueue(lead="L1", step=2, address="alice@rcpt.example", group="sales", subject="Again", text="x")
    token = row_token(feedback, row)
    for _ in range(2):  # idempotent: a second click answers the same
        response = httpx.post(f"{web.base}/u/{token}", **ONE_CLICK)
        assert response.status_code == 200, response.text
    assert feedback.ledger.is_suppressed("alice@rcpt.example")
    shown = feedback.ledger.show("L1", 1)
    later = feedback.ledger.show("L1", 2)
    assert shown is not None and later is not None
    # the unsubscribe ends the lead's sequence (its step 2 cancelled), then suppresses the address
    assert (shown.row["status"], later.row["status"]) == ("unsubscribed", "cancelled")
    assert feedback.ledger.enqueue(lead="L9", step=1, address="Alice@rcpt.example", group="sales", subject="Hi",
                            text="x") == "suppressed"
    assert "alice@rcpt.example" not in web.log()


def test_a_get_alone_never_unsubscribes(web: WebServer, feedback: Feedback, database_url: str) -> None:
    row, _ = sent_row(feedback, "L1", "alice@rcpt.example")
    token = row_token(feedback, row)
    before = _changes(database_url)
    page = httpx.get(f"{web.base}/u/{token}")
    assert page.status_code == 200 and "<form method=post" in page.text and "One-Click" in page.text
    assert "alice@rcpt.example" not in page.text
    # a POST without the RFC 8058 body is not a click either
    assert httpx.post(f"{web.base}/u/{token}", content=b"x=y").status_code == 400
    assert _changes(database_url) == before
    assert not feedback.ledger.is_suppressed("alice@rcpt.example")


def test_forged_altered_and_expired_tokens_change_nothing(web: WebServer, feedback: Feedback,
                                                          database_url: str) -> None:
    row, _ = sent_row(feedback, "L1", "alice@rcpt.example")
    good = row_token(feedback, row)
    altered = good[:-3] + ("AAA" if good[-3:] != "AAA" else "BBB")
    other_row = row_token(feedback, row)[:-1]  # truncated
    forged = row_token(feedback, row, secrets.token_bytes(32))
    expired = row_token(feedback, row, secrets.token_bytes(32))  # made with a key rotated out: no longer configured
    unknown_row = make_token(feedback.ledger.unsubscribe_key(), uuid.uuid4())
    before = _changes(database_url)
    for token in (altered, other_row, forged, expired, unknown_row, "", "%00", "x" * 500):
        for method in ("GET", "POST"):
            response = httpx.request(method, f"{web.base}/u/{token}", **ONE_CLICK)
            assert response.status_code == 404, (token, method, response.status_code)
    assert _changes(database_url) == before
    assert not feedback.ledger.is_suppressed("alice@rcpt.example")


def test_the_previous_key_still_works_while_rotating(web: WebServer, feedback: Feedback) -> None:
    row, _ = sent_row(feedback, "L1", "alice@rcpt.example")
    token = row_token(feedback, row, web.previous_key)
    assert httpx.post(f"{web.base}/u/{token}", **ONE_CLICK).status_code == 200
    assert feedback.ledger.is_suppressed("alice@rcpt.example")


def test_chromium_opens_the_page_clicks_confirm_and_the_address_is_suppressed(
        web: WebServer, feedback: Feedback, tmp_path: Path) -> None:
    binary = chromium_or_skip()
    row, _ = sent_row(feedback, "L1", "alice@rcpt.example")
    url = f"{web.base}/u/{row_token(feedback, row)}"
    with chromium_page(binary, tmp_path / "profile") as page:
        page.navigate(url)
        assert page.evaluate("document.getElementById('confirm').textContent") == "Unsubscribe"
        assert not feedback.ledger.is_suppressed("alice@rcpt.example")  # opening the page changed nothing
        page.evaluate("document.getElementById('confirm').click()")
        page.wait_for("document.getElementById('done') !== null")
    assert feedback.ledger.is_suppressed("alice@rcpt.example")
    shown = feedback.ledger.show("L1", 1)
    assert shown is not None and shown.row["status"] == "unsubscribed"


@pytest.mark.slow
def test_a_thousand_concurrent_clicks_leave_one_suppression(web: WebServer, feedback: Feedback,
                                                            database_url: str) -> None:
    row, _ = sent_row(feedback, "L1", "alice@rcpt.example")
    url = f"{web.base}/u/{row_token(feedback, row)}"

    async def click_all() -> list[object]:
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
        async with httpx.AsyncClient(limits=limits, timeout=120) as client:
            responses = await asyncio.gather(*(client.post(url, **ONE_CLICK) for _ in range(1000)),
                                             return_exceptions=True)
        return [r.status_code if isinstance(r, httpx.Response) else repr(r) for r in responses]

    answers = asyncio.run(click_all())
    assert answers == [200] * 1000, ({str(a) for a in answers}, web.log()[-3000:])
    with psycopg.connect(database_url) as conn:
        counts = conn.execute(
            "SELECT (SELECT count(*) FROM sender_suppressions), "
            "(SELECT count(*) FROM sender_feedback WHERE event = 'unsubscribed'), "
            "(SELECT count(*) FROM sender_events WHERE kind = 'unsubscribed')").fetchone()
    assert counts == (1, 1, 1)


def _at(now: float, delta_s: float = 0) -> str:
    return datetime.fromtimestamp(now + delta_s, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _with_times(body: bytes, now: float) -> bytes:
    """`<now>`, `<8d>` (8 days ago) and `<10m>` (10 minutes ahead) in a body as RFC 3339 times (without the zone)."""
    for tag, delta_s in ((b"<now>", 0), (b"<8d>", -8 * 86400), (b"<10m>", 600)):
        body = body.replace(tag, _at(now, delta_s).encode())
    return body


def _legacy_signed(key: bytes, body: bytes) -> dict[str, str]:
    """The first form, no time: `sha256=<hex HMAC of the body>`."""
    return {"X-Sendhost-Signature": "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()}


def _post_events(web: WebServer, events: object) -> httpx.Response:
    body = json.dumps(events).encode()
    return httpx.post(f"{web.base}/events", content=body, headers=signed(web.events_key, body))


def test_events_apply_through_the_rank_guard(web: WebServer, feedback: Feedback) -> None:
    _row, message_id = sent_row(feedback, "L1", "alice@rcpt.example")
    now = time.time()
    batch = [{"id": "e1", "message_id": message_id, "event": "delivered", "at": _at(now) + "Z"},
             {"id": "e2", "message_id": message_id.strip("<>"), "event": "sent", "at": _at(now, -60) + "Z"},
             {"id": "e3", "message_id": "<nobody@nowhere>", "event": "bounced", "at": _at(now) + "Z"}]
    response = _post_events(web, batch)
    assert response.status_code == 200, response.text
    assert response.json() == {"results": ["applied", "recorded", "no_row"]}
    again = _post_events(web, batch)
    assert again.json() == {"results": ["replay", "replay", "no_row"]}
    shown = feedback.ledger.show("L1", 1)
    assert shown is not None and shown.row["status"] == "delivered"


def test_a_batch_applies_its_bounces_and_answers_which_types_it_ignored(web: WebServer, feedback: Feedback) -> None:
    # A relay retries a refused batch: one vendor's event must not hold back the bounce beside it for ever (issue 39).
    _row, message_id = sent_row(feedback, "L1", "alice@rcpt.example")
    now = time.time()
    batch = [{"id": "e1", "message_id": message_id, "event": "processed", "at": _at(now) + "Z"},
             {"id": "e2", "message_id": message_id, "event": "bounced", "at": _at(now) + "Z", "detail": "5.1.1"},
             {"id": "e3", "event": "dropped"}]
    response = _post_events(web, batch)
    assert response.status_code == 200, response.text
    assert response.json() == {"results": ["applied"],
                               "ignored": [{"id": "e1", "event": "processed"}, {"id": "e3", "event": "dropped"}]}
    shown = feedback.ledger.show("L1", 1)
    assert shown is not None and shown.row["status"] == "bounced"


def test_a_relays_opened_and_clicked_are_recorded_and_change_nothing(web: WebServer, feedback: Feedback) -> None:
    # issue 41: informational, under the rank guard: the row stays `delivered`, its sequence goes on
    _row, message_id = sent_row(feedback, "L1", "alice@rcpt.example")
    now = time.time()
    batch = [{"id": "e1", "message_id": message_id, "event": "delivered", "at": _at(now, -60) + "Z"},
             {"id": "e2", "message_id": message_id, "event": "opened", "at": _at(now, -30) + "Z"},
             {"id": "e3", "message_id": message_id, "event": "clicked", "at": _at(now) + "Z", "detail": "link 1"}]
    response = _post_events(web, batch)
    assert response.status_code == 200, response.text
    assert response.json() == {"results": ["applied", "recorded", "recorded"]}
    assert _post_events(web, batch).json() == {"results": ["replay", "replay", "replay"]}
    shown = feedback.ledger.show("L1", 1)
    assert shown is not None and shown.row["status"] == "delivered"
    assert [(f["event"], f["source"]) for f in shown.feedback] == [("delivered", "webhook"), ("opened", "webhook"),
                                                                   ("clicked", "webhook")]
    bad = _post_events(web, [{"id": "e4", "message_id": message_id, "event": "clicked", "at": "whenever"}])
    assert bad.status_code == 400 and "event 0: at 'whenever' is not an RFC 3339 time" in bad.text


def test_a_relay_cannot_report_what_only_reading_a_reply_tells(web: WebServer, feedback: Feedback) -> None:
    # `left` and `colleague_replied` end a sequence (schema 15): the inbox's and a person's to say, never a relay's.
    _row, message_id = sent_row(feedback, "L1", "alice@rcpt.example")
    now = time.time()
    batch = [{"id": "e1", "message_id": message_id, "event": "left", "at": _at(now) + "Z"},
             {"id": "e2", "message_id": message_id, "event": "colleague_replied", "at": _at(now) + "Z"}]
    response = _post_events(web, batch)
    assert response.status_code == 200, response.text
    assert response.json() == {"results": [], "ignored": [{"id": "e1", "event": "left"},
                                                           {"id": "e2", "event": "colleague_replied"}]}
    shown = feedback.ledger.show("L1", 1)
    assert shown is not None and shown.row["status"] == "sent"


def test_a_replay_is_the_relays_event_id_whatever_its_time(web: WebServer, feedback: Feedback,
                                                           database_url: str) -> None:
    row, message_id = sent_row(feedback, "L1", "alice@rcpt.example")
    now = time.time()
    first = {"id": "evt-1", "message_id": message_id, "event": "deferred", "at": _at(now, -120) + "Z",
             "detail": "451 try later"}
    assert _post_events(web, first).json() == {"results": ["recorded"]}
    # the relay retries the same event stamped anew: one event, however many times it arrives
    assert _post_events(web, {**first, "at": _at(now) + "Z"}).json() == {"results": ["replay"]}
    # a second deferral at the same time is a second event: its own id
    assert _post_events(web, {**first, "id": "evt-2"}).json() == {"results": ["recorded"]}
    # the key is (row, event, id): a relay whose ids name the message has its bounce applied after the deferral
    assert _post_events(web, {**first, "event": "bounced"}).json() == {"results": ["applied"]}
    with psycopg.connect(database_url) as conn:
        refs = conn.execute("SELECT event, ref FROM sender_feedback WHERE email_id = %s ORDER BY id", (row,)).fetchall()
    assert refs == [("deferred", "relay:evt-1"), ("deferred", "relay:evt-2"), ("bounced", "relay:evt-1")]


def test_the_replay_key_survives_a_restart_of_the_service(tmp_path: Path, feedback: Feedback,
                                                          database_url: str) -> None:
    _row, message_id = sent_row(feedback, "L1", "alice@rcpt.example")
    event = {"id": "evt-9", "message_id": message_id, "event": "bounced", "at": _at(time.time()) + "Z"}
    key = secrets.token_bytes(32)
    with web_server(tmp_path / "first", database_url, events_key=key) as first:
        assert _post_events(first, event).json() == {"results": ["applied"]}
    # a new process remembers nothing: the key is in the ledger's sender_feedback
    with web_server(tmp_path / "second", database_url, events_key=key) as second:
        assert _post_events(second, {**event, "at": _at(time.time(), 5) + "Z"}).json() == {"results": ["replay"]}
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM sender_feedback WHERE event = 'bounced'").fetchone() == (1,)


def test_the_legacy_signature_is_accepted_only_when_allowed(tmp_path: Path, feedback: Feedback,
                                                             database_url: str) -> None:
    _row, message_id = sent_row(feedback, "L1", "alice@rcpt.example")
    body = json.dumps({"id": "e1", "message_id": message_id, "event": "delivered",
                       "at": _at(time.time()) + "Z"}).encode()
    with web_server(tmp_path, database_url, ["--events-legacy-signatures"]) as web:
        wrong = _legacy_signed(b"k" * 32, body)
        assert httpx.post(f"{web.base}/events", content=body, headers=wrong).status_code == 401
        response = httpx.post(f"{web.base}/events", content=body, headers=_legacy_signed(web.events_key, body))
        assert response.json() == {"results": ["applied"]}, response.text
        # the new form still works beside it, and expires as ever
        assert httpx.post(f"{web.base}/events", content=body,
                          headers=signed(web.events_key, body, int(time.time()) - 400)).status_code == 401


def test_the_signature_tolerance_is_a_setting(tmp_path: Path, feedback: Feedback, database_url: str) -> None:
    _row, message_id = sent_row(feedback, "L1", "alice@rcpt.example")
    body = json.dumps({"id": "e1", "message_id": message_id, "event": "delivered",
                       "at": _at(time.time()) + "Z"}).encode()
    with web_server(tmp_path, database_url, ["--events-signature-tolerance", "30"]) as web:
        refused = httpx.post(f"{web.base}/events", content=body,
                             headers=signed(web.events_key, body, int(time.time()) - 120))
        assert refused.status_code == 401 and "more than 30 s" in refused.text, refused.text
        accepted = httpx.post(f"{web.base}/events", content=body, headers=signed(web.events_key, body))
        assert accepted.json() == {"results": ["applied"]}, accepted.text


def test_a_signature_within_the_tolerance_and_one_of_several_v1_is_accepted(web: WebServer,
                                                                             feedback: Feedback) -> None:
    _row, message_id = sent_row(feedback, "L1", "alice@rcpt.example")
    body = json.dumps({"id": "e1", "message_id": message_id, "event": "delivered",
                       "at": _at(time.time()) + "Z"}).encode()
    t = int(time.time()) - 200  # a retry queued for a while: still inside the 5 minutes
    header = signed(web.events_key, body, t)["X-Sendhost-Signature"]
    rotating = f"t={t},v1={'0' * 64}," + header.split(",")[1]  # the relay signs with an old and a new key
    response = httpx.post(f"{web.base}/events", content=body, headers={"X-Sendhost-Signature": rotating})
    assert response.json() == {"results": ["applied"]}, response.text


@pytest.mark.parametrize(("body", "how", "status"), [
    (b'{"message_id": "<m>", "event": "bounced", "at": "<now>Z"}', "wrong", 401),
    (b'{"message_id": "<m>", "event": "bounced", "at": "<now>Z"}', "none", 401),
    (b"{not json", "right", 400),
    (b'{"message_id": "<m>", "event": "bounced", "at": "yesterday"}', "right", 400),
    (b'{"id": "e1", "event": "bounced", "at": "<now>Z"}', "right", 400),
    (b'[{"message_id": "<m>", "event": "bounced", "at": "<now>Z"}, 7]', "right", 400),
    (b'{"message_id": "<m>", "event": ["bounced"], "at": "<now>Z"}', "right", 400),
    (b'{"message_id": "<m>", "event": {"a": 1}, "at": "<now>Z"}', "right", 400),
    (b'{"message_id": "<m>\\u0000", "event": "bounced", "at": "<now>Z"}', "right", 400),
    (b'{"message_id": "<m>", "event": "bounced", "at": "<now>Z", "detail": "a\\u0000b"}', "right",
     400),
    (b'{"message_id": "<m>", "event": "bounced", "at": "<now>Z", "detail": "\\ud800"}', "right",
     400),
    (b'{"message_id": "<m>", "event": "bounced", "at": "<now>Z", "detail": ["x"]}', "right", 400),
    (b'{"message_id": "<m>", "event": "bounced", "at": "<now>\\u0000Z"}', "right", 400),
    (b'[{"message_id": "<m>", "event": "bounced", "at": "<now>Z"}, '
     b'{"message_id": "<m>", "event": ["bounced"], "at": "<now>Z"}]', "right", 400),
    (b'[{"message_id": "<m>", "event": "bounced", "at": "<now>Z"}, '
     b'{"message_id": "<m>", "event": "bounced", "at": "<now>Z", "detail": "\\u0000"}]', "right",
     400),
    (b"[" * 100_000 + b"]" * 100_000, "right", 400),
    (b'{"message_id": "<m>", "event": "bounced", "at": "<now>Z"}', "legacy", 401),
    (b'{"message_id": "<m>", "event": "bounced", "at": "<now>Z"}', "expired", 401),
    (b'{"message_id": "<m>", "event": "bounced", "at": "<now>Z"}', "ahead", 401),
    (b'{"message_id": "<m>", "event": "bounced", "at": "<now>Z"}', "no-time", 401),
    (b'{"message_id": "<m>", "event": "bounced", "at": "<now>Z"}', "signed-other-time", 401),
    (b'{"message_id": "<m>", "event": "bounced", "at": "<now>Z", "id": ""}', "right", 400),
    (b'{"message_id": "<m>", "event": "bounced", "at": "<now>Z", "id": 7}', "right", 400),
    (b'{"message_id": "<m>", "event": "bounced", "at": "<now>Z", "id": "a\\u0000b"}', "right", 400),
    (b'{"message_id": "<m>", "event": "bounced", "at": "<8d>Z"}', "right", 400),
    (b'{"message_id": "<m>", "event": "bounced", "at": "<10m>Z"}', "right", 400),
    (b'{"message_id": "<m>", "event": "bounced", "at": "2099-01-01T00:00:00Z"}', "right", 400),
    (b'[{"message_id": "<m>", "event": "bounced", "at": "<now>Z"}, '
     b'{"message_id": "<m>", "event": "delivered", "at": "<8d>Z"}]', "right", 400),
], ids=["wrong-hmac", "no-hmac", "bad-json", "bad-time", "no-message-id", "half-bad-batch",
        "event-a-list", "event-an-object", "nul-message-id", "nul-detail", "surrogate-detail", "detail-a-list",
        "nul-time", "good-then-list-event", "good-then-nul-detail", "deep-json", "legacy-sha256-form",
        "signature-expired", "signature-ahead", "signature-without-time", "signature-over-another-time", "empty-id",
        "id-a-number", "nul-id", "at-8-days-old", "at-10-minutes-ahead", "at-2099", "good-then-stale"])
def test_bad_events_change_nothing(web: WebServer, feedback: Feedback, database_url: str, body: bytes, how: str,
                                   status: int) -> None:
    _row, message_id = sent_row(feedback, "L1", "alice@rcpt.example")
    now = int(time.time())
    body = _with_times(body.replace(b"<m>", message_id.encode()), now)
    if b'"id"' not in body:  # each event its own id, so that what is refused is what the case is about
        body = body.replace(b'{"message_id"', b'{"id": "evt", "message_id"')
    headers = {"wrong": signed(secrets.token_bytes(32), body), "none": {},
               "right": signed(web.events_key, body),
               "legacy": _legacy_signed(web.events_key, body),
               "expired": signed(web.events_key, body, now - 400), "ahead": signed(web.events_key, body, now + 400),
               "no-time": {"X-Sendhost-Signature": signed(web.events_key, body)["X-Sendhost-Signature"].split(",")[1]},
               "signed-other-time": {"X-Sendhost-Signature": f"t={now - 1}," + signed(
                   web.events_key, body, now)["X-Sendhost-Signature"].split(",")[1]},
               }[how]
    before = _changes(database_url)
    response = httpx.post(f"{web.base}/events", content=body, headers=headers)
    assert response.status_code == status, response.text
    assert _changes(database_url) == before
    assert web.process.poll() is None
    metrics = httpx.get(f"{web.metrics_base}/metrics/").text
    assert "sendhost_feedback_events_total" in metrics


def test_healthz(web: WebServer) -> None:
    response = httpx.get(f"{web.base}/healthz")
    assert (response.status_code, response.text) == (200, "ok\n")


@pytest.mark.parametrize(("args", "words"), [
    (["web", "--listen", "nonsense"], "HOST:PORT"),
    (["web", "--events-signature-tolerance", "0"], "--events-signature-tolerance"),
    (["web", "--events-key-file", "/nonexistent/events.key"], "--events-key-file"),
    (["web", "--previous-key-file", "/nonexistent/old.key"], "--previous-key-file"),
    (["web", "--listen", "0.0.0.0:8025", "--metrics-listen", "127.0.0.1:8025"], "--metrics-listen"),
])
def test_bad_options_exit_2_naming_the_fix(database_url: str, feedback: Feedback, tmp_path: Path, args: list[str],
                                          words: str) -> None:
    import os
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    result = subprocess.run([sys.executable, "-c", "from toolkit.cli import main; main()", "sender",
                             "--database-url", database_url, *args], capture_output=True, text=True, timeout=60,
                            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO_ROOT),
                                               "SENDHOST_STATE_DIR": str(tmp_path / "state")})
    assert result.returncode == 2, result.stderr
    assert words in result.stderr and "Traceback" not in result.stderr


def test_an_oversized_events_body_is_refused_before_it_is_read(web: WebServer, feedback: Feedback,
                                                               database_url: str) -> None:
    body = b"[" + b" " * (2 << 20) + b"]"
    before = _changes(database_url)
    response = httpx.post(f"{web.base}/events", content=body, headers=signed(web.events_key, body))
    assert response.status_code == 413
    assert _changes(database_url) == before and web.process.poll() is None


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize("path", ["/u/{token}", "/events"])
def test_a_64_mib_chunked_post_is_refused_before_it_is_read(web: WebServer, feedback: Feedback, database_url: str,
                                                            path: str) -> None:
    row, _ = sent_row(feedback, "L1", "alice@rcpt.example")
    url = web.base + path.format(token=row_token(feedback, row))
    before, rss_before = _changes(database_url), _rss_kib(web.process.pid)
    sent = 0

    def body() -> Iterator[bytes]:  # no length: httpx sends it chunked, as an attacker would
        nonlocal sent
        chunk = b"List-Unsubscribe=One-Click&" + b"x" * (64 * 1024 - 27)
        for _ in range(1024):  # 64 MiB
            sent += len(chunk)
            yield chunk

    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if path == "/events":
        headers.update(signed(web.events_key, b""))
    try:
        response = httpx.post(url, content=body(), headers=headers, timeout=30)
        status: int | str = response.status_code
    except httpx.TransportError as exc:  # the server closed on us mid-body, having answered first
        status = type(exc).__name__
    assert status in (413, 411, "WriteError", "RemoteProtocolError", "ReadError"), status
    growth_mib = (_rss_kib(web.process.pid) - rss_before) / 1024
    assert growth_mib < 16, growth_mib
    assert sent < 64 << 20 or status in (413, 411)  # either it stopped us, or it answered a refusal
    assert _changes(database_url) == before and not feedback.ledger.is_suppressed("alice@rcpt.example")
    assert httpx.get(f"{web.base}/healthz").status_code == 200


def _half_sent(port: int, data: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(data)
    return sock


def _closed_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the server closed `sock` (read EOF or reset), or None if it is still open after `seconds`."""
    started = time.monotonic()
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return time.monotonic() - started


@pytest.mark.slow
def test_half_sent_requests_are_closed_within_30_seconds(web: WebServer, feedback: Feedback) -> None:
    row, _ = sent_row(feedback, "L1", "alice@rcpt.example")
    token = row_token(feedback, row)
    port = int(web.base.rsplit(":", 1)[1])
    socks = {
        "nothing sent": _half_sent(port, b""),
        "half a header": _half_sent(port, f"POST /u/{token} HTTP/1.1\r\nHost: x\r\nContent-Ty".encode()),
        "half a body": _half_sent(port, f"POST /u/{token} HTTP/1.1\r\nHost: x\r\nContent-Length: 26\r\n"
                                        "Content-Type: application/x-www-form-urlencoded\r\n\r\nList-Unsub".encode()),
        "half a chunked body": _half_sent(port, f"POST /u/{token} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
                                                "chunked\r\n\r\n1a\r\nList-Unsub".encode()),
    }
    started = time.monotonic()
    closed = {name: _closed_within(sock, max(30 - (time.monotonic() - started), 0.01))
              for name, sock in socks.items()}
    for sock in socks.values():
        sock.close()
    assert all(seconds is not None for seconds in closed.values()), closed
    assert time.monotonic() - started < 30
    assert not feedback.ledger.is_suppressed("alice@rcpt.example")
    assert web.process.poll() is None and httpx.get(f"{web.base}/healthz").status_code == 200


@pytest.mark.slow
def test_300_slow_connections_leave_healthz_answering_and_log_a_few_lines(web: WebServer) -> None:
    port = int(web.base.rsplit(":", 1)[1])
    slow = [_half_sent(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ") for _ in range(300)]
    try:
        times = []
        for _ in range(20):
            started = time.monotonic()
            response = httpx.get(f"{web.base}/healthz", timeout=5)
            times.append(time.monotonic() - started)
            assert response.status_code == 200
            time.sleep(0.1)
        assert max(times) < 1, times
        started = time.monotonic()
        still_open = [s for s in slow if _closed_within(s, max(30 - (time.monotonic() - started), 0.1)) is None]
        assert not still_open, f"{len(still_open)} of 300 slow connections still open after 30 s"
    finally:
        for sock in slow:
            sock.close()
    time.sleep(0.5)
    lines = [line for line in web.log().splitlines() if "did not arrive in time" in line]
    assert 1 <= len(lines) <= 21, len(lines)  # the burst, then nothing for the rest of the window


def test_the_confirm_page_refuses_framing(web: WebServer, feedback: Feedback) -> None:
    row, _ = sent_row(feedback, "L1", "alice@rcpt.example")
    page = httpx.get(f"{web.base}/u/{row_token(feedback, row)}")
    assert page.status_code == 200
    assert page.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]


def test_only_the_canonical_spelling_of_a_token_is_accepted(web: WebServer, feedback: Feedback,
                                                            database_url: str) -> None:
    row, _ = sent_row(feedback, "L1", "alice@rcpt.example")
    good = row_token(feedback, row)
    before = _changes(database_url)
    # the base64 decoder skips characters outside its alphabet: each of these decodes to the good token's bytes
    for token in (good + "!!!", good + "%20", good + "=", good[:8] + "!" + good[8:], good + "%0A", good + "AAAA"):
        for method in ("GET", "POST"):
            response = httpx.request(method, f"{web.base}/u/{token}", **ONE_CLICK)
            assert response.status_code == 404, (token, method, response.status_code)
    assert _changes(database_url) == before
    assert httpx.get(f"{web.base}/u/{good}").status_code == 200


def _forget_rows_after(database_url: str, row: int) -> None:
    """What a restore from a dump taken before `row` was made does: the row and all after it gone, and the id
    sequence back where the dump left it, so the next row made takes `row`'s id again."""
    with psycopg.connect(database_url) as conn:
        for table in ("sender_feedback", "sender_events", "sender_send_log", "sender_sent"):
            conn.execute(f"DELETE FROM {table} WHERE email_id >= %s", (row,))
        conn.execute("DELETE FROM sender_emails WHERE id >= %s", (row,))
        conn.execute("SELECT setval(pg_get_serial_sequence('sender_emails', 'id'), %s, false)", (row,))


def test_a_link_from_before_a_restore_never_reaches_the_row_that_took_its_id(web: WebServer, feedback: Feedback,
                                                                             database_url: str) -> None:
    alice, _ = sent_row(feedback, "L1", "alice@rcpt.example")
    alices_link = row_token(feedback, alice)
    _forget_rows_after(database_url, alice)
    bob, _ = sent_row(feedback, "L2", "bob@rcpt.example")
    assert bob == alice  # the id came round again
    for method in ("GET", "POST"):
        assert httpx.request(method, f"{web.base}/u/{alices_link}", **ONE_CLICK).status_code == 404
    assert not feedback.ledger.is_suppressed("bob@rcpt.example")
    shown = feedback.ledger.show("L2", 1)
    assert shown is not None and shown.row["status"] == "sent"
    assert httpx.post(f"{web.base}/u/{row_token(feedback, bob)}", **ONE_CLICK).status_code == 200


def _upgraded_at(database_url: str, moment: str) -> None:
    """The setting version 9's migration writes when it upgrades a ledger (a fresh one has none)."""
    with psycopg.connect(database_url) as conn:
        conn.execute("INSERT INTO sender_settings (name, value) VALUES ('row_id_tokens_before', "
                     f"extract(epoch FROM {moment})::text) ON CONFLICT (name) DO UPDATE SET value = excluded.value")


def test_a_row_id_link_in_mail_sent_before_the_upgrade_works_for_30_days(web: WebServer, feedback: Feedback,
                                                                         database_url: str) -> None:
    key = feedback.ledger.unsubscribe_key()
    alice, _ = sent_row(feedback, "L1", "alice@rcpt.example")
    old_link = make_row_id_token(key, alice)
    # a fresh ledger (made at version 9) never put an id in a link: none counts
    assert httpx.get(f"{web.base}/u/{old_link}").status_code == 404
    _upgraded_at(database_url, "now()")
    bob, _ = sent_row(feedback, "L2", "bob@rcpt.example")  # sent after the upgrade: its mail holds a key token
    assert httpx.post(f"{web.base}/u/{make_row_id_token(key, bob)}", **ONE_CLICK).status_code == 404
    for spelled in (old_link + "!!!", old_link + "%20", old_link.swapcase()):
        assert httpx.post(f"{web.base}/u/{spelled}", **ONE_CLICK).status_code == 404
    assert httpx.get(f"{web.base}/u/{old_link}").status_code == 200
    with psycopg.connect(database_url) as conn:  # 31 days later, alice's mail 40 days old
        conn.execute("UPDATE sender_emails SET attempt_started_at = now() - interval '40 days' WHERE id = %s",
                     (alice,))
    _upgraded_at(database_url, "now() - interval '31 days'")
    assert httpx.post(f"{web.base}/u/{old_link}", **ONE_CLICK).status_code == 404
    assert not feedback.ledger.is_suppressed("alice@rcpt.example")
    _upgraded_at(database_url, "now() - interval '29 days'")
    assert httpx.post(f"{web.base}/u/{old_link}", **ONE_CLICK).status_code == 200
    assert feedback.ledger.is_suppressed("alice@rcpt.example")
    assert not feedback.ledger.is_suppressed("bob@rcpt.example")


def test_metrics_are_served_only_on_their_own_listener(web: WebServer, feedback: Feedback) -> None:
    sent_row(feedback, "L1", "alice@rcpt.example", mailbox="box@sender.example")
    for path in ("/metrics", "/metrics/"):
        assert httpx.get(f"{web.base}{path}").status_code == 404
    text = httpx.get(f"{web.metrics_base}/metrics/").text
    assert 'sendhost_sender_mailbox_sends_7d{mailbox="box@sender.example"}' in text
    assert "sendhost_unsubscribe_requests_total" in text
    # the metrics listener serves nothing of the public one
    assert httpx.get(f"{web.metrics_base}/healthz").status_code == 404
