"""`sendhost warmup` as a new user meets it: future start dates, reads that never write, words that match the
facts, reservations settled from the command line. Each a subprocess against the real test Redis."""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import redis

from tests.conftest import REPO_ROOT, run_cli


def today() -> date:
    return datetime.now(UTC).date()


def _inventory(tmp_path: Path, bob_start: date) -> Path:
    """The example inventory, with bob's first day moved to `bob_start`."""
    text = (REPO_ROOT / "inventory.example.yml").read_text()
    assert 'start: "2026-11-30"' in text
    path = tmp_path / "inventory.yml"
    path.write_text(text.replace('start: "2026-11-30"', f'start: "{bob_start.isoformat()}"'))
    return path


def _warmup(redis_url: str, *args: str, inventory: Path | None = None):  # type: ignore[no-untyped-def]
    prefix = ("--inventory", str(inventory)) if inventory else ()
    return run_cli(*prefix, "--redis-url", redis_url, "warmup", *args)


class TestFutureStart:
    def test_one_future_mailbox_breaks_no_command(self, redis_url: str, tmp_path: Path) -> None:
        inventory = _inventory(tmp_path, today() + timedelta(days=3))
        reserved = _warmup(redis_url, "reserve", "carol@example.org", "--format", "json", inventory=inventory)
        assert reserved.returncode == 0, reserved.stderr
        status = _warmup(redis_url, "status", "--format", "json", inventory=inventory)
        assert status.returncode == 0, status.stderr
        rows = {row["mailbox"]: row for row in json.loads(status.stdout)}
        assert set(rows) == {"alice@example.com", "bob@example.com", "carol@example.org"}
        bob = rows["bob@example.com"]
        assert (bob["state"], bob["cap"], bob["day_number"], bob["reason"]) == (
            "not-started", 0, 0, f"first sending day is {today() + timedelta(days=3)}")
        skipped = _warmup(redis_url, "reserve", "bob@example.com", inventory=inventory)
        assert skipped.returncode == 1
        assert skipped.stderr.startswith("error: skipped-not-started: no send allowed now for bob@example.com")
        plan = _warmup(redis_url, "plan", "bob@example.com", "--days", "10", "--format", "json", inventory=inventory)
        assert plan.returncode == 0, plan.stderr
        days = json.loads(plan.stdout)
        assert [d["state"] for d in days[:3]] == ["not-started"] * 3 and [d["cap"] for d in days[:3]] == [0, 0, 0]
        assert (days[3]["date"], days[3]["day"], days[3]["cap"]) == ((today() + timedelta(days=3)).isoformat(), 1, 10)

    def test_add_with_a_future_start(self, redis_url: str) -> None:
        first = today() + timedelta(days=10)
        added = _warmup(redis_url, "add", "a@x.com", "--start", first.isoformat(), "--format", "json")
        assert added.returncode == 0, added.stderr
        [row] = json.loads(added.stdout)
        assert (row["state"], row["cap"]) == ("not-started", 0)
        table = _warmup(redis_url, "status")
        assert f"a@x.com: not-started: first sending day is {first}" in table.stdout
        plan = _warmup(redis_url, "plan", "--start", first.isoformat(), "--days", "3", "--format", "json")
        assert [d["state"] for d in json.loads(plan.stdout)] == ["not-started"] * 10 + ["week-one"] * 3


