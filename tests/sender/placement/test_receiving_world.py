"""Issue 42's Must hold, end to end through the CLI in a real receiving world (tests/support/receiving.py: Postfix
signing with OpenDKIM, a second Postfix verifying with OpenDKIM, OpenDMARC and policyd-spf, a Sieve rule filing
failures into Junk, Dovecot serving the seeds, NSD serving the DNS): the healthy mailbox lands in INBOX with
dkim=pass dmarc=pass; the one whose DKIM key was removed from DNS lands in Junk with dkim=fail, its inbox share
drops, it is rested, and the audit names the failing signature."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.sender.world import World, make_world
from tests.support.receiving import AUTHSERV_ID, ReceivingWorld, Sender, receiving_world
from tests.support.submission import Recorder, SubmissionServer

pytestmark = pytest.mark.slow

DOMAIN = "sender.example"
BOX0, BOX1 = f"box0@{DOMAIN}", f"box1@{DOMAIN}"
SEEDS = {"seed-a@mx.test": "seed-a-pw", "seed-b@mx.test": "seed-b-pw"}


@pytest.fixture(scope="module")
def receiving() -> Iterator[ReceivingWorld]:
    senders = [Sender(BOX0, f"pw-{BOX0}", "good"), Sender(BOX1, f"pw-{BOX1}", "gone", published=False)]
    with receiving_world(DOMAIN, senders, SEEDS) as world:
        yield world


def seeds_yaml(tmp_path: Path, rx: ReceivingWorld) -> str:
    entries = []
    for address, password in SEEDS.items():
        secret = tmp_path / f"{address}.pw"
        secret.write_text(password + "\n")
        secret.chmod(0o600)
        entries.append(f"      - address: {address}\n        provider: other\n"
                       f"        imap: {{host: 127.0.0.1, port: {rx.imap_port}, ca_file: '{rx.imap_ca}', "
                       f"authserv_id: {AUTHSERV_ID}, password_file: '{secret}'}}\n")
    return "    sendhost_seeds:\n" + "".join(entries) + "    sendhost_placement: {rest_below: 0.7}\n"


@pytest.fixture
def world(tmp_path: Path, database_url: str, redis_url: str, receiving: ReceivingWorld) -> World:
    postfix = receiving.submission
    server = SubmissionServer(postfix.host, postfix.port, postfix.ca_file, Recorder({}))
    return make_world(tmp_path, database_url, redis_url, server, mailboxes=2,
                      extra_yaml=seeds_yaml(tmp_path, receiving))


def cli(world: World, *args: str) -> Any:
    return run_cli("--inventory", str(world.inventory), "--redis-url", world.redis_url, *args, timeout=180)


def test_a_removed_dkim_key_lands_in_junk_rests_the_mailbox_and_the_audit_names_it(
        world: World, receiving: ReceivingWorld) -> None:
    done = cli(world, "placement", "--database-url", world.database_url, "test", "--send", "--wait", "60s",
               "--poll", "0.5", "--format", "json")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    results = {(r["mailbox"], r["seed"]): r for r in report["results"]}
    for seed in SEEDS:
        healthy, broken = results[(BOX0, seed)], results[(BOX1, seed)]
        assert (healthy["placement"], healthy["folder"], healthy["dkim"], healthy["dkim_domain"], healthy["dmarc"],
                healthy["spf"]) == ("inbox", "INBOX", "pass", DOMAIN, "pass", "pass"), healthy
        assert (broken["placement"], broken["folder"], broken["dkim"], broken["dkim_domain"]) == (
            "spam", "Junk", "fail", DOMAIN), broken
        assert 'reason="key not found in DNS"' in broken["authentication_results"]
    # its inbox share drops, and it is rested: the healthy one is not
    assert [(r["mailbox"], r["change"]) for r in report["rests"]] == [(BOX1, "rested")]
    status = json.loads(cli(world, "placement", "--database-url", world.database_url, "status",
                            "--format", "json").stdout)
    assert {(s["mailbox"], s["inbox_share"]) for s in status["shares"]} == {(BOX0, 1.0), (BOX1, 0.0)}
    assert [r["mailbox"] for r in status["rested"]] == [BOX1]
    # the audit from the receiver's side names the failing signature, for each seed; the healthy mailbox is clean
    audited = run_cli("dns", "audit", DOMAIN, "--nameserver", f"{receiving.dns}:53", "--selector", "good",
                      "--dnsbl", "dnsbl.invalid", "--timeout", "1", "--deadline", "30", "--placement",
                      "--database-url", world.database_url, "--format", "json", timeout=120)
    assert audited.returncode == 1, audited.stderr
    (domain,) = json.loads(audited.stdout)["domains"]
    placement = [f for f in domain["findings"] if f["code"].startswith("placement.")]
    assert sorted((f["code"], f["subject"]) for f in placement) == [
        ("placement.dkim_fail", f"{BOX1} → {seed}") for seed in sorted(SEEDS)]
    for found in placement:
        assert "dkim=fail" in found["evidence"] and "header.s=gone" in found["evidence"], found
        assert found["message"].startswith("the other seed seed-") and f"dkim=fail on the message from {BOX1} " \
            f"signed d={DOMAIN}" in found["message"]
    assert {"name": "placement", "status": "fail", "note": ""} in domain["checks"]
    # the DNS itself looks right for the selector the audit was told of (a 1024-bit key's warning aside): only the
    # receiver saw the failure
    assert [f["code"] for f in domain["findings"] if f["code"].startswith("dkim.")] == ["dkim.short_key"]
