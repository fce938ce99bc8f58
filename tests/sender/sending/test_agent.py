"""The send path against a real PostgreSQL, a real Redis and a real submission server (STARTTLS, AUTH)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from email.message import Message
from pathlib import Path
from typing import Any

from ippool.states import SlotState
from sender.sending.agent import Agent
from sender.sending.tokens import verify_token
from tests.sender.world import HOST, PRIMARY, SLOTS, UNSUBSCRIBE_BASE, World, make_world
from tests.support.cli import run_cli_process
from tests.support.submission import Scripted, SubmissionServer


def _run_once(world: World, workers: int = 1) -> None:
    agent, factory = world.agent()
    agent.run(factory, workers, once=True, stop=threading.Event())


def test_a_row_goes_out_once_with_its_headers_from_a_slot_address(world: World) -> None:
    world.enqueue(1)
    _run_once(world)
    (received,) = world.server.recorder.received
    with world.ledger() as ledger:
        shown = ledger.show("L0", 1)
        key = ledger.unsubscribe_key()
    assert shown is not None and shown.row["status"] == "sent"
    assert shown.send_log is not None and shown.send_log["message_id"] == received.message_id
    assert received.peer in SLOTS and received.peer == shown.row["source_ip"]
    message: Message = received.message
    assert message["Message-ID"] == shown.row["message_id"] == f"<{shown.row['idempotency_key']}@sender.example>"
    https, mailto = (part.strip().strip("<>") for part in message["List-Unsubscribe"].split(","))
    assert https.startswith(f"{UNSUBSCRIBE_BASE}/u/")
    assert verify_token(key, https.rsplit("/", 1)[1]) == shown.row["idempotency_key"]  # never the reusable id
    assert mailto == f"mailto:{received.mail_from}?subject=unsubscribe"
    assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert https in message.get_payload(decode=True).decode()


def test_suppressed_after_queueing_receives_nothing(world: World) -> None:
    world.enqueue(3)
    with world.ledger() as ledger:
        ledger.suppress("lead1@rcpt.example", "unsubscribed")
    _run_once(world)
    assert sorted(r.rcpt for r in world.server.recorder.received) == ["lead0@rcpt.example", "lead2@rcpt.example"]
    with world.ledger() as ledger:
        assert ledger.counts()["suppressed"] == 1


def test_a_recipient_suppressed_after_the_claim_receives_nothing(world: World) -> None:
    """The last suppression check is right before the handoff: an unsubscribe that lands while the row is already
    claimed (here: once its source IP is leased) still stops it, and the row ends suppressed."""
    world.enqueue(1)

    def checkpoint(name: str) -> None:
        if name == "leased":
            with world.ledger() as ledger:
                ledger.suppress("lead0@rcpt.example", "unsubscribed meanwhile")

    agent, factory = world.agent(checkpoint)
    reports = agent.run(factory, 1, once=True, stop=threading.Event())
    assert world.server.recorder.received == []
    assert [r.kind for r in reports] == ["suppressed"]
    with world.ledger() as ledger:
        shown = ledger.show("L0", 1)
    assert shown is not None and shown.row["status"] == "suppressed"
    assert shown.send_log is None


def test_no_slot_address_beyond_its_budget_then_the_primary(world: World) -> None:
    budgets = world.budgets()
    total = sum(budgets.values()) + 5
    world.enqueue(total)
    _run_once(world, workers=4)
    peers = world.server.recorder.peers()
    for address, count in peers.items():
        if address != PRIMARY:
            assert count <= budgets[address], (address, count, budgets[address])
    assert peers.get(PRIMARY, 0) >= 5
    assert len(world.server.recorder.received) == total


def test_a_redelivered_row_with_an_attempt_takes_the_crash_path(world: World) -> None:
    import psycopg

    world.enqueue(1)
    with psycopg.connect(world.database_url, autocommit=True) as conn:
        # as if a past attempt had started and the row had come back to the queue by hand
        conn.execute("UPDATE sender_emails SET attempt_id = gen_random_uuid(), message_id = '<old@sender.example>'")
    _run_once(world)
    assert world.server.recorder.received == []
    with world.ledger() as ledger:
        shown = ledger.show("L0", 1)
    assert shown is not None and shown.row["status"] == "unconfirmed"


def test_once_waits_out_short_gaps_and_leaves_long_ones(tmp_path: Path, database_url: str, redis_url: str,
                                                        submission: SubmissionServer) -> None:
    import time

    short = make_world(tmp_path, database_url, redis_url, submission, mailboxes=1, min_gap_s=1)
    short.enqueue(3)
    began = time.monotonic()
    _run_once(short)
    assert len(submission.recorder.received) == 3
    assert time.monotonic() - began >= 2  # two gaps waited out


def test_once_leaves_rows_behind_a_long_gap(tmp_path: Path, database_url: str, redis_url: str,
                                            submission: SubmissionServer) -> None:
    long = make_world(tmp_path, database_url, redis_url, submission, mailboxes=1, min_gap_s=600)
    long.enqueue(3)
    _run_once(long)
    assert len(submission.recorder.received) == 1
    with long.ledger() as ledger:
        assert ledger.counts()["queued"] == 2


def test_run_once_exits_1_when_the_certificate_does_not_verify(world: World, cli: Any) -> None:
    import trustme

    trustme.CA().cert_pem.write_to_path(str(world.server.ca_file))  # a CA that did not sign the server's certificate
    world.enqueue(1)
    result = cli(*world.cli_args("run", "--once", "--smtp-timeout", "5"), cwd=world.tmp)
    assert result.returncode == 1, result.stderr
    error = result.stderr.strip().splitlines()[-1]
    # each of the group's four mailboxes tried once and was disconnected; then the row waits
    assert error.startswith("error: 4 send(s) could not reach their submission server; first, via box")
    assert "certificate of 127.0.0.1 does not verify" in error and "set smtp.ca_file" in error
    assert world.server.recorder.received == []


def test_a_refused_send_releases_its_lease_so_a_retiring_slot_is_ready_at_once(
        tmp_path: Path, database_url: str, redis_url: str, submission: SubmissionServer) -> None:
    """A send the server refused ends its lease like an accepted one: no live lease of it remains, and the slot it
    spent (its last send) is ready to rotate now, not once the lease's TTL runs out."""
    world = make_world(tmp_path, database_url, redis_url, submission, mailboxes=1)
    submission.recorder.script["lead0@rcpt.example"] = Scripted(
        "data", "550 5.7.1 This message was blocked because its content presents a potential security issue.")
    world.enqueue(1)
    built, factory = world.agent(smtp_timeout_s=1.0)
    pool = built.pool
    # Every slot spent but slot 0, which has one send left: the refused send below is slot 0's last.
    pool.register_host(HOST, PRIMARY, (1, 1))
    for slot, address in enumerate(SLOTS):
        pool.put_address(HOST, slot, private_ip=address, spent=slot != 0)
    with factory() as ledger:
        key = ledger.unsubscribe_key()
    # The agent releases leases in a side task, off the send path: an executor of our own, so leaving its block
    # waits for them.
    with ThreadPoolExecutor(max_workers=4) as side_tasks:
        agent = Agent(built.settings, built.guard, pool, unsubscribe_key=key, side_tasks=side_tasks)
        (report,) = agent.run(factory, 1, once=True, stop=threading.Event())
    assert (report.kind, report.source_ip) == ("failed", SLOTS[0])
    assert world.server.recorder.received == []
    (status,) = pool.status(HOST)
    assert (status.slots[0].state, status.slots[0].live_leases) == (SlotState.READY, 0)
    assert 0 in {ready.slot for ready in pool.slots.ready_slots(HOST)}  # what a rotator polls for


