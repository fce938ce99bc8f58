"""Rest by placement: with `sendhost_placement: {rest_below: 0.7}` a mailbox whose inbox share falls below it is
rested (its warm-up ramp halved, or paused with `pause: true`), naming the tests and the reason; while rested it
sends no more than its halved ramp; a later test at or above the threshold lifts it, as `warmup resume` does. The
same world as test_flow.py: the agent's real send path, real Dovecot seeds, the stand-in receiver
filing a message into the seed's Junk when told to."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import redis
from prometheus_client.parser import text_string_to_metric_families

from sender import Ledger
from sender.placement import store
from tests.conftest import run_cli
from tests.sender.placement.test_flow import (  # noqa: F401 (fixtures)
    BAD,
    SEED_A,
    SEED_B,
    SEEDS,
    DeliveringRecorder,
    delivering,
    seeds_imap,
    seeds_yaml,
)
from tests.sender.web_server import WebServer
from tests.sender.world import World, make_world
from tests.support.dovecot import Dovecot
from tests.support.submission import SubmissionServer
from warmup import Guard


def world_with(tmp_path: Path, database_url: str, redis_url: str, server: SubmissionServer, imap: Dovecot,
               policy: str) -> World:
    # a mailbox in its first week: a cap of 10, so half of it is in reach of a test
    return make_world(tmp_path, database_url, redis_url, server, mailboxes=1, start=datetime.now(UTC).date(),
                      extra_yaml=seeds_yaml(tmp_path, imap) + f"    sendhost_placement: {policy}\n")


def cli(world: World, *args: str) -> Any:
    return run_cli("--inventory", str(world.inventory), "--redis-url", world.redis_url, *args,
                   env={"SENDHOST_SECRET_SEED_A": SEEDS[SEED_A]})


def placement_test(world: World) -> Any:
    return cli(world, "placement", "--database-url", world.database_url, "test", "--send", "--wait", "20s",
               "--poll", "0.2", "--format", "json")


def status(world: World) -> Any:
    return Guard(redis.Redis.from_url(world.redis_url, decode_responses=True)).status([world.mailboxes[0]])[0]


def spam_everywhere(world: World, spam: bool) -> None:
    recorder = world.server.recorder
    assert isinstance(recorder, DeliveringRecorder)
    for seed in SEEDS:
        if spam:
            recorder.verdicts[(world.mailboxes[0], seed)] = BAD
        else:
            recorder.verdicts.pop((world.mailboxes[0], seed), None)


def test_a_low_share_halves_the_ramp_and_the_mailbox_sends_no_more_than_half(
        tmp_path: Path, database_url: str, redis_url: str, delivering: SubmissionServer,  # noqa: F811
        seeds_imap: Dovecot) -> None:  # noqa: F811
    world = world_with(tmp_path, database_url, redis_url, delivering, seeds_imap, "{rest_below: 0.7}")
    box = world.mailboxes[0]
    spam_everywhere(world, True)
    done = placement_test(world)
    assert done.returncode == 1
    (rest,) = json.loads(done.stdout)["rests"]
    assert (rest["mailbox"], rest["change"]) == (box, "rested")
    assert rest["why"] == "warm-up ramp halved: inbox share 0% at other over tests 1 is below 70%"
    assert (status(world).cap, status(world).sent) == (5, 2)  # 10 halved; the test's own two sends count
    # while rested it sends no more than its halved ramp: 3 more of 10 rows today
    world.enqueue(10, group="sales")
    sent = cli(world, "sender", "--database-url", world.database_url, "run", "--once", "--format", "json")
    assert json.loads(sent.stdout)["outcomes"].get("sent") == 3, sent.stdout
    assert status(world).sent == 5
    shown = json.loads(cli(world, "placement", "--database-url", world.database_url, "status",
                           "--format", "json").stdout)
    assert [(r["mailbox"], r["how"], r["tests"]) for r in shown["rested"]] == [(box, "halved", [1])]
    assert shown["shares"] == [
        {"mailbox": box, "provider": "other", "inbox": 0, "judged": 2, "inbox_share": 0.0, "tests": [1]}]


def test_a_later_test_at_the_threshold_lifts_the_rest(
        tmp_path: Path, database_url: str, redis_url: str, delivering: SubmissionServer,  # noqa: F811
        seeds_imap: Dovecot) -> None:  # noqa: F811
    world = world_with(tmp_path, database_url, redis_url, delivering, seeds_imap, "{rest_below: 0.7}")
    spam_everywhere(world, True)
    assert [r["change"] for r in json.loads(placement_test(world).stdout)["rests"]] == ["rested"]
    spam_everywhere(world, False)
    good = placement_test(world)
    assert good.returncode == 0, good.stderr
    (lift,) = json.loads(good.stdout)["rests"]
    assert (lift["change"], lift["why"]) == ("lifted", "test 2: inbox share at or above 70% at other 100%")
    assert status(world).cap == 10
    shown = json.loads(cli(world, "placement", "--database-url", world.database_url, "status",
                           "--format", "json").stdout)
    assert shown["rested"] == []
    assert shown["shares"][0]["inbox_share"] == 0.5  # over the last 3 tests: 2 of 4 in the inbox


def test_a_paused_rest_stops_sending_and_warmup_resume_lifts_it(
        tmp_path: Path, database_url: str, redis_url: str, delivering: SubmissionServer,  # noqa: F811
        seeds_imap: Dovecot) -> None:  # noqa: F811
    world = world_with(tmp_path, database_url, redis_url, delivering, seeds_imap, "{rest_below: 0.7, pause: true}")
    box = world.mailboxes[0]
    spam_everywhere(world, True)
    assert [r["change"] for r in json.loads(placement_test(world).stdout)["rests"]] == ["rested"]
    assert (status(world).state, status(world).reason) == (
        "paused", "placement: inbox share 0% at other over tests 1 is below 70%")
    # paused: the next test's messages are not sent, and change nothing
    done = cli(world, "placement", "--database-url", world.database_url, "test", "--send", "--wait", "1s",
               "--poll", "0.2", "--format", "json")
    assert {r["placement"] for r in json.loads(done.stdout)["results"]} == {"not_sent"}
    assert json.loads(done.stdout)["rests"] == []
    resumed = cli(world, "warmup", "resume", box)
    assert resumed.returncode == 0, resumed.stderr
    shown = json.loads(cli(world, "placement", "--database-url", world.database_url, "status",
                           "--format", "json").stdout)
    assert shown["rested"] == []
    assert status(world).state != "paused"


def test_the_exporter_shows_each_share_and_each_rest(web: WebServer, database_url: str) -> None:
    with Ledger.from_url(database_url) as ledger:
        test_id = store.begin(ledger, wait_s=60, campaign=None, step=None)
        for n, (seed, provider, placed) in enumerate([("g1@gmail.com", "google", "inbox"),
                                                       ("g2@gmail.com", "google", "spam"),
                                                       ("o1@outlook.com", "microsoft", "inbox")]):
            store.enqueue(ledger, test_id, token=f"tok{n}", mailbox="Box0@sender.example", group="sales", seed=seed,
                          provider=provider, subject="s", body="b")
            store.record(ledger, f"tok{n}", placed)
        ledger.fetch_one("placement_rest", {"mailbox": "box0@sender.example", "how": "halved", "reason": "r",
                                            "tests": [test_id]}, "rest")
    text = httpx.get(f"{web.metrics_base}/metrics/").text
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    box = ("mailbox", "box0@sender.example")
    assert samples[("sendhost_sender_placement_inbox_share", (box, ("provider", "google")))] == 0.5
    assert samples[("sendhost_sender_placement_inbox_share", (box, ("provider", "microsoft")))] == 1.0
    assert samples[("sendhost_sender_placement_rested", (box,))] == 1.0


def test_a_rest_redis_lost_is_put_back_from_the_ledger_never_read_as_lifted(
        tmp_path: Path, database_url: str, redis_url: str, delivering: SubmissionServer,  # noqa: F811
        seeds_imap: Dovecot) -> None:  # noqa: F811
    world = world_with(tmp_path, database_url, redis_url, delivering, seeds_imap, "{rest_below: 0.7}")
    spam_everywhere(world, True)
    assert [r["change"] for r in json.loads(placement_test(world).stdout)["rests"]] == ["rested"]
    client = redis.Redis.from_url(world.redis_url)
    client.flushdb()  # Redis restarted empty
    client.close()
    shown = json.loads(cli(world, "placement", "--database-url", world.database_url, "status",
                           "--format", "json").stdout)
    assert [r["mailbox"] for r in shown["rested"]] == world.mailboxes  # not taken for a `warmup resume`
    # the agent's rebuild puts the mailbox back under the guard with its rest: 3 more sends to its halved cap of 5
    world.enqueue(10, group="sales")
    sent = cli(world, "sender", "--database-url", world.database_url, "run", "--once", "--format", "json")
    assert json.loads(sent.stdout)["outcomes"].get("sent") == 3, sent.stdout
    assert (status(world).cap, status(world).sent) == (5, 5)
    # and a person's `warmup resume` is one: the ledger's rest is closed
    assert cli(world, "warmup", "resume", world.mailboxes[0]).returncode == 0
    shown = json.loads(cli(world, "placement", "--database-url", world.database_url, "status",
                           "--format", "json").stdout)
    assert shown["rested"] == []
