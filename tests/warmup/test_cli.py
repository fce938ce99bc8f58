"""`sendhost warmup ...` as a user runs it: a subprocess against the real test Redis."""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import redis

from tests.conftest import REPO_ROOT, run_cli


def warmup(redis_url: str, *args: str, cwd: Path | None = None):  # type: ignore[no-untyped-def]
    return run_cli("--redis-url", redis_url, "warmup", *args, cwd=cwd)


def today() -> date:
    return datetime.now(UTC).date()


def _add(redis_url: str, address: str, *extra: str, start: date | None = None) -> None:
    result = warmup(redis_url, "add", address, "--start", (start or today()).isoformat(), *extra)
    assert result.returncode == 0, result.stderr


def test_add_then_status_as_json(redis_url: str) -> None:
    _add(redis_url, "a@x.com", "--min-gap", "0", "--jitter", "0-0", start=today() - timedelta(days=7))
    result = warmup(redis_url, "status", "--format", "json")
    assert result.returncode == 0, result.stderr
    [row] = json.loads(result.stdout)
    assert (row["mailbox"], row["day_number"], row["cap"], row["sent"], row["state"], row["breaker"]) == (
        "a@x.com", 8, 15, 0, "ready", "closed")


def test_add_table_names_the_mailbox(redis_url: str) -> None:
    result = warmup(redis_url, "add", "A@X.com", "--start", today().isoformat())
    assert result.returncode == 0, result.stderr
    assert "a@x.com" in result.stdout and result.stdout.rstrip().endswith("added a@x.com")


def test_reserve_exits_0_when_reserved_and_1_when_skipped(redis_url: str) -> None:
    _add(redis_url, "a@x.com", "--min-gap", "600", "--jitter", "0-0")
    first = warmup(redis_url, "reserve", "a@x.com", "--format", "json")
    assert first.returncode == 0, first.stderr
    data = json.loads(first.stdout)
    assert (data["status"], data["mailbox"], data["count_cap"]) == ("reserved", "a@x.com", "1/10")
    second = warmup(redis_url, "reserve", "a@x.com")
    assert second.returncode == 1
    assert "skipped-cooldown" in second.stdout
    # The gap it needs and the time left; the wait as a local clock time and a duration, rounded up.
    assert re.fullmatch(r"error: skipped-cooldown: no send allowed now for a@x\.com; next chance at "
                        r"\d\d:\d\d:\d\d \S+ \(in (9 min \d\d? s|10 min 0 s)\)\n", second.stderr), second.stderr
    assert re.search(r"needs 10 min 0 s between sends; (9 min \d\d? s|10 min 0 s) left", second.stdout), second.stdout


def test_reserve_picks_the_least_used(redis_url: str) -> None:
    _add(redis_url, "a@x.com", "--min-gap", "0", "--jitter", "0-0")
    _add(redis_url, "b@x.com", "--min-gap", "0", "--jitter", "0-0")
    picked = [json.loads(warmup(redis_url, "reserve", "a@x.com", "b@x.com", "--format", "json").stdout)["mailbox"]
              for _ in range(3)]
    assert picked == ["a@x.com", "b@x.com", "a@x.com"]


def test_plan_from_a_start_date_needs_no_redis() -> None:
    result = run_cli("--redis-url", "redis://127.0.0.1:1/0", "warmup", "plan", "--start", "2026-11-30",
                     "--days", "9", "--format", "json")
    assert result.returncode == 0, result.stderr
    caps = [(d["day"], d["cap"]) for d in json.loads(result.stdout)]
    assert caps == [(1, 10), (2, 10), (3, 10), (4, 10), (5, 10), (6, 10), (7, 10), (8, 15), (9, 15)]


def test_plan_table(redis_url: str) -> None:
    result = run_cli("warmup", "plan", "--start", "2026-11-30", "--days", "8")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("│ 2026-")]
    assert len(lines) == 8
    assert lines[0].split("│")[1:5] == [" 2026-11-30 ", " 1   ", " 10  ", " week-one "]
    assert lines[7].split("│")[1:5] == [" 2026-12-07 ", " 8   ", " 15  ", " ramp     "]