def test_run_once_exits_1_when_the_server_refuses_every_login(tmp_path: Path, database_url: str, redis_url: str,
                                                               submission: SubmissionServer, cli: Any) -> None:
    """Nothing could be sent because AUTH was refused: not a quiet exit 0 with the rows moved on."""
    addresses = [f"box{n}@sender.example" for n in range(2)]
    world = make_world(tmp_path, database_url, redis_url, submission, mailboxes=2,
                       passwords={address: "not-the-password" for address in addresses})
    world.enqueue(1)
    result = cli(*world.cli_args("run", "--once", "--smtp-timeout", "5"), cwd=world.tmp)
    assert result.returncode == 1, result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("error: 2 send(s) could not reach or log in to their submission server; first, via box")
    assert "535" in error
    assert submission.recorder.received == []


def test_run_once_names_a_source_address_this_machine_lacks_and_where_it_came_from(
        tmp_path: Path, database_url: str, redis_url: str, submission: SubmissionServer, cli: Any) -> None:
    """The inventory's primary IP is another machine's (here TEST-NET-1's, on none): the error names the address,
    the setting it came from and the fix, instead of a bare `Cannot assign requested address`."""
    import redis

    from ippool.pool import Pool

    world = make_world(tmp_path, database_url, redis_url, submission, mailboxes=1)
    world.inventory.write_text(world.inventory.read_text().replace(f"sendhost_primary_ip: {PRIMARY}",
                                                                   "sendhost_primary_ip: 192.0.2.10"))
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    Pool(client).slots.forget_host(HOST)  # no slot to lease: the send falls back to the primary IP
    client.close()
    world.enqueue(1)
    result = cli(*world.cli_args("run", "--once", "--smtp-timeout", "5"), cwd=world.tmp)
    assert result.returncode == 1, result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert "cannot send from 192.0.2.10: no network interface of this machine has that address" in error
    assert f"192.0.2.10 is {HOST}'s sendhost_primary_ip in {world.inventory}" in error
    assert f"run the agent on {HOST} itself" in error