class TestStatusReadsOnly:
    def test_status_with_an_inventory_writes_nothing_and_says_the_store_is_empty(
            self, redis_url: str, redis_client: redis.Redis, tmp_path: Path) -> None:
        inventory = _inventory(tmp_path, today())
        result = _warmup(redis_url, "status", inventory=inventory)
        assert redis_client.keys("*") == []
        assert result.returncode == 1, result.stdout + result.stderr
        assert result.stderr.count("\n") == 1
        assert "holds no warm-up state, though the inventory lists 3 mailboxes" in result.stderr
        assert "not in the Redis from flag --redis-url yet: alice@example.com, bob@example.com" in result.stdout

    def test_status_names_inventory_mailboxes_not_yet_added(self, redis_url: str, redis_client: redis.Redis,
                                                            tmp_path: Path) -> None:
        assert _warmup(redis_url, "add", "a@x.com", "--start", today().isoformat()).returncode == 0
        before = {key: redis_client.type(key) for key in redis_client.keys("*")}
        result = _warmup(redis_url, "status", inventory=_inventory(tmp_path, today()))
        assert result.returncode == 0, result.stderr
        assert "carol@example.org (listed in the inventory" in result.stdout
        assert {key: redis_client.type(key) for key in redis_client.keys("*")} == before

    def test_an_empty_store_with_nothing_expected_is_not_an_error(self, redis_url: str) -> None:
        result = _warmup(redis_url, "status")
        assert result.returncode == 0 and result.stderr == ""
        assert "no mailbox is under warm-up; add one with `sendhost warmup add" in result.stdout


class TestWords:
    def test_a_verdict_that_changes_caps_says_which_and_how(self, redis_url: str) -> None:
        start = today() - timedelta(days=7)  # day 8: cap 15 after a healthy week
        assert _warmup(redis_url, "add", "a@x.com", "--start", start.isoformat()).returncode == 0
        yesterday = (today() - timedelta(days=1)).isoformat()
        result = _warmup(redis_url, "record", "--spam-rate", "0.5%", "--domain", "x.com", "--date", yesterday)
        assert result.returncode == 0, result.stderr
        assert f"a@x.com: cap from {today()} 15 -> 10 (stepped-back)" in result.stdout
        data = json.loads(_warmup(redis_url, "record", "--spam-rate", "0.05%", "--domain", "x.com", "--date",
                                  yesterday, "--format", "json").stdout)
        assert data["cap_changes"] == [{"mailbox": "a@x.com", "from": today().isoformat(), "cap_before": 10,
                                        "cap_after": 15, "state": "ramp"}]

    def test_a_verdict_that_changes_nothing_says_so(self, redis_url: str) -> None:
        assert _warmup(redis_url, "add", "a@x.com", "--start", today().isoformat()).returncode == 0
        result = _warmup(redis_url, "record", "--spam-rate", "0.05%", "--domain", "x.com")
        assert "caps unchanged for the next 14 days of a@x.com" in result.stdout

    def test_a_wait_in_status_is_a_clock_time_and_a_duration(self, redis_url: str) -> None:
        assert _warmup(redis_url, "add", "a@x.com", "--start", today().isoformat(), "--min-gap", "3600",
                       "--jitter", "0-0").returncode == 0
        assert _warmup(redis_url, "reserve", "a@x.com").returncode == 0
        status = _warmup(redis_url, "status")
        assert re.search(r"\d\d:\d\d:\d\d \S+ \(in (59 min \d\d? s|1 h 0 min)\)", status.stdout), status.stdout
        assert "a@x.com: cooldown: needs 1 h 0 min between sends; " in status.stdout


