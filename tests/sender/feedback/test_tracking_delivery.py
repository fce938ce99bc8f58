"""Click tracking end to end (issue 41, "Must hold"): two campaigns sent by the agent through a real aiosmtpd
submission server, one tracking clicks on its own domain and one not; the links are followed from the bytes the
server received, through `sendhost sender web` as a real process, and the click counts land in `campaign status`.
"""

from __future__ import annotations

import email
import email.policy
import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sender import Ledger
from sender.campaigns.spec import load_campaign
from sender.ledger.campaigns import Campaigns, Move
from sender.ledger.events import Feedback
from sender.sending.tokens import make_link_token
from tests.sender.sequences import add_leads, one_pass, rows_by_message_id
from tests.sender.web_server import WebServer, web_server
from tests.sender.world import UNSUBSCRIBE_BASE, World, make_world
from tests.support.cli import run_cli
from tests.support.submission import SubmissionServer

TRACKING_DOMAIN = "t.sender.example"
LINKS = ("https://acme.example/pricing", "https://acme.example/case-study?from=mail")
BODY = ("Hi {{first_name|there}}, our prices: {links[0]}. A story like yours ({links[1]}).\\n\\n"
        "Not for you? {{unsubscribe_url}}")
CAMPAIGN = """\
name: {name}
group: sales
fields: [first_name, company]
{tracking}steps:
  - subject: "Hello {{first_name|there}}"
    body: "{body}"
  - delay: 3d
    body: "Following up, {{first_name|there}}."
"""
BROWSER = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36"
SCANNER = "Mozilla/5.0 (compatible; Barracuda Sentinel link protection)"
CLICK_RE = re.compile(rf"https://{re.escape(TRACKING_DOMAIN)}/c/([A-Za-z0-9_-]+)")


@pytest.fixture
def world(tmp_path: Path, database_url: str, redis_url: str, submission: SubmissionServer) -> World:
    return make_world(tmp_path, database_url, redis_url, submission)


@pytest.fixture
def web(tmp_path: Path, world: World) -> Iterator[WebServer]:
    with web_server(tmp_path / "web", world.database_url) as server:
        yield server


def _campaign(tmp_path: Path, ledger: Ledger, name: str, tracking: str, lead: str) -> None:
    path = tmp_path / f"{name}.yml"
    path.write_text(CAMPAIGN.format(name=name, tracking=tracking, body=BODY.format(links=LINKS)))
    spec = load_campaign(path, {"sales"})
    campaigns = Campaigns(ledger)
    campaigns.apply(spec, path.read_text())
    add_leads(tmp_path, ledger, spec, [(lead, "Ann", "Acme")])
    campaigns.move(name, Move.START)


def _delivered_bodies(world: World) -> dict[str, str]:
    """Each lead's step 1 as the submission server received it: its text part, decoded."""
    rows = rows_by_message_id(world.database_url)
    bodies = {}
    for item in world.server.recorder.snapshot():
        lead, step = rows[item.message_id]
        if step == 1:
            # the bytes as received, read the way a mail app reads them
            message = email.message_from_bytes(item.message.as_bytes(), policy=email.policy.default)
            part = message.get_body(("plain",))
            assert part is not None, item.message_id
            bodies[lead] = part.get_content()
    return bodies


def _engagement(database_url: str) -> list[tuple[int, str, str]]:
    with psycopg.connect(database_url) as conn:
        return [(int(link), str(verdict), str(rule)) for link, verdict, rule in conn.execute(
            "SELECT link, verdict, rule FROM sender_engagement WHERE kind = 'click' ORDER BY id").fetchall()]


def _human_clicks(ledger: Ledger, campaign: str) -> int:
    return sum(w.counts["clicked"] for w in Campaigns(ledger).worked(campaign))