def test_run_refuses_a_wrong_redis_password_at_start_naming_where_the_url_came_from(
        world: World, cli: Any) -> None:
    """A wrong Redis password is configuration (exit 2, nothing sent), in the wording every command uses."""
    world.enqueue(1)
    args = world.cli_args("run", "--once", "--smtp-timeout", "5")
    args[args.index("--redis-url"):args.index("--redis-url") + 2] = []
    wrong = world.redis_url.replace("redis://", "redis://nobody:wrong@")
    result = cli(*args, cwd=world.tmp, env={"SENDHOST_REDIS_URL": wrong})
    assert result.returncode == 2, result.stderr
    (error,) = result.stderr.strip().splitlines()
    assert error.startswith("error: Redis at redis://")
    assert "refused the user or password of the Redis URL from env SENDHOST_REDIS_URL" in error
    assert error.endswith("correct them in SENDHOST_REDIS_URL")
    assert world.server.recorder.received == []
    with world.ledger() as ledger:
        assert ledger.counts()["queued"] == 1


def test_run_once_exits_1_when_the_server_offers_no_auth(tmp_path: Path, database_url: str, redis_url: str,
                                                         submission: SubmissionServer, cli: Any) -> None:
    """`python -m aiosmtpd -n` as a first local try: plain text, no AUTH offered. The agent cannot log in, so
    nothing is sent: --once says so (exit 1) instead of exiting 0 with the row moved to retry."""
    from aiosmtpd.controller import Controller

    from tests.support.net import free_port

    class Accept:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            return "250 OK"

    port = free_port()
    plain = Controller(Accept(), hostname="127.0.0.1", port=port)
    plain.start()
    try:
        world = make_world(tmp_path, database_url, redis_url, submission, mailboxes=1)
        world.inventory.write_text(world.inventory.read_text().replace(
            f"port: {submission.port}, security: starttls", f"port: {port}, security: none"))
        world.enqueue(1)
        result = cli(*world.cli_args("run", "--once", "--smtp-timeout", "5"), cwd=world.tmp)
    finally:
        plain.stop()
    assert result.returncode == 1, result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("error: 1 send(s) could not reach or log in to their submission server; first, via "
                            "box0@sender.example: no_reply at auth: SMTPNotSupportedError: SMTP AUTH extension not "
                            "supported by server."), error


# Exchange Online's reply for a banned sending IP, as its NDR reference quotes it (5.7.606-649), and a
# Spamhaus-listed client IP as Postfix's reject_rbl_client words it.
BANNED_IP = ("550 5.7.606 Access denied, banned sending IP [{ip}]. To request removal from this list please visit "
             "https://sender.office.com/ and follow the directions.")
SPAMHAUS = "554 5.7.1 Service unavailable; Client host [{ip}] blocked using zen.spamhaus.org"


