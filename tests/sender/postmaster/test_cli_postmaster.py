"""`sendhost postmaster sync`, run as a user runs it, against a local FAKE of Google Postmaster Tools (tests/support/
postmaster_fake.py), a real PostgreSQL and a real Redis: the domains' figures shown and told to the warm-up gates,
Google's refusals (401, 403) one line naming the domain and the fix with exit 2, a missing setting exit 2; and
`postmaster authorize` against the test authorization server."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from subprocess import CompletedProcess
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from tests.support.oauth_server import authorization_server
from tests.support.postmaster_fake import FakePostmasterTools, fake_postmaster_tools, write_service_account_key

pytestmark = pytest.mark.service  # each test serves the fake on loopback

Cli = Callable[..., CompletedProcess[str]]
DOMAIN = "sender.example"
BOX = f"box0@{DOMAIN}"
TODAY = datetime.now(UTC).date()


@pytest.fixture
def fake() -> Iterator[FakePostmasterTools]:
    with fake_postmaster_tools() as served:
        served.add_domain(DOMAIN)
        yield served


def _inventory(tmp_path: Path, postmaster: str | None) -> Path:
    path = tmp_path / "inventory.yml"
    path.write_text(
        "all:\n  vars:\n    sendhost_mailboxes:\n"
        f"      - address: {BOX}\n        domain: {DOMAIN}\n"
        f"        start: '{TODAY - timedelta(days=30)}'\n        timezone: UTC\n"
        + (f"    sendhost_postmaster: {{{postmaster}}}\n" if postmaster else "")
        + "  children:\n    senders:\n      hosts: {}\n")
    return path


@pytest.fixture
def postmaster_cli(cli: Cli, database_url: str, redis_url: str, tmp_path: Path,
                   fake: FakePostmasterTools) -> Callable[..., CompletedProcess[str]]:
    key = write_service_account_key(fake, tmp_path / "sa.json")
    inventory = _inventory(tmp_path, f"service_account_key_file: '{key}', api_url: '{fake.url}'")
    assert cli("sender", "--database-url", database_url, "migrate", cwd=tmp_path).returncode == 0

    def run(*args: str, where: Path = inventory, env: dict[str, str] | None = None) -> CompletedProcess[str]:
        return cli("--inventory", str(where), "--redis-url", redis_url, *args, cwd=tmp_path, env=env)

    run.database_url = database_url  # type: ignore[attr-defined]
    return run


def test_sync_shows_each_domain_and_what_the_gates_did(postmaster_cli: Cli, fake: FakePostmasterTools,
                                                       database_url: str) -> None:
    held, paused = TODAY - timedelta(days=3), TODAY - timedelta(days=2)
    fake.set_day(DOMAIN, held, 0.0015)
    fake.set_day(DOMAIN, paused, 0.0031, reputation="LOW")
    result = postmaster_cli("postmaster", "--database-url", database_url, "sync")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert f"│ {DOMAIN} │ {paused} │ 0.31%     │ LOW        │ 2 of 14        │" in lines, result.stdout
    assert f"{DOMAIN} on {held}: spam rate 0.15% (Postmaster Tools) is at or above 0.1%: the ramp holds" in lines
    assert (f"{DOMAIN} on {paused}: spam rate 0.31% (Postmaster Tools) is at or above 0.3%: paused {BOX}; the ramp "
            "steps back") in lines
    status = postmaster_cli("warmup", "status", BOX, "--format", "json", env={"SENDHOST_DATABASE_URL": database_url})
    (row,) = json.loads(status.stdout)
    assert row["state"] == "paused" and f"on {paused} for {DOMAIN}" in row["reason"]
    assert {k: row["postmaster"][k] for k in ("domain", "date", "spam_ratio", "reputation", "verdict")} == {
        "domain": DOMAIN, "date": str(paused), "spam_ratio": 0.0031, "reputation": "LOW", "verdict": "pause"}
    table = postmaster_cli("warmup", "status", BOX, env={"SENDHOST_DATABASE_URL": database_url}).stdout.splitlines()
    at = table.index("spam rate as Postmaster Tools reports it")
    assert f"│ {DOMAIN} │ {paused} │ 0.31%     │ pause │ LOW        │ {paused}    │" in table[at:], "\n".join(table)


def test_sync_json_names_the_days_without_data(postmaster_cli: Cli, fake: FakePostmasterTools,
                                               database_url: str) -> None:
    fake.set_day(DOMAIN, TODAY - timedelta(days=2), None)
    result = postmaster_cli("postmaster", "--database-url", database_url, "sync", "--days", "3", "--format", "json")
    assert result.returncode == 0, result.stderr
    (domain,) = json.loads(result.stdout)["domains"]
    assert domain["days"] == [{"date": str(TODAY - timedelta(days=2)), "spam_ratio": None, "reputation": "HIGH"}]
    assert domain["no_data"] == [str(TODAY - timedelta(days=n)) for n in (3, 2, 1)]
    assert domain["told"] == [] and domain["problem"] is None


def test_a_403_is_one_line_naming_the_domain_and_the_fix_exit_2(postmaster_cli: Cli, fake: FakePostmasterTools,
                                                                 database_url: str) -> None:
    fake.forbidden.add(DOMAIN)
    result = postmaster_cli("postmaster", "--database-url", database_url, "sync")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert f"denied {fake.service_account_email} access to {DOMAIN} (403 PERMISSION_DENIED" in line
    assert f"add {fake.service_account_email} as a user of {DOMAIN} at https://postmaster.google.com" in line


def test_a_401_is_one_line_naming_the_fix_exit_2(postmaster_cli: Cli, fake: FakePostmasterTools,
                                                 database_url: str) -> None:
    fake.answer_next(401)
    fake.answer_next(401)
    result = postmaster_cli("postmaster", "--database-url", database_url, "sync")
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "refused the credentials of" in line and "check the service account key file" in line


def test_a_domain_not_in_postmaster_tools_is_exit_2_with_the_fix(postmaster_cli: Cli, database_url: str) -> None:
    result = postmaster_cli("postmaster", "--database-url", database_url, "sync", "--domain", "other.example")
    assert result.returncode == 2
    assert result.stderr.strip().endswith("other.example is not in Postmaster Tools for "
                                          "sync@project.iam.gserviceaccount.com: add and verify it at "
                                          "https://postmaster.google.com")


def test_a_domain_that_is_not_one_is_bad_input(postmaster_cli: Cli, database_url: str) -> None:
    result = postmaster_cli("postmaster", "--database-url", database_url, "sync", "--domain", "not a domain")
    assert result.returncode == 2
    assert result.stderr.strip() == "error: --domain 'not a domain' is not a domain name like example.com"


def test_without_sendhost_postmaster_sync_says_what_to_add(cli: Cli, tmp_path: Path, database_url: str) -> None:
    result = cli("--inventory", str(_inventory(tmp_path, None)), "postmaster", "--database-url", database_url,
                 "sync", cwd=tmp_path)
    assert result.returncode == 2
    assert "no sendhost_postmaster; add it with oauth:" in result.stderr


def test_authorize_takes_the_loopback_redirect_and_writes_the_refresh_token_0600(tmp_path: Path) -> None:
    """`sendhost postmaster authorize` against the test authorization server: the page it names signs the person in
    and redirects to its loopback listener; the code is exchanged (PKCE) and the refresh token written, mode 0600,
    asking for the read-only postmaster scope."""
    with authorization_server(client_secret=None) as server:
        server.state.signed_in_as = "ops@sender.example"
        token_file = tmp_path / "secrets" / "postmaster.token"
        inventory = _inventory(tmp_path, (
            f"oauth: {{provider: google, client_id: sendhost-test, token_url: '{server.token_url}', "
            f"authorization_url: '{server.base}/authorize', refresh_token_file: '{token_file}'}}"))
        sendhost = str(Path(sys.executable).with_name("sendhost"))
        child = subprocess.Popen([sendhost, "--inventory", str(inventory), "postmaster", "authorize"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
        assert child.stdout is not None
        prompt = child.stdout.readline()
        found = re.search(r"open (\S+) in a browser", prompt)
        assert found, prompt + (child.stderr.read() if child.stderr else "")
        assert parse_qs(urlsplit(found[1]).query)["scope"] == ["https://www.googleapis.com/auth/postmaster.readonly"]
        browser = requests.Session()
        browser.trust_env = False  # straight to loopback
        page = browser.get(found[1], timeout=30)
        assert page.status_code == 200 and "Authorization received" in page.text
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
        assert server.state.refresh_tokens.get(token_file.read_text().strip()) == "ops@sender.example"
        assert f"wrote the refresh token to {token_file} (mode 0600)" in out