def test_a_link_followed_from_the_delivered_message_redirects_and_counts_once_a_person_clicks(
        tmp_path: Path, world: World, web: WebServer) -> None:
    with Ledger.from_url(world.database_url) as ledger:
        _campaign(tmp_path, ledger, "tracked", f"tracking: {{clicks: true, domain: {TRACKING_DOMAIN}}}\n",
                  "ann@rcpt.example")
        _campaign(tmp_path, ledger, "plain", "", "bob@rcpt.example")
    agent, factory = world.agent()
    one_pass(agent, factory)
    bodies = _delivered_bodies(world)
    assert set(bodies) == {"ann@rcpt.example", "bob@rcpt.example"}, bodies

    # the untracked campaign's message carries its links as written, and no rewritten one
    plain = bodies["bob@rcpt.example"]
    assert all(link in plain for link in LINKS) and TRACKING_DOMAIN not in plain and "/c/" not in plain

    # the tracked one: each link rewritten, in order, the sentence's punctuation kept; the one-click link untouched
    tracked = bodies["ann@rcpt.example"]
    tokens = CLICK_RE.findall(tracked)
    assert len(tokens) == 2 and not any(link in tracked for link in LINKS), tracked
    assert f"https://{TRACKING_DOMAIN}/c/{tokens[0]}. A story" in tracked
    assert f"https://{TRACKING_DOMAIN}/c/{tokens[1]})." in tracked
    assert f"{UNSUBSCRIBE_BASE}/u/" in tracked

    # at delivery, the recipient's gateway walks every link (HEAD, then GET with its own agent): recorded as a
    # scanner's, each answered with the row's own link, none counted
    for index, token in enumerate(tokens):
        head = httpx.head(f"{web.base}/c/{token}", headers={"User-Agent": SCANNER})
        got = httpx.get(f"{web.base}/c/{token}", headers={"User-Agent": SCANNER})
        assert (head.status_code, got.status_code) == (302, 302), got.text
        assert got.headers["location"] == LINKS[index]
    assert [verdict for _, verdict, _ in _engagement(world.database_url)] == ["scanner"] * 4
    with Ledger.from_url(world.database_url) as ledger:
        assert _human_clicks(ledger, "tracked") == 0

    # a minute later a person follows the second link in a browser: redirected to it, and counted
    with psycopg.connect(world.database_url) as conn:
        conn.execute("UPDATE sender_sent SET accepted_at = accepted_at - interval '1 minute'")
    response = httpx.get(f"{web.base}/c/{tokens[1]}", headers={"User-Agent": BROWSER})
    assert response.status_code == 302 and response.headers["location"] == LINKS[1]
    assert _engagement(world.database_url)[-1] == (1, "human", "")
    with Ledger.from_url(world.database_url) as ledger:
        (step1,) = [w for w in Campaigns(ledger).worked("tracked") if w.step == 1]
        assert (step1.sent, step1.counts["clicked"], step1.rate("clicked")) == (1, 1, 1.0)
        status = Campaigns(ledger).status("tracked")
        assert status is not None and [w.counts["clicked"] for w in status.worked] == [1]
        # informational: the row stays `sent` and its lead's step 2 still waits its turn
        shown = ledger.show("ann@rcpt.example", 2, "tracked")
        first = ledger.show("ann@rcpt.example", 1, "tracked")
        assert first is not None and shown is not None
        assert (first.row["status"], shown.row["status"]) == ("sent", "queued")
        assert [e["detail"] for e in first.events if e["kind"] == "clicked"][-1] == "link 2 human"
    # lead show: each link as written and as sent (the token left out), with its clicks by verdict
    shown_json = run_cli("--inventory", str(world.inventory), "lead", "--database-url", world.database_url, "show",
                         "ann@rcpt.example", "--format", "json", cwd=tmp_path)
    assert shown_json.returncode == 0, shown_json.stderr
    (lead,) = json.loads(shown_json.stdout)["leads"]
    assert lead["steps"][0]["links"] == [
        {"link": 1, "original": LINKS[0], "tracked": f"https://{TRACKING_DOMAIN}/c/…", "clicks": {"scanner": 2}},
        {"link": 2, "original": LINKS[1], "tracked": f"https://{TRACKING_DOMAIN}/c/…",
         "clicks": {"human": 1, "scanner": 2}}]
    table = run_cli("--inventory", str(world.inventory), "lead", "--database-url", world.database_url, "show",
                    "ann@rcpt.example", cwd=tmp_path).stdout
    assert LINKS[1] in table and "1 human, 2 scanner" in table
    # /metrics/: what worked per campaign, step and mailbox, and the service's requests by verdict
    scraped = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(httpx.get(f"{web.metrics_base}/metrics/").text)
               for s in family.samples}
    worked = {(dict(labels)["campaign"], dict(labels)["outcome"]): value
              for (name, labels), value in scraped.items() if name == "sendhost_sender_step_rows"}
    assert (worked[("tracked", "sent")], worked[("tracked", "clicked")], worked[("plain", "clicked")]) == (1, 1, 0)
    assert scraped[("sendhost_tracking_requests_total", (("kind", "click"), ("verdict", "scanner")))] == 4
    assert scraped[("sendhost_tracking_requests_total", (("kind", "click"), ("verdict", "human")))] == 1