def test_a_refusal_blaming_the_connecting_ip_retires_it_and_the_row_goes_from_another(
        tmp_path: Path, database_url: str, redis_url: str, submission: SubmissionServer) -> None:
    """Every slot address but one is refused for its own sake: each refused address is retired at its first refusal
    (its slot spent: never leased again), and each row goes out once, from the address nobody blames, without the
    mailbox being cooled down (the rows would wait hours then)."""
    import redis

    from ippool import Pool
    from warmup import Guard

    world = make_world(tmp_path, database_url, redis_url, submission, mailboxes=1)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    public = {address: f"198.51.100.{10 + n}" for n, address in enumerate(SLOTS)}
    for slot, address in enumerate(SLOTS):
        Pool(client).put_address(HOST, slot, private_ip=address, public_ip=public[address])
    clean = SLOTS[5]
    for n, address in enumerate(SLOTS):
        if address != clean:
            submission.recorder.refuse_peers[address] = (BANNED_IP if n % 2 else SPAMHAUS).format(ip=public[address])
    submission.recorder.refuse_peers[PRIMARY] = BANNED_IP.format(ip=PRIMARY)  # a fallback would be refused too
    world.enqueue(3)
    agent, factory = world.agent()
    reports = agent.run(factory, 1, once=True, stop=threading.Event())
    submission.recorder.wait_until_idle()

    received = submission.recorder.snapshot()
    assert sorted(r.rcpt for r in received) == [f"lead{n}@rcpt.example" for n in range(3)]
    assert {r.peer for r in received} == {clean}
    refused_peers = [peer for peer, _ in submission.recorder.refused]
    assert refused_peers and len(refused_peers) == len(set(refused_peers))  # each blamed address leased once only
    assert PRIMARY not in refused_peers
    # each blamed slot is spent (no new lease; it rotates as every spent slot does, and its address is denied for
    # 7 days when released: tests/ippool); the clean one is not
    (status,) = Pool(client).status(HOST)
    slots = {s.private_ip: s for s in status.slots}
    assert all(slots[peer].used >= slots[peer].budget for peer in refused_peers)
    assert all(slots[peer].state in (SlotState.RETIRING, SlotState.READY) for peer in refused_peers)
    assert slots[clean].state is SlotState.ACTIVE and slots[clean].used == 3
    assert sorted(r.kind for r in reports) == ["rerouted"] * len(refused_peers) + ["sent"] * 3
    with world.ledger() as ledger:
        assert ledger.counts()["sent"] == 3
        rows = [ledger.show(f"L{n}", 1) for n in range(3)]
    assert all(row is not None and row.row["attempts"] == 1 for row in rows)  # a blamed address costs no attempt
    with Guard.from_url(redis_url) as guard:
        (mailbox,) = guard.status([world.mailboxes[0]])
    assert (mailbox.state, mailbox.reserved) == ("ready", 3)  # not cooled down; only the three sends count
    client.close()


def test_a_blamed_primary_address_waits_as_a_retry_instead_of_coming_straight_back(
        tmp_path: Path, database_url: str, redis_url: str, submission: SubmissionServer) -> None:
    """Every slot spent, the send falls back to the host's primary address, which the server blames: the pool cannot
    retire it, so the row waits as a retry (30 minutes) rather than being rerouted at once to the same address, and
    the mailbox is not cooled down."""
    from datetime import UTC, datetime, timedelta

    import redis

    from ippool import Pool
    from warmup import Guard

    world = make_world(tmp_path, database_url, redis_url, submission, mailboxes=1)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    for slot, address in enumerate(SLOTS):
        Pool(client).put_address(HOST, slot, private_ip=address, spent=True)
    client.close()
    submission.recorder.refuse_peers[PRIMARY] = SPAMHAUS.format(ip=PRIMARY)
    world.enqueue(1)
    agent, factory = world.agent()
    (report,) = agent.run(factory, 1, once=True, stop=threading.Event())
    submission.recorder.wait_until_idle()
    assert [peer for peer, _ in submission.recorder.refused] == [PRIMARY]  # once, not again at once
    assert (report.kind, report.source_ip) == ("retry", PRIMARY)
    with world.ledger() as ledger:
        shown = ledger.show("L0", 1)
    assert shown is not None and shown.row["status"] == "retry"
    assert shown.row["not_before"] > datetime.now(UTC) + timedelta(minutes=29)
    assert "could not be retired" in (shown.row["last_error"] or "")
    with Guard.from_url(redis_url) as guard:
        (mailbox,) = guard.status([world.mailboxes[0]])
    assert (mailbox.state, mailbox.reserved) == ("ready", 0)


