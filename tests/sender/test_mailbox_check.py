"""`sendhost mailbox check BOX` against real servers: a password mailbox at a real Postfix (Dovecot SASL) and
Dovecot's IMAP, an OAuth mailbox at the introspecting submission server and Dovecot's oauth2 passdb. Each step is
reported on its own line, ok or failed with the server's reply; nothing is sent; exit 0, 1, 2."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.dovecot import Dovecot, dovecot_server
from tests.support.oauth_server import AuthorizationServer, authorization_server
from tests.support.oauth_submission import OAuthRecorder, oauth_submission_server
from tests.support.postfix import postfix_submission

BOX = "box@sender.example"


def _inventory(tmp_path: Path, smtp: str, imap: str | None) -> Path:
    path = tmp_path / "inventory.yml"
    path.write_text(
        "all:\n  vars:\n    sendhost_mailboxes:\n"
        f"      - address: {BOX}\n        domain: sender.example\n        start: '2026-11-01'\n"
        f"        smtp: {{{smtp}}}\n" + (f"        imap: {{{imap}}}\n" if imap else "") +
        "  children:\n    senders:\n      hosts: {}\n")
    return path


def _password(tmp_path: Path, password: str) -> Path:
    path = tmp_path / "box.pw"
    path.write_text(password + "\n")
    path.chmod(0o600)
    return path


def _imap(server: Dovecot, extra: str = "") -> str:
    return f"host: {server.host}, port: {server.imaps_port}, security: tls, ca_file: '{server.ca_file}'{extra}"


@pytest.mark.slow
def test_a_password_mailbox_is_checked_at_postfix_and_dovecot_step_by_step(tmp_path: Path) -> None:
    with postfix_submission({BOX: "right"}) as smtp, dovecot_server({BOX: "right"}) as imap:
        secret = _password(tmp_path, "right")
        smtp_block = (f"host: {smtp.host}, port: {smtp.port}, security: starttls, username: {BOX}, "
                      f"password_file: '{secret}', ca_file: '{smtp.ca_file}'")
        inventory = _inventory(tmp_path, smtp_block, _imap(imap, f", password_file: '{secret}'"))
        good = run_cli("--inventory", str(inventory), "mailbox", "check", BOX)
        secret.write_text("wrong\n")
        bad = run_cli("--inventory", str(inventory), "mailbox", "check", BOX, "--format", "json")
        sessions = smtp.sessions(at_least=2)
    assert good.returncode == 0, good.stderr
    assert good.stdout.splitlines() == [
        "smtp secret ok: password", f"smtp connect ok: {smtp.host}:{smtp.port}", "smtp tls ok: starttls",
        f"smtp auth ok: {BOX}", "imap secret ok", "imap connect ok", "imap login ok",
        "imap select ok: INBOX (0 messages)"]
    assert bad.returncode == 1, bad.stderr
    report = json.loads(bad.stdout)
    states = {(s["protocol"], s["step"]): s for s in report["steps"]}
    assert report["ok"] is False
    assert [states["smtp", step]["state"] for step in ("connect", "tls", "auth")] == ["ok", "ok", "failed"]
    assert states["smtp", "auth"]["detail"].startswith("rejected at auth: 535"), states["smtp", "auth"]
    assert states["imap", "login"]["state"] == "failed" and "refused" in states["imap", "login"]["detail"]
    assert states["imap", "select"]["state"] == "not tried"
    assert "smtp auth failed: rejected at auth: 535" in bad.stderr
    # nothing sent, one login each time; the wrong password cost one failed AUTH
    assert [(s.failed_logins, s.auth) for s in sessions[-2:]] == [((), "1"), (("PLAIN",), "0/1")]


@pytest.fixture
def authorization() -> Iterator[AuthorizationServer]:
    with authorization_server(client_secret=None) as server:
        yield server


@pytest.mark.slow
def test_an_oauth_mailbox_is_checked_with_its_grant_and_a_revoked_one_fails_at_the_secret(
        tmp_path: Path, authorization: AuthorizationServer) -> None:
    token_file = tmp_path / "box.refresh"
    token_file.write_text(authorization.state.issue_refresh_token(BOX) + "\n")
    token_file.chmod(0o600)
    with oauth_submission_server(tmp_path, authorization.introspection_url) as smtp, \
            dovecot_server({BOX: "unused"}, oauth2_introspection_url=authorization.introspection_url) as imap:
        smtp_block = (f"host: {smtp.host}, port: {smtp.port}, security: starttls, username: {BOX}, "
                      f"ca_file: '{smtp.ca_file}', auth: oauth2, oauth: {{provider: generic, "
                      f"client_id: {authorization.state.client_id}, token_url: '{authorization.token_url}', "
                      f"scope: smtp, refresh_token_file: '{token_file}'}}")
        inventory = _inventory(tmp_path, smtp_block, _imap(imap))
        good = run_cli("--inventory", str(inventory), "mailbox", "check", BOX, "--format", "json")
        authorization.state.revoke(BOX)
        (token_file.parent / (token_file.name + ".access")).unlink()  # no access token left to log in with
        revoked = run_cli("--inventory", str(inventory), "mailbox", "check", BOX)
        assert isinstance(smtp.recorder, OAuthRecorder)
        attempts = [(a.user, a.success) for a in smtp.recorder.attempts_snapshot()]
        sent = smtp.recorder.snapshot()
    assert good.returncode == 0, good.stderr
    report = json.loads(good.stdout)
    assert report["ok"] is True and [(s["protocol"], s["step"], s["state"]) for s in report["steps"]] == [
        ("smtp", "secret", "ok"), ("smtp", "connect", "ok"), ("smtp", "tls", "ok"), ("smtp", "auth", "ok"),
        ("imap", "secret", "ok"), ("imap", "connect", "ok"), ("imap", "login", "ok"), ("imap", "select", "ok")]
    assert len(authorization.state.snapshot()[0]) == 1  # one access token, shared by the SMTP and IMAP logins
    assert revoked.returncode == 1
    assert revoked.stdout.splitlines()[0].startswith("smtp secret failed: ") and \
        "run sendhost mailbox authorize" in revoked.stdout.splitlines()[0], revoked.stdout
    assert "smtp connect not tried" in revoked.stdout and "imap login not tried" in revoked.stdout
    assert attempts == [(BOX, True)] and sent == []  # one SMTP login in all, and no message


def test_a_mailbox_not_in_the_inventory_is_exit_2(tmp_path: Path) -> None:
    inventory = _inventory(tmp_path, f"host: smtp.example.com, username: {BOX}, password_env: SENDHOST_SECRET_X",
                           None)
    result = run_cli("--inventory", str(inventory), "mailbox", "check", "other@sender.example")
    assert result.returncode == 2
    assert "no mailbox other@sender.example" in result.stderr and "Traceback" not in result.stderr