def test_tokens_that_are_not_a_rows_own_link_get_a_bare_404(tmp_path: Path, world: World, web: WebServer) -> None:
    with Ledger.from_url(world.database_url) as ledger:
        _campaign(tmp_path, ledger, "tracked", f"tracking: {{clicks: true, domain: {TRACKING_DOMAIN}}}\n",
                  "ann@rcpt.example")
        key = ledger.unsubscribe_key()
    agent, factory = world.agent()
    one_pass(agent, factory)
    (token, _) = CLICK_RE.findall(_delivered_bodies(world)["ann@rcpt.example"])
    with Feedback.from_url(world.database_url) as feedback, feedback.ledger.calling("key") as conn:
        (row_key,) = conn.execute("SELECT idempotency_key FROM sender_emails WHERE step = 1").fetchone() or ()
    forged = token[:-2] + ("AA" if token[-2:] != "AA" else "BA")
    for bad in (forged, make_link_token(key, row_key, 2), make_link_token(b"k" * 32, row_key, 0), "x" * 46,
                token + "A"):
        response = httpx.get(f"{web.base}/c/{bad}", headers={"User-Agent": BROWSER})
        assert (response.status_code, response.text, response.headers.get("location")) == (404, "not found\n", None)
    assert _engagement(world.database_url) == []


OPEN_RE = re.compile(rf'<img src="https://{re.escape(TRACKING_DOMAIN)}/o/([A-Za-z0-9_-]+)" width="1" height="1"')


def _opens(database_url: str) -> list[tuple[str, str]]:
    with psycopg.connect(database_url) as conn:
        return [(str(v), str(r)) for v, r in conn.execute(
            "SELECT verdict, rule FROM sender_engagement WHERE kind = 'open' ORDER BY id").fetchall()]


def test_opens_when_on_label_the_proxies_and_count_only_a_person_and_a_walk_of_every_link_is_a_scanners(
        tmp_path: Path, world: World, web: WebServer) -> None:
    with Ledger.from_url(world.database_url) as ledger:
        _campaign(tmp_path, ledger, "opens",
                  f"tracking: {{clicks: true, opens: true, domain: {TRACKING_DOMAIN}}}\n", "ann@rcpt.example")
    agent, factory = world.agent()
    one_pass(agent, factory)
    (received,) = world.server.recorder.snapshot()
    message = email.message_from_bytes(received.message.as_bytes(), policy=email.policy.default)
    assert message.get_content_type() == "multipart/alternative"
    html_part = message.get_body(("html",))
    assert html_part is not None
    (token,) = OPEN_RE.findall(html_part.get_content())
    clicks = CLICK_RE.findall(html_part.get_content())
    assert len(clicks) == 2  # the HTML part carries the same text, links tracked as in the plain one

    with psycopg.connect(world.database_url) as conn:
        conn.execute("UPDATE sender_sent SET accepted_at = accepted_at - interval '1 hour'")
    for agent_string in ("Mozilla/5.0", "Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com "
                         "GoogleImageProxy)", BROWSER):
        response = httpx.get(f"{web.base}/o/{token}", headers={"User-Agent": agent_string})
        assert (response.status_code, response.headers["content-type"]) == (200, "image/gif")
    assert _opens(world.database_url) == [("apple_proxy", "apple_proxy"), ("google_proxy", "google_proxy"),
                                          ("human", "")]
    assert httpx.get(f"{web.base}/o/{clicks[0]}").status_code == 404  # a click token is no open token

    # a machine with a browser's agent walks both links within the second: both clicks end as a scanner's
    for click_token in clicks:
        assert httpx.get(f"{web.base}/c/{click_token}", headers={"User-Agent": BROWSER}).status_code == 302
    assert [(verdict, rule) for _, verdict, rule in _engagement(world.database_url)] == [
        ("scanner", "every_link_same_second")] * 2
    with Ledger.from_url(world.database_url) as ledger:
        status = Campaigns(ledger).status("opens")
        assert status is not None and status.opens
        (line,) = status.worked
        assert (line.sent, line.counts["opened"], line.counts["clicked"]) == (1, 1, 0)
        assert status.as_json()["worked"][0]["opened_is_estimate"] is True
    shown = run_cli("--inventory", str(world.inventory), "--redis-url", world.redis_url, "campaign", "--database-url",
                    world.database_url, "status", "opens", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    head = lines.index("opens: what worked (rates over sent)")
    assert "opened (estimate)" in lines[head + 2] and "1 (100.0%)" in lines[head + 4], shown.stdout