def test_plan_of_a_mailbox_reflects_its_spam_history(redis_url: str) -> None:
    start = today() - timedelta(days=20)
    _add(redis_url, "a@x.com", start=start)
    recorded = warmup(redis_url, "record", "--spam-rate", "0.15%", "--domain", "x.com",
                      "--date", (start + timedelta(days=3)).isoformat(), "--format", "json")
    assert recorded.returncode == 0, recorded.stderr
    assert json.loads(recorded.stdout)["verdict"] == "hold"
    result = warmup(redis_url, "plan", "a@x.com", "--days", "9", "--format", "json")
    # The held day 4 does not count: the first step comes on day 9 instead of day 8.
    assert [d["cap"] for d in json.loads(result.stdout)][-2:] == [10, 15]


def test_record_pause_rate_pauses_and_resume_clears(redis_url: str) -> None:
    _add(redis_url, "a@x.com", "--min-gap", "0", "--jitter", "0-0")
    recorded = warmup(redis_url, "record", "--spam-rate", "0.003", "--mailbox", "a@x.com", "--format", "json")
    assert recorded.returncode == 0, recorded.stderr
    assert json.loads(recorded.stdout)["paused"] == ["a@x.com"]
    assert warmup(redis_url, "reserve", "a@x.com").returncode == 1
    status = json.loads(warmup(redis_url, "status", "a@x.com", "--format", "json").stdout)[0]
    assert status["state"] == "paused" and "0.3%" in status["reason"] and status["next_eligible"] is None
    assert warmup(redis_url, "resume", "a@x.com").returncode == 0
    assert warmup(redis_url, "reserve", "a@x.com").returncode == 0


def test_pause_by_hand(redis_url: str) -> None:
    _add(redis_url, "a@x.com")
    result = warmup(redis_url, "pause", "a@x.com", "--reason", "complaint spike", "--format", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)[0]["reason"] == "complaint spike"


def test_import_sends_from_csv_and_json(redis_url: str, tmp_path: Path) -> None:
    _add(redis_url, "a@x.com", "--min-gap", "0", "--jitter", "0-0")
    now = datetime.now(UTC)
    recent = [now - timedelta(seconds=s) for s in (1, 2, 3)]
    csv_log = tmp_path / "sends.csv"
    csv_log.write_text("mailbox,sent_at,status\n" + "".join(f"a@x.com,{t.isoformat()},sent\n" for t in recent)
                       + f"a@x.com,{now.isoformat()},rejected\n")
    result = warmup(redis_url, "import-sends", str(csv_log), "--format", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)[0]["sent_today"] == 3
    json_log = tmp_path / "sends.json"
    json_log.write_text(json.dumps([{"mailbox": "a@x.com", "sent_at": t.isoformat()} for t in recent * 2]))
    assert json.loads(warmup(redis_url, "import-sends", str(json_log), "--format", "json").stdout)[0][
        "sent_today"] == 6