def test_a_send_claims_the_next_row_with_its_record_and_sends_it_next(world: World) -> None:
    world.enqueue(2)
    agent, factory = world.agent()
    with factory() as ledger:
        agent.prepare(ledger)
        first = agent.send_one(ledger, "w")
        assert first is not None and first.kind == "sent"
        with ledger.calling("read the claims") as conn:
            held = conn.execute("SELECT l.lead, e.claimed_by FROM sender_emails e JOIN sender_leads l "
                                "ON l.id = e.lead_id WHERE e.status = 'sending'").fetchall()
        assert held == [("L1", "w")]  # claimed by the first send's record, its attempt not started
        second = agent.send_one(ledger, "w")
        assert second is not None and second.kind == "sent" and second.row != first.row
        assert agent.send_one(ledger, "w") is None
    assert len(world.server.recorder.received) == 2


def test_a_stopping_worker_gives_back_the_row_it_claimed_ahead(world: World) -> None:
    world.enqueue(2)
    stop = threading.Event()

    def checkpoint(name: str) -> None:
        if name == "recorded":
            stop.set()  # the worker ends after its first send, with the next row claimed by that send's record

    agent, factory = world.agent(checkpoint)
    reports = agent.run(factory, 1, stop=stop)
    assert [report.kind for report in reports] == ["sent"]
    with world.ledger() as ledger:
        waiting = ledger.show("L1", 1)
    assert waiting is not None and waiting.row["status"] == "queued"
    assert [event["kind"] for event in waiting.events][-1] == "unclaimed"


def test_run_once_says_what_each_row_left_waits_for_and_until_when(
        tmp_path: Path, database_url: str, redis_url: str, submission: SubmissionServer, cli: Any) -> None:
    """`2 blocked, 1 sent` alone said nothing: each row left is in the one line of what holds it, with its time;
    and the agent's own lines, from a process of its own as on a host (where the journal keeps its stderr)."""
    long = make_world(tmp_path, database_url, redis_url, submission, mailboxes=1, min_gap_s=600)
    long.enqueue(3)
    result = run_cli_process(*long.cli_args("run", "--once", "--smtp-timeout", "5"), cwd=long.tmp)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "1 sent" in lines[0]
    assert lines[1] == "enqueue: 2 row(s) not sent yet:"
    assert lines[2].startswith("  2 wait for a mailbox's gap or pace until ")
    assert lines[2].endswith(" UTC, box0@sender.example") and len(lines) == 3
    # and the agent said what it did, at the default level: the send, and each row put back with until when
    said = [line for line in result.stderr.splitlines() if line.startswith("INFO sendhost.sender.activity: ")]
    sent = [line for line in said if " sent row " in line]
    assert len(sent) == 1 and sent[0].endswith(": 2.0.0 OK queued"), said  # the server's reply
    assert "sent row 1 (lead L0, step 1) via box0@sender.example from " in sent[0]  # and the source IP
    put_back = [line for line in said if " put back row " in line]
    assert len(put_back) == 2 and all(" until " in line and "skipped-cooldown" in line for line in put_back), said
    assert sorted(line.split(" put back ")[1].split(" until ")[0] for line in put_back) == [
        "row 2 (lead L1, step 1)", "row 3 (lead L2, step 1)"], said  # a row given back is named as one sent


def test_run_quiet_says_nothing_of_each_send(
        tmp_path: Path, database_url: str, redis_url: str, submission: SubmissionServer, cli: Any) -> None:
    world = make_world(tmp_path, database_url, redis_url, submission, mailboxes=1)
    world.enqueue(1)
    result = run_cli_process(*world.cli_args("run", "--once", "--quiet", "--smtp-timeout", "5"), cwd=world.tmp)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("1 sent") and "sendhost.sender.activity" not in result.stderr
    world.enqueue(1, prefix="M", address=lambda n: "other@rcpt.example")
    levelled = run_cli_process(*world.cli_args("run", "--once", "--log-level", "warning"), cwd=world.tmp)
    assert levelled.returncode == 0 and levelled.stdout.startswith("1 sent"), levelled.stderr
    assert "sendhost.sender.activity" not in levelled.stderr
