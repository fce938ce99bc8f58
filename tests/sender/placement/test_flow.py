"""`sendhost placement test` end to end on this side of the wire: mailboxes that submit through the agent's send path
(a real aiosmtpd submission server, the warm-up guard on a real Redis, a real ledger), and seeds that are real
Dovecot IMAP mailboxes. Between the two stands `DeliveringRecorder`, a stand-in for the receiving provider (named
as such: the real receiving world of Postfix, OpenDKIM and OpenDMARC is test_receiving_world.py): it
files each message into the seed's INBOX or its folder marked \\Junk, with an Authentication-Results header under
the seed's authserv-id, and a forged one under another id above it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis

from sender import Ledger
from tests.conftest import run_cli
from tests.sender.world import World, make_world
from tests.support.dovecot import Dovecot, dovecot_server
from tests.support.submission import Recorder, SubmissionServer, submission_server

SEED_A, SEED_B = "seed-a@mx.test", "seed-b@mx.test"
SEEDS = {SEED_A: "seed-a-pw", SEED_B: "seed-b-pw"}
JUNK = "Spamfolder"  # marked \Junk: a name no list of usual names holds, so only the attribute finds it
TRUSTED = "mx.test"
GOOD = (f"{TRUSTED}; spf=pass smtp.mailfrom=sender.example; dkim=pass header.d=sender.example header.s=s1; "
        "dmarc=pass header.from=sender.example; arc=none")
BAD = (f"{TRUSTED}; spf=softfail smtp.mailfrom=sender.example; dkim=fail header.d=sender.example header.s=s1; "
       "dmarc=fail header.from=sender.example; arc=none")
FORGED = "forger.example; spf=pass; dkim=pass header.d=sender.example; dmarc=pass header.from=sender.example"


@dataclass
class DeliveringRecorder(Recorder):
    """A stand-in for the receiving provider: after accepting a message it files it into the addressed seed's
    folder on `imap` with the verdicts `verdicts` names per (mailbox, seed); `held` seeds get nothing (a message
    lost on the way)."""

    imap: Dovecot | None = None
    verdicts: dict[tuple[str, str], str] = field(default_factory=dict)
    held: set[str] = field(default_factory=set)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        reply = await super().handle_DATA(server, session, envelope)
        rcpt = envelope.rcpt_tos[0].lower()
        if self.imap is not None and rcpt in SEEDS and rcpt not in self.held:
            sender = envelope.mail_from.lower()
            results = self.verdicts.get((sender, rcpt), GOOD)
            raw = (f"Authentication-Results: {results}\r\nAuthentication-Results: {FORGED}\r\n").encode() \
                + envelope.content
            self.imap.append(rcpt, raw, JUNK if results == BAD else "INBOX")
        return reply


@pytest.fixture(scope="module")
def seeds_imap() -> Iterator[Dovecot]:
    with dovecot_server(SEEDS, special_use={JUNK: "\\Junk"}) as server:
        yield server


@pytest.fixture
def delivering(tmp_path: Path, seeds_imap: Dovecot) -> Iterator[SubmissionServer]:
    with submission_server(tmp_path, {}, recorder=DeliveringRecorder({}, imap=seeds_imap)) as server:
        yield server


def seeds_yaml(tmp_path: Path, imap: Dovecot) -> str:
    secret = tmp_path / "seed-b.pw"
    secret.write_text(SEEDS[SEED_B] + "\n")
    secret.chmod(0o600)
    common = f"host: 127.0.0.1, port: {imap.imaps_port}, ca_file: '{imap.ca_file}', authserv_id: {TRUSTED}"
    return ("    sendhost_seeds:\n"
            f"      - address: {SEED_A}\n        provider: other\n"
            f"        imap: {{{common}, password_env: SENDHOST_SECRET_SEED_A}}\n"
            f"      - address: {SEED_B}\n        provider: other\n"
            f"        imap: {{{common}, password_file: '{secret}'}}\n")


@pytest.fixture
def placed(tmp_path: Path, database_url: str, redis_url: str, delivering: SubmissionServer,
           seeds_imap: Dovecot) -> World:
    return make_world(tmp_path, database_url, redis_url, delivering, mailboxes=2,
                      extra_yaml=seeds_yaml(tmp_path, seeds_imap))


def placement(world: World, *args: str) -> Any:
    return run_cli("--inventory", str(world.inventory), "--redis-url", world.redis_url, "placement",
                   "--database-url", world.database_url, *args,
                   env={"SENDHOST_SECRET_SEED_A": SEEDS[SEED_A]})


def test_each_mailbox_reaches_each_seed_through_the_agent_and_is_placed_by_folder(placed: World,
                                                                                 seeds_imap: Dovecot) -> None:
    box0, box1 = placed.mailboxes
    recorder = placed.server.recorder
    assert isinstance(recorder, DeliveringRecorder)
    recorder.verdicts[(box1, SEED_B)] = BAD
    done = placement(placed, "test", "--send", "--wait", "20s", "--poll", "0.2", "--format", "json")
    assert done.returncode == 1, done.stderr  # box1's message to seed B is in spam
    assert "1 of 4 message(s) not placed in an inbox" in done.stderr
    results = {(r["mailbox"], r["seed"]): r for r in json.loads(done.stdout)["results"]}
    assert {key: r["placement"] for key, r in results.items()} == {
        (box0, SEED_A): "inbox", (box0, SEED_B): "inbox", (box1, SEED_A): "inbox", (box1, SEED_B): "spam"}
    spam = results[(box1, SEED_B)]
    assert (spam["folder"], spam["spf"], spam["dkim"], spam["dkim_domain"], spam["dmarc"]) == (
        JUNK, "softfail", "fail", "sender.example", "fail")
    good = results[(box0, SEED_A)]
    # the forged header under another id is never read: the trusted one is
    assert (good["folder"], good["spf"], good["dkim"], good["dmarc"], good["arc"]) == (
        "INBOX", "pass", "pass", "pass", "none")
    assert good["authentication_results"].startswith(TRUSTED + ";")
    assert 0 <= good["found_after_s"] < 20
    # each went through the agent, from its own mailbox, with its own token in the text
    received = {(r.login, r.rcpt): r for r in recorder.snapshot()}
    assert set(received) == set(results)
    tokens = {r.message.get_payload(decode=True).decode().split("ref ")[1].strip() for r in received.values()}
    assert len(tokens) == 4
    # read-only: nothing the seeds' owner would see changed (no \Seen, \Recent kept)
    for seed, folder in ((SEED_A, "INBOX"), (SEED_B, "INBOX"), (SEED_B, JUNK)):
        assert all(b"\\Seen" not in flags for flags in seeds_imap.flags(seed, folder))


def test_the_warm_up_reservation_counts(placed: World) -> None:
    placement(placed, "test", "--mailbox", placed.mailboxes[0], "--send", "--wait", "20s", "--poll", "0.2")
    client = redis.Redis.from_url(placed.redis_url, decode_responses=True)
    try:
        from warmup import Guard

        (status,) = Guard(client).status([placed.mailboxes[0]])
        assert status.sent == 2  # one per seed, on the mailbox's day as any send
    finally:
        client.close()


def test_a_message_not_found_is_not_found_never_spam(placed: World) -> None:
    recorder = placed.server.recorder
    assert isinstance(recorder, DeliveringRecorder)
    recorder.held.add(SEED_B)
    started = time.monotonic()
    done = placement(placed, "test", "--mailbox", placed.mailboxes[0], "--send", "--wait", "2s", "--poll", "0.2")
    assert done.returncode == 1, done.stderr
    assert time.monotonic() - started < 30
    rows = [line for line in done.stdout.splitlines() if SEED_B in line]
    assert len(rows) == 1 and "not found: not found after 2s" in rows[0] and "spam" not in rows[0], done.stdout
    with Ledger.from_url(placed.database_url) as ledger:
        kept = ledger.fetch_all("placement_results", {"test": 1}, "results")
    assert {(row[2], row[4]) for row in kept} == {(SEED_A, "inbox"), (SEED_B, "not_found")}


def test_an_unsent_message_is_not_sent_and_the_seed_is_left_alone(placed: World, seeds_imap: Dovecot) -> None:
    # no --send and no agent running: nothing leaves, and the test says so when its wait ends
    before = seeds_imap.flags(SEED_A, "INBOX")
    done = placement(placed, "test", "--mailbox", placed.mailboxes[1], "--wait", "1s", "--poll", "0.2",
                     "--format", "json")
    assert done.returncode == 1
    results = json.loads(done.stdout)["results"]
    assert {r["placement"] for r in results} == {"not_sent"}
    assert "still queued after 1s" in results[0]["detail"]
    assert seeds_imap.flags(SEED_A, "INBOX") == before


def test_bad_choices_are_usage_errors(placed: World) -> None:
    done = placement(placed, "test", "--mailbox", "nobody@sender.example")
    assert done.returncode == 2 and "no mailbox nobody@sender.example with smtp settings" in done.stderr
    done = placement(placed, "test", "--campaign", "spring")
    assert done.returncode == 2 and "--campaign and --step go together" in done.stderr




CAMPAIGN = """name: spring
group: sales
fields: [first_name, company]
steps:
  - subject: "Quick question, {first_name|there}"
    body: "Hi {first_name|there}, is {company} hiring? Not interested? {unsubscribe_url}"
  - delay: 3d
    body: "Following up, {first_name|there}, on {company}. Not interested? {unsubscribe_url}"
"""


def test_a_campaign_step_is_rendered_for_each_seed_as_a_lead_by_the_agent(placed: World, tmp_path: Path) -> None:
    spec = tmp_path / "spring.yml"
    spec.write_text(CAMPAIGN)
    applied = run_cli("--inventory", str(placed.inventory), "campaign", "--database-url", placed.database_url,
                      "apply", str(spec))
    assert applied.returncode == 0, applied.stderr
    done = placement(placed, "test", "--mailbox", placed.mailboxes[0], "--campaign", "spring", "--step", "2",
                     "--send", "--wait", "20s", "--poll", "0.2")
    assert done.returncode == 0, done.stderr
    recorder = placed.server.recorder
    sent = {r.rcpt: r.message for r in recorder.snapshot()}
    assert str(sent[SEED_A]["Subject"]) == "Re: Quick question, there"
    text = sent[SEED_A].get_payload(decode=True).decode()
    assert text.startswith("Following up, there, on seed-a. Not interested? https://u.example.test/")
    assert "ref sh" in text and "{" not in text
    missing = placement(placed, "test", "--campaign", "spring", "--step", "3")
    assert missing.returncode == 2 and "campaign 'spring' has no step 3 in the ledger" in missing.stderr