def test_mailboxes_load_from_the_inventory(redis_url: str, tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.yml"
    inventory.write_text((REPO_ROOT / "inventory.example.yml").read_text())
    # A write command adds the inventory's mailboxes; a read (status) never does.
    paused = run_cli("--inventory", str(inventory), "--redis-url", redis_url, "warmup", "pause", "bob@example.com")
    assert paused.returncode == 0, paused.stderr
    result = run_cli("--inventory", str(inventory), "--redis-url", redis_url, "warmup", "status", "--format", "json")
    assert result.returncode == 0, result.stderr
    rows = {row["mailbox"]: row for row in json.loads(result.stdout)}
    assert set(rows) == {"alice@example.com", "bob@example.com", "carol@example.org"}
    assert rows["carol@example.org"]["cap"] == 40


class TestBadInput:
    """Exit 2, one line naming the input and the fix, and nothing written to Redis."""

    def _refused(self, redis_client: redis.Redis, result, expected: str) -> None:  # type: ignore[no-untyped-def]
        before = sorted(redis_client.keys("*"))
        assert result.returncode == 2, result.stdout + result.stderr
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), result.stderr
        assert expected in result.stderr
        assert "Traceback" not in result.stderr
        assert sorted(redis_client.keys("*")) == before

    def test_invalid_address(self, redis_url: str, redis_client: redis.Redis) -> None:
        result = warmup(redis_url, "add", "alice-at-example.com", "--start", today().isoformat())
        self._refused(redis_client, result, "'alice-at-example.com' is not an email address like alice@example.com")
        assert redis_client.keys("*") == []

    def test_negative_gap_names_the_flag(self, redis_url: str, redis_client: redis.Redis) -> None:
        result = warmup(redis_url, "add", "a@x.com", "--start", today().isoformat(), "--min-gap", "-5")
        self._refused(redis_client, result, "--min-gap -5: must be 0 or more seconds")

    def test_reversed_jitter_names_the_flag(self, redis_url: str, redis_client: redis.Redis) -> None:
        result = warmup(redis_url, "add", "a@x.com", "--start", today().isoformat(), "--jitter", "90-10")
        self._refused(redis_client, result, "--jitter '90-10': need 0 <= LOW <= HIGH seconds")
        assert "jitter_s" not in result.stderr and "min_gap_s" not in result.stderr

    def test_bad_group_and_timezone_name_their_flags(self, redis_url: str, redis_client: redis.Redis) -> None:
        result = warmup(redis_url, "add", "a@x.com", "--start", today().isoformat(), "--group", "a b")
        self._refused(redis_client, result, "--group: group 'a b' must be")
        result = warmup(redis_url, "add", "a@x.com", "--start", today().isoformat(), "--timezone", "Mars/Base")
        self._refused(redis_client, result, "--timezone: timezone 'Mars/Base' is not an IANA time zone")

    def test_record_for_a_domain_without_mailboxes(self, redis_url: str, redis_client: redis.Redis) -> None:
        _add(redis_url, "a@x.com")
        result = warmup(redis_url, "record", "--spam-rate", "0.5%", "--domain", "nothere.com")
        self._refused(redis_client, result, "no mailbox under warm-up sends for domain nothere.com (domains with "
                                            "mailboxes: x.com)")

    def test_malformed_start(self, redis_url: str, redis_client: redis.Redis) -> None:
        result = warmup(redis_url, "add", "a@x.com", "--start", "30/11/2026")
        self._refused(redis_client, result, "--start '30/11/2026' is not a date like 2026-11-30")

    def test_ambiguous_spam_rate(self, redis_url: str, redis_client: redis.Redis) -> None:
        _add(redis_url, "a@x.com")
        result = warmup(redis_url, "record", "--spam-rate", "3", "--domain", "x.com")
        self._refused(redis_client, result, "spam rate '3' is ambiguous")

    def test_unknown_mailbox(self, redis_url: str, redis_client: redis.Redis) -> None:
        _add(redis_url, "a@x.com")
        for args in (("pause", "nobody@x.com"), ("resume", "nobody@x.com"), ("reserve", "nobody@x.com"),
                     ("status", "nobody@x.com"), ("record", "--spam-rate", "0.5%", "--mailbox", "nobody@x.com")):
            self._refused(redis_client, warmup(redis_url, *args), "unknown mailbox 'nobody@x.com'")

    def test_import_of_unknown_mailbox_writes_nothing(self, redis_url: str, redis_client: redis.Redis,
                                                      tmp_path: Path) -> None:
        _add(redis_url, "a@x.com")
        log = tmp_path / "sends.csv"
        stamp = datetime.now(UTC).isoformat()
        log.write_text(f"mailbox,sent_at\na@x.com,{stamp}\nnobody@x.com,{stamp}\n")
        before = redis_client.hgetall("sendhost:warmup:{default}:mbx:a@x.com")
        self._refused(redis_client, warmup(redis_url, "import-sends", str(log)), "unknown mailbox 'nobody@x.com'")
        assert redis_client.hgetall("sendhost:warmup:{default}:mbx:a@x.com") == before

    def test_naive_timestamp_in_log(self, redis_url: str, redis_client: redis.Redis, tmp_path: Path) -> None:
        log = tmp_path / "sends.csv"
        log.write_text("mailbox,sent_at\na@x.com,2026-11-30T09:00:00\n")
        self._refused(redis_client, warmup(redis_url, "import-sends", str(log)), "line 2: sent_at")