class TestSettlingFromTheCli:
    def test_cancel_gives_the_slot_back_and_confirm_keeps_it(self, redis_url: str) -> None:
        assert _warmup(redis_url, "add", "a@x.com", "--start", today().isoformat(), "--min-gap", "0",
                       "--jitter", "0-0").returncode == 0
        reserved = _warmup(redis_url, "reserve", "a@x.com")
        token = re.search(r"reservation (\S+) \(counts against today's cap until settled\)", reserved.stdout)
        assert token, reserved.stdout
        assert f"`sendhost warmup cancel {token[1]}`" in reserved.stdout
        [row] = json.loads(_warmup(redis_url, "status", "--format", "json").stdout)
        assert (row["reserved"], row["sent"]) == (1, 0)  # counted against the cap, not as sent
        cancelled = _warmup(redis_url, "cancel", token[1])
        assert cancelled.returncode == 0, cancelled.stderr
        assert cancelled.stdout == f"cancelled {token[1]}: the slot is free again\n"
        [row] = json.loads(_warmup(redis_url, "status", "--format", "json").stdout)
        assert (row["reserved"], row["sent"]) == (0, 0)
        again = _warmup(redis_url, "cancel", token[1])
        assert again.returncode == 1 and "already confirmed or cancelled" in again.stderr

        second = json.loads(_warmup(redis_url, "reserve", "a@x.com", "--format", "json").stdout)["reservation"]
        confirmed = _warmup(redis_url, "confirm", second)
        assert confirmed.returncode == 0 and confirmed.stdout.startswith(f"confirmed {second}: counted as sent")
        [row] = json.loads(_warmup(redis_url, "status", "--format", "json").stdout)
        assert (row["reserved"], row["sent"]) == (1, 1)
        assert _warmup(redis_url, "cancel", second).returncode == 1  # a confirmed send is not given back

    def test_bad_tokens_and_failure_classes(self, redis_url: str) -> None:
        assert _warmup(redis_url, "add", "a@x.com", "--start", today().isoformat()).returncode == 0
        bad = _warmup(redis_url, "confirm", "not-a-token")
        assert bad.returncode == 2 and "is not a token like 12:2026-11-30:alice@example.com" in bad.stderr
        unknown = _warmup(redis_url, "cancel", "1:2026-11-30:nobody@x.com")
        assert unknown.returncode == 2 and "unknown mailbox 'nobody@x.com'" in unknown.stderr
        wrong = _warmup(redis_url, "cancel", "1:2026-11-30:a@x.com", "--failure", "bounce")
        assert wrong.returncode == 2 and "--failure 'bounce' is not a failure class" in wrong.stderr


class TestTerminalText:
    def test_markup_and_control_characters_in_a_cell_are_shown_not_obeyed(self, redis_url: str) -> None:
        assert _warmup(redis_url, "add", "a@x.com", "--start", today().isoformat()).returncode == 0
        assert _warmup(redis_url, "pause", "a@x.com", "--reason", "see [/] and \x1b[31mred\x07").returncode == 0
        result = _warmup(redis_url, "reserve", "a@x.com")  # the reason is a table cell
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
        assert "see [/] and \\x1b[31mred\\x07" in result.stdout
        assert "\x1b" not in result.stdout and "\x07" not in result.stdout

    def test_a_table_in_a_pipe_keeps_each_row_on_one_line(self, redis_url: str) -> None:
        address = "a-very-long-local-part-that-a-narrow-table-would-fold-in-the-middle-of-a-word@" + "x" * 40 + ".com"
        assert _warmup(redis_url, "add", address, "--start", today().isoformat()).returncode == 0
        status = _warmup(redis_url, "status")
        assert status.returncode == 0, status.stderr
        [row] = [line for line in status.stdout.splitlines() if "a-very-long" in line]
        assert address in row and "ready" in row and "closed" in row


class TestStartMovedEarlier:
    def test_add_again_with_an_earlier_start_keeps_week_one_without_force(self, redis_url: str) -> None:
        assert _warmup(redis_url, "add", "a@x.com", "--start", today().isoformat()).returncode == 0
        earlier = (today() - timedelta(days=20)).isoformat()
        refused = _warmup(redis_url, "add", "a@x.com", "--start", earlier)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "would lift it out of week one today (day 1 -> day 21" in refused.stderr
        assert "pass --force" in refused.stderr
        assert json.loads(_warmup(redis_url, "status", "--format", "json").stdout)[0]["cap"] == 10
        forced = _warmup(redis_url, "add", "a@x.com", "--start", earlier, "--force", "--format", "json")
        assert forced.returncode == 0, forced.stderr
        assert json.loads(forced.stdout)[0]["day_number"] == 21


def test_status_of_a_named_inventory_mailbox_not_yet_added(redis_url: str, redis_client: redis.Redis,
                                                           tmp_path: Path) -> None:
    inventory = _inventory(tmp_path, today())
    result = _warmup(redis_url, "status", "bob@example.com", inventory=inventory)
    assert result.returncode == 0, result.stderr
    assert "not in the Redis from flag --redis-url yet: bob@example.com (listed in the inventory" in result.stdout
    assert redis_client.keys("*") == []
    unknown = _warmup(redis_url, "status", "nobody@example.com", inventory=inventory)
    assert unknown.returncode == 2 and "unknown mailbox 'nobody@example.com'" in unknown.stderr
