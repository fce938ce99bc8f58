"""OAuth 2.0 mailboxes against real servers: the test authorization server (rotating refresh tokens, 15 s access
tokens, invalid_grant, introspection) and a submission server that checks every bearer token with it. The agent
renews a token before it expires, one refresh per expiry however many workers and agents want it, renews once on
a refused token, pauses a mailbox whose grant is refused without sending or failing anything, and waits out a
token endpoint that is down."""

from __future__ import annotations

import base64
import imaplib
import itertools
import json
import os
import re
import signal
import smtplib
import ssl
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests

from sender.feedback.imap import logged_in
from sender.oauth import TokenKeeper, TokenUnavailable, refresh_margin_s
from sender.oauth.files import write_private
from sender.oauth.flows import Flow, default_flow
from sender.oauth.opening import open_refreshing
from sender.oauth.sasl import Mechanism, choose, error_answer, initial_response
from sender.sending.message import build_message
from sender.sending.submission import Result, ResultKind, SubmissionSession
from sendhost.model import Credential, ImapSettings, OAuthSettings, Submission
from tests.conftest import REPO_ROOT
from tests.sender.oauth_world import make_oauth_world, refresh_token_file
from tests.sender.world import World
from tests.support.dovecot import Dovecot, dovecot_server
from tests.support.net import free_port
from tests.support.oauth_server import AuthorizationServer, Grant, authorization_server
from tests.support.oauth_submission import OAuthRecorder, oauth_submission_server
from tests.support.postfix import Postfix, postfix_submission
from tests.support.submission import Recorder, SubmissionServer
from warmup import Guard

USER = "box@sender.example"


@pytest.fixture
def authorization() -> Iterator[AuthorizationServer]:
    with authorization_server(client_secret=None) as server:
        yield server


@pytest.fixture
def oauth_smtp(tmp_path: Path, authorization: AuthorizationServer) -> Iterator[SubmissionServer]:
    with oauth_submission_server(tmp_path, authorization.introspection_url) as server:
        yield server


def _recorder(server: SubmissionServer) -> OAuthRecorder:
    assert isinstance(server.recorder, OAuthRecorder)
    return server.recorder


def _submission(tmp_path: Path, authorization: AuthorizationServer, server: SubmissionServer,
                secret_env: str | None = None) -> Submission:
    token_file = tmp_path / "box.refresh"
    token_file.write_text(authorization.state.issue_refresh_token(USER) + "\n")
    token_file.chmod(0o600)
    oauth = OAuthSettings("generic", authorization.state.client_id, authorization.token_url, "smtp",
                          str(token_file), client_secret_env=secret_env)
    return Submission(server.host, server.port, "starttls", USER, Credential(USER, "smtp", "oauth2", oauth=oauth),
                      ca_file=str(server.ca_file))


def test_the_refresh_margin_scales_with_the_lifetime() -> None:
    assert refresh_margin_s(3600) == 360.0  # an hour's token: renewed six minutes early
    assert refresh_margin_s(15) == 3.0  # a 15 s token: a few seconds, not at every use
    assert refresh_margin_s(4) == 2.0  # never more than half its life early


def test_the_mechanism_is_chosen_from_the_offer_and_carries_the_token() -> None:
    assert choose("PLAIN LOGIN XOAUTH2") is Mechanism.XOAUTH2  # Exchange Online
    assert choose("LOGIN PLAIN XOAUTH2 OAUTHBEARER") is Mechanism.OAUTHBEARER  # Gmail: RFC 7628's own first
    assert choose("PLAIN LOGIN") is None
    assert base64.b64decode(initial_response(Mechanism.OAUTHBEARER, "a,b=c@x", "T")) == (
        b"n,a=a=2Cb=3Dc@x,\x01auth=Bearer T\x01\x01")
    assert base64.b64decode(initial_response(Mechanism.XOAUTH2, "u@x", "T")) == b"user=u@x\x01auth=Bearer T\x01\x01"


@pytest.mark.service  # the authorization server, started here for its client secret
def test_a_token_is_kept_until_its_margin_and_a_rotated_refresh_token_replaces_the_file(
        tmp_path: Path) -> None:
    with authorization_server(client_secret="s3cret") as authorization:
        server = SubmissionServer("127.0.0.1", 1, tmp_path / "none", OAuthRecorder({}))  # not dialled here
        submission = _submission(tmp_path, authorization, server, secret_env="SENDHOST_SECRET_OAUTH")
        assert submission.credential.oauth is not None
        token_file = Path(submission.credential.oauth.refresh_token_file)
        now = [1_000_000.0]
        keeper = TokenKeeper(env={"SENDHOST_SECRET_OAUTH": "s3cret"}, clock=lambda: now[0])
        first = keeper.secret(submission.credential)
        now[0] += 11.9  # 3.1 s left of 15: still fresh
        assert keeper.secret(submission.credential) == first
        grants, _ = authorization.state.snapshot()
        assert len(grants) == 1
        assert token_file.read_text().strip() in authorization.state.refresh_tokens  # the rotated one, kept
        assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
        now[0] += 0.2  # inside the margin: renewed
        second = keeper.secret(submission.credential)
        grants, refusals = authorization.state.snapshot()
        assert second != first and len(grants) == 2 and refusals == []
        # The second grant presented the refresh token the first one rotated in, which now works no more.
        assert grants[1].presented != grants[0].presented
        assert grants[1].presented not in authorization.state.refresh_tokens
        assert not list(tmp_path.glob(".box.refresh.*.tmp"))  # nothing half-written left behind


def test_a_refused_token_is_renewed_once_and_the_session_opened_again(
        tmp_path: Path, authorization: AuthorizationServer, oauth_smtp: SubmissionServer) -> None:
    submission = _submission(tmp_path, authorization, oauth_smtp)
    keeper = TokenKeeper(env={})
    session = open_refreshing(keeper, submission, "at-revoked-or-expired", source_ip=None, timeout_s=10)
    assert isinstance(session, SubmissionSession), session
    result = session.hand_over(build_message(mailbox=USER, to="lead@rcpt.example", subject="Hi", text="Hello",
                                             message_id="<1@sender.example>", unsubscribe="https://u.example.test/u/1"))
    assert result.kind is ResultKind.ACCEPTED, result
    attempts = _recorder(oauth_smtp).attempts_snapshot()
    assert [(a.mechanism, a.success) for a in attempts] == [("OAUTHBEARER", False), ("OAUTHBEARER", True)]
    assert len(authorization.state.snapshot()[0]) == 1


def test_a_second_refusal_stands(tmp_path: Path, authorization: AuthorizationServer,
                                 oauth_smtp: SubmissionServer) -> None:
    """The server refuses even the renewed token (say the mailbox's SMTP AUTH is off): one retry, not a loop."""
    submission = _submission(tmp_path, authorization, oauth_smtp)
    wrong_user = Submission(submission.host, submission.port, "starttls", "other@sender.example",
                            submission.credential, ca_file=submission.ca_file)
    result = open_refreshing(TokenKeeper(env={}), wrong_user, "at-stale", source_ip=None, timeout_s=10)
    assert isinstance(result, Result) and result.code == 535
    assert len(_recorder(oauth_smtp).attempts_snapshot()) == 2


def test_a_token_endpoint_that_is_down_is_waited_out(tmp_path: Path, authorization: AuthorizationServer,
                                                     oauth_smtp: SubmissionServer) -> None:
    submission = _submission(tmp_path, authorization, oauth_smtp)
    paused: list[tuple[str, str]] = []
    keeper = TokenKeeper(env={}, on_refused=lambda box, why: paused.append((box, why)))
    authorization.state.down = True
    with pytest.raises(TokenUnavailable) as first:
        keeper.secret(submission.credential)
    assert not first.value.refused and first.value.delay_s == 2.0
    with pytest.raises(TokenUnavailable) as second:  # within the backoff: the endpoint is not asked again
        keeper.secret(submission.credential)
    assert 0 < second.value.delay_s <= 2.0
    authorization.state.down = False
    assert paused == [] and authorization.state.snapshot() == ([], [])


def _enqueue(world: World, count: int) -> None:
    world.enqueue(count, group="sales")


def test_a_revoked_refresh_token_pauses_the_mailbox_and_nothing_is_sent_or_failed(
        tmp_path: Path, database_url: str, redis_url: str, authorization: AuthorizationServer,
        oauth_smtp: SubmissionServer) -> None:
    world = make_oauth_world(tmp_path, database_url, redis_url, oauth_smtp, authorization)
    (mailbox,) = world.mailboxes
    authorization.state.revoke(mailbox)
    _enqueue(world, 2)
    agent, factory = world.agent()
    reports = agent.run(factory, 1, once=True, stop=threading.Event())
    reason = f"oauth: refresh refused (invalid_grant); run sendhost mailbox authorize {mailbox}"
    assert reports and reports[0].kind == "blocked" and reports[0].detail == reason
    assert reports[0].login_failed  # `sender run --once` exits 1 naming it
    with Guard.from_url(redis_url) as guard:
        (status,) = guard.status([mailbox])
    assert (status.state, status.reason, status.breaker) == ("paused", reason, "closed")
    with world.ledger() as ledger:
        rows = [ledger.show(f"L{n}", 1) for n in range(2)]
    assert all(shown is not None and shown.row["status"] == "queued" for shown in rows), rows
    assert oauth_smtp.recorder.snapshot() == [] and _recorder(oauth_smtp).attempts_snapshot() == []
    assert len(authorization.state.snapshot()[1]) == 1  # asked once; the paused mailbox is not asked again


def _two_agents_send_across_expiries(world: World, authorization: AuthorizationServer,
                                     seconds: int) -> list[dict[str, Any]]:
    """Two agent processes × 4 workers send for `seconds` (15 s tokens: several expiries); each refresh waited for
    its expiry and no refresh token was presented twice (rotating tokens: a stampede shows as an invalid_grant).
    Their summaries."""
    _enqueue(world, 150)
    children = [subprocess.Popen([sys.executable, "-m", "tests.sender.oauth_agent_child", str(world.inventory),
                                  world.database_url, world.redis_url, "4", str(seconds)], cwd=REPO_ROOT,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [child.communicate(timeout=seconds + 60) for child in children]
    assert [child.returncode for child in children] == [0, 0], [err[-2000:] for _, err in outputs]
    summaries: list[dict[str, Any]] = [json.loads(out) for out, _ in outputs]
    grants, refusals = authorization.state.snapshot()
    assert refusals == []  # no refresh token presented twice: no stampede
    for mailbox in world.mailboxes:
        times = [g.at for g in grants if g.user == mailbox]
        assert len(times) >= 3, times  # several expiries
        gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
        assert min(gaps) >= authorization.state.lifetime_s / 2, gaps  # each refresh waited for its expiry
        assert refresh_token_file(world, mailbox).read_text().strip() in authorization.state.refresh_tokens
    sent = [s["kinds"].get("sent", 0) for s in summaries]
    assert all(n > 0 for n in sent), summaries
    assert {kind for s in summaries for kind in s["kinds"]} <= {"sent", "blocked"}
    assert not [d for s in summaries for d in s["details"] if "oauth" in d or "auth" in d.lower()]
    with Guard.from_url(world.redis_url) as guard:
        assert [(s.state, s.breaker) for s in guard.status(world.mailboxes)] != [] and all(
            s.state != "paused" and s.breaker == "closed" for s in guard.status(world.mailboxes))
    return summaries


@pytest.mark.slow
def test_two_agents_with_four_workers_refresh_once_per_expiry_and_never_disconnect(
        tmp_path: Path, database_url: str, redis_url: str, authorization: AuthorizationServer,
        oauth_smtp: SubmissionServer) -> None:
    """50 s of sending with 15 s tokens: each mailbox's token expires three or four times."""
    world = make_oauth_world(tmp_path, database_url, redis_url, oauth_smtp, authorization, mailboxes=2,
                             min_gap_s=1.0)
    summaries = _two_agents_send_across_expiries(world, authorization, 50)
    attempts = _recorder(oauth_smtp).attempts_snapshot()
    assert attempts and all(a.success for a in attempts)  # never a refused token: never a 535
    assert sum(s["kinds"].get("sent", 0) for s in summaries) == len(oauth_smtp.recorder.snapshot())


@pytest.mark.slow
def test_two_agents_send_through_postfix_and_dovecot_sasl_across_token_expiries(
        tmp_path: Path, database_url: str, redis_url: str, authorization: AuthorizationServer) -> None:
    """The same at a real Postfix submission service: STARTTLS, OAUTHBEARER (what it offers first after Dovecot's
    list), each token checked by Dovecot's oauth2 passdb against the authorization server's introspection."""
    with postfix_submission({}, authorization.introspection_url) as postfix:
        server = SubmissionServer(postfix.host, postfix.port, postfix.ca_file, Recorder(users={}))
        world = make_oauth_world(tmp_path, database_url, redis_url, server, authorization, mailboxes=2,
                                 min_gap_s=1.0)
        summaries = _two_agents_send_across_expiries(world, authorization, 50)
        sessions = postfix.sessions()
        log = postfix.log()
    sent = sum(s["kinds"].get("sent", 0) for s in summaries)
    logged_in = [s for s in sessions if s.auth]
    assert len(logged_in) == sent, log[-3000:]  # one session a message, each one AUTH that succeeded
    assert all((s.failed_logins, s.auth) == ((), "1") for s in logged_in), log[-3000:]
    assert len(re.findall(r"sasl_method=OAUTHBEARER", log)) == sent
    assert set(authorization.state.introspected) <= {g.access_token for g in authorization.state.snapshot()[0]}


@pytest.mark.service
def test_postfix_takes_xoauth2_and_oauthbearer_through_dovecot_and_refuses_a_stranger_token_once(
        tmp_path: Path, authorization: AuthorizationServer, oauth_smtp: SubmissionServer) -> None:
    token = TokenKeeper(env={}).secret(_submission(tmp_path, authorization, oauth_smtp).credential)
    with postfix_submission({}, authorization.introspection_url) as postfix:
        before = len(postfix.sessions())
        replies = [_smtp_login(postfix, mechanism, USER, presented) for mechanism, presented in
                   [(Mechanism.XOAUTH2, token), (Mechanism.OAUTHBEARER, token), (Mechanism.XOAUTH2, "at-never")]]
        sessions = postfix.sessions(at_least=before + 3)[before:]
    assert [code for code, _ in replies] == [235, 235, 535], replies
    assert [(s.failed_logins, s.auth) for s in sessions] == [((), "1"), ((), "1"), (("XOAUTH2",), "0/1")]
    assert {token, "at-never"} <= set(authorization.state.introspected)  # Dovecot asked the server


def _smtp_login(postfix: Postfix, mechanism: Mechanism, user: str, token: str) -> tuple[int, bytes]:
    """AUTH with `token` in the initial response; a 334 failure challenge answered as the mechanism says."""
    client = smtplib.SMTP(postfix.host, postfix.port, timeout=10)
    try:
        client.starttls(context=ssl.create_default_context(cafile=str(postfix.ca_file)))
        client.ehlo()
        code, reply = client.docmd("AUTH", f"{mechanism.value} {initial_response(mechanism, user, token)}")
        if code == 334:
            code, reply = client.docmd(error_answer(mechanism))
        client.quit()
        return code, reply
    finally:
        client.close()


@pytest.mark.slow
def test_mailbox_authorize_completes_the_device_flow_and_writes_the_refresh_token_0600(
        tmp_path: Path, database_url: str, redis_url: str, authorization: AuthorizationServer,
        oauth_smtp: SubmissionServer) -> None:
    world = make_oauth_world(tmp_path, database_url, redis_url, oauth_smtp, authorization)
    (mailbox,) = world.mailboxes
    token_file = refresh_token_file(world, mailbox)
    token_file.unlink()  # a mailbox never authorized: the inventory still loads for this command
    sendhost = str(Path(sys.executable).with_name("sendhost"))
    child = subprocess.Popen([sendhost, "--inventory", str(world.inventory), "mailbox", "authorize", mailbox],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    assert child.stdout is not None
    prompt = child.stdout.readline()
    found = re.search(r"open (\S+/device) and enter the code (\w+)", prompt)
    assert found, prompt + child.stderr.read() if child.stderr else prompt
    authorization.state.approve(found[2], mailbox)  # the person signs in and types the code
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
    assert authorization.state.refresh_tokens.get(token_file.read_text().strip()) == mailbox
    assert json.loads(out.splitlines()[-1])["smtp_login"] == "ok"
    assert [(a.user, a.success) for a in _recorder(oauth_smtp).attempts_snapshot()] == [(mailbox, True)]
    assert oauth_smtp.recorder.snapshot() == []  # the check sends nothing


def _agent_refreshing(world: World, authorization: AuthorizationServer) -> subprocess.Popen[str]:
    """An agent process (one worker, one row to send) whose token refresh is in flight: it holds the host's refresh
    lock and read the refresh token's file, and the token endpoint has not answered it yet (until the test lets
    it: `refreshes_held = False`)."""
    _enqueue(world, 1)
    authorization.state.refreshes_held = True
    agent = subprocess.Popen([sys.executable, "-m", "tests.sender.oauth_agent_child", str(world.inventory),
                              world.database_url, world.redis_url, "1", "8"], cwd=REPO_ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not authorization.state.refresh_arrived.wait(60):
        agent.kill()
        raise AssertionError(f"the agent asked for no token: {agent.communicate()[1][-2000:]}")
    return agent


def _device_grant(authorization: AuthorizationServer) -> Grant:
    """The device grant the server made (what `mailbox authorize` got), once it made it."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = [g for g in authorization.state.snapshot()[0] if not g.presented.startswith("rt-")]
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError("authorize got no device grant")


def _agent_finished(agent: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = agent.communicate(timeout=60)
    assert agent.returncode == 0, err[-2000:]
    summary: dict[str, Any] = json.loads(out)
    return summary


@pytest.mark.slow
def test_mailbox_authorize_during_an_agents_refresh_leaves_the_new_grant_in_the_files(
        tmp_path: Path, database_url: str, redis_url: str, authorization: AuthorizationServer,
        oauth_smtp: SubmissionServer) -> None:
    """`mailbox authorize` writes under the agents' refresh lock: a refresh in flight (the old grant's, which
    rotates its token) finishes first, and the new authorization is what both files hold after the two."""
    world = make_oauth_world(tmp_path, database_url, redis_url, oauth_smtp, authorization)
    (mailbox,) = world.mailboxes
    token_file = refresh_token_file(world, mailbox)
    old = token_file.read_text().strip()
    agent = _agent_refreshing(world, authorization)
    sendhost = str(Path(sys.executable).with_name("sendhost"))
    child = subprocess.Popen([sendhost, "--inventory", str(world.inventory), "mailbox", "authorize", mailbox,
                              "--flow", "device", "--no-check"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    assert child.stdout is not None
    prompt = child.stdout.readline()
    found = re.search(r"and enter the code (\w+)", prompt)
    assert found, prompt + (child.stderr.read() if child.stderr else "")
    authorization.state.approve(found[1], mailbox)
    new = _device_grant(authorization)
    time.sleep(1.0)  # what authorize writes without the lock, it has written by now
    assert (child.poll(), token_file.read_text().strip()) == (None, old)  # it waits for the agent's refresh lock
    authorization.state.refreshes_held = False  # the old grant's refresh is answered, with a rotated token
    _out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert _agent_finished(agent)["kinds"] == {"sent": 1}
    (rotated,) = [g for g in authorization.state.snapshot()[0] if g.presented == old]
    assert token_file.read_text().strip() == new.refresh_token != rotated.refresh_token
    access = json.loads(token_file.with_name(token_file.name + ".access").read_text())
    assert access["access_token"] == new.access_token


@pytest.mark.slow
def test_a_refresh_token_file_rewritten_during_a_refresh_is_newer_and_kept(
        tmp_path: Path, database_url: str, redis_url: str, authorization: AuthorizationServer,
        oauth_smtp: SubmissionServer) -> None:
    """The keeper compares the file with what it read, under the lock, before it writes: a file rewritten meanwhile
    by a writer without the lock (a person copying it in, an older sendhost's authorize) is newer than the old
    grant's rotated token and stays; the renewed access token serves that agent only."""
    world = make_oauth_world(tmp_path, database_url, redis_url, oauth_smtp, authorization)
    (mailbox,) = world.mailboxes
    token_file = refresh_token_file(world, mailbox)
    old = token_file.read_text().strip()
    agent = _agent_refreshing(world, authorization)
    new = authorization.state.issue_refresh_token(mailbox)
    write_private(token_file, new + "\n")  # without the lock
    authorization.state.refreshes_held = False
    assert _agent_finished(agent)["kinds"] == {"sent": 1}
    assert [g.presented for g in authorization.state.snapshot()[0]] == [old]  # the agent's refresh was answered
    assert token_file.read_text().strip() == new
    assert not token_file.with_name(token_file.name + ".access").exists()


def _loopback_authorize(world: World, mailbox: str, *options: str) -> tuple[subprocess.Popen[str], str]:
    """`sendhost mailbox authorize --flow loopback` started, and the page it asks the person to open."""
    sendhost = str(Path(sys.executable).with_name("sendhost"))
    child = subprocess.Popen([sendhost, "--inventory", str(world.inventory), "mailbox", "authorize", mailbox,
                              "--flow", "loopback", *options],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=world.tmp,
                             env={k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")})
    assert child.stdout is not None
    prompt = child.stdout.readline()
    found = re.search(r"open (\S+) in a browser", prompt)
    assert found, prompt + (child.stderr.read() if child.stderr else "")
    return child, found[1]


def _browser() -> requests.Session:
    browser = requests.Session()
    browser.trust_env = False  # straight to loopback, never through a proxy from the environment
    return browser


@pytest.mark.slow
def test_mailbox_authorize_loopback_takes_the_redirect_exchanges_the_code_with_pkce_and_writes_the_token_0600(
        tmp_path: Path, database_url: str, redis_url: str, authorization: AuthorizationServer,
        oauth_smtp: SubmissionServer) -> None:
    world = make_oauth_world(tmp_path, database_url, redis_url, oauth_smtp, authorization)
    (mailbox,) = world.mailboxes
    token_file = refresh_token_file(world, mailbox)
    token_file.unlink()
    authorization.state.signed_in_as = mailbox
    child, url = _loopback_authorize(world, mailbox)
    query = parse_qs(urlsplit(url).query)
    assert url.startswith(f"{authorization.base}/authorize?")  # found in the server's RFC 8414 metadata
    assert query["code_challenge_method"] == ["S256"] and query["redirect_uri"][0].startswith("http://127.0.0.1:")
    page = _browser().get(url, timeout=30)  # the person signs in; the provider redirects to the listener
    assert page.status_code == 200 and "Authorization received" in page.text
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
    assert authorization.state.refresh_tokens.get(token_file.read_text().strip()) == mailbox
    # the test server grants a code only for the verifier whose S256 challenge came with it
    assert ("invalid_grant", "code_verifier") not in authorization.state.snapshot()[1]
    assert json.loads(out.splitlines()[-1])["smtp_login"] == "ok"
    assert [(a.user, a.success) for a in _recorder(oauth_smtp).attempts_snapshot()] == [(mailbox, True)]


@pytest.mark.slow
def test_mailbox_authorize_loopback_refuses_a_redirect_with_another_state_and_writes_nothing(
        tmp_path: Path, database_url: str, redis_url: str, authorization: AuthorizationServer,
        oauth_smtp: SubmissionServer) -> None:
    world = make_oauth_world(tmp_path, database_url, redis_url, oauth_smtp, authorization)
    (mailbox,) = world.mailboxes
    token_file = refresh_token_file(world, mailbox)
    token_file.unlink()
    authorization.state.signed_in_as = mailbox
    child, url = _loopback_authorize(world, mailbox)
    browser = _browser()
    location = browser.get(url, allow_redirects=False, timeout=30).headers["location"]
    forged = parse_qs(urlsplit(location).query)
    forged["state"] = ["not-the-one-sent"]
    browser.get(urlsplit(location)._replace(query=urlencode(forged, doseq=True)).geturl(), timeout=30)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 1, out + err
    assert "state does not match" in err and "Traceback" not in err
    assert not token_file.exists()
    assert forged["code"][0] in authorization.state.codes  # never redeemed
    assert _recorder(oauth_smtp).attempts_snapshot() == []


@pytest.mark.slow
def test_mailbox_authorize_loopback_gives_up_after_its_timeout(
        tmp_path: Path, database_url: str, redis_url: str, authorization: AuthorizationServer,
        oauth_smtp: SubmissionServer) -> None:
    world = make_oauth_world(tmp_path, database_url, redis_url, oauth_smtp, authorization)
    (mailbox,) = world.mailboxes
    token_file = refresh_token_file(world, mailbox)
    token_file.unlink()
    child, _ = _loopback_authorize(world, mailbox, "--timeout", "1")  # nobody opens the page
    out, err = child.communicate(timeout=60)
    assert child.returncode == 1, out + err
    assert "no redirect came back within 1 s" in err and "Traceback" not in err
    assert not token_file.exists()


@pytest.mark.slow
def test_mailbox_authorize_sends_a_google_mailbox_to_googles_page_for_offline_access(
        tmp_path: Path, database_url: str, redis_url: str, authorization: AuthorizationServer,
        oauth_smtp: SubmissionServer) -> None:
    world = make_oauth_world(tmp_path, database_url, redis_url, oauth_smtp, authorization)
    world.inventory.write_text(world.inventory.read_text().replace("provider: generic", "provider: google"))
    (mailbox,) = world.mailboxes
    child, url = _loopback_authorize(world, mailbox, "--timeout", "1")
    query = parse_qs(urlsplit(url).query)
    assert url.startswith("https://accounts.google.com/o/oauth2/v2/auth?")
    # without both, Google grants no refresh token on a second run
    assert query["access_type"] == ["offline"] and query["prompt"] == ["consent"]
    assert query["code_challenge_method"] == ["S256"] and query["scope"] == ["smtp"]
    child.communicate(timeout=60)
    assert child.returncode == 1


def test_authorize_defaults_to_loopback_for_google_and_device_where_the_provider_has_one(
        authorization: AuthorizationServer) -> None:
    def settings(provider: str, token_url: str) -> OAuthSettings:
        return OAuthSettings(provider, "client", token_url, "smtp", "/nonexistent")

    assert default_flow(settings("google", "https://oauth2.googleapis.com/token")) is Flow.LOOPBACK
    assert default_flow(settings("microsoft", "https://login.microsoftonline.com/common/oauth2/v2.0/token")
                        ) is Flow.DEVICE
    assert default_flow(settings("generic", authorization.token_url)) is Flow.DEVICE  # its metadata names one
    assert default_flow(settings("generic", f"http://127.0.0.1:{free_port()}/token")) is Flow.LOOPBACK


def test_a_token_endpoint_that_is_down_leaves_the_row_queued_and_the_mailbox_connected(
        tmp_path: Path, database_url: str, redis_url: str, authorization: AuthorizationServer,
        oauth_smtp: SubmissionServer) -> None:
    world = make_oauth_world(tmp_path, database_url, redis_url, oauth_smtp, authorization)
    (mailbox,) = world.mailboxes
    _enqueue(world, 1)
    authorization.state.down = True
    agent, factory = world.agent()
    with factory() as ledger:
        agent.prepare(ledger)
        report = agent.send_one(ledger, "w")
        assert report is not None and report.kind == "blocked" and "unreachable" in report.detail
        shown = ledger.show("L0", 1)
        assert shown is not None and shown.row["status"] == "queued"
        with Guard.from_url(redis_url) as guard:
            (status,) = guard.status([mailbox])
        assert status.state != "paused" and status.breaker == "closed"
    authorization.state.down = False  # back: the row goes out once the backoff (2 s) has passed
    reports = agent.run(factory, 1, once=True, stop=threading.Event())
    assert [r.kind for r in reports] == ["sent"]
    assert len(oauth_smtp.recorder.snapshot()) == 1


def _imap_login(server: Dovecot, mechanism: Mechanism, user: str, token: str) -> str:
    """Log in with `token` by `mechanism` (the token in the first response; a failure's JSON answered as the
    mechanism says); the tagged reply's status."""
    raw = base64.b64decode(initial_response(mechanism, user, token))
    answers = iter([raw, b"\x01" if mechanism is Mechanism.OAUTHBEARER else b""])
    with imaplib.IMAP4_SSL(server.host, server.imaps_port, ssl_context=server.client_context(), timeout=10) as imap:
        try:
            status, _ = imap.authenticate(mechanism.value, lambda challenge: next(answers))
        except imaplib.IMAP4.error:
            return "NO"
        return str(status)


def test_dovecot_takes_the_keepers_tokens_by_introspection_and_refuses_others(
        tmp_path: Path, authorization: AuthorizationServer, oauth_smtp: SubmissionServer) -> None:
    """Dovecot's oauth2 passdb, the issue's target server, checks tokens against the test authorization server:
    the keeper's token logs in with OAUTHBEARER and XOAUTH2; a token it never issued does not."""
    submission = _submission(tmp_path, authorization, oauth_smtp)
    token = TokenKeeper(env={}).secret(submission.credential)
    with dovecot_server({USER: "unused-password"}, oauth2_introspection_url=authorization.introspection_url) as imap:
        assert _imap_login(imap, Mechanism.OAUTHBEARER, USER, token) == "OK", imap.log()
        assert _imap_login(imap, Mechanism.XOAUTH2, USER, token) == "OK", imap.log()
        assert _imap_login(imap, Mechanism.XOAUTH2, USER, "at-never-issued") == "NO"
        assert _imap_login(imap, Mechanism.OAUTHBEARER, "other@sender.example", token) == "NO"
    assert {token, "at-never-issued"} <= set(authorization.state.introspected)  # Dovecot asked the server


def test_the_inbox_reader_logs_in_to_dovecot_with_the_mailboxs_grant_and_renews_a_refused_token_once(
        tmp_path: Path, authorization: AuthorizationServer, oauth_smtp: SubmissionServer) -> None:
    submission = _submission(tmp_path, authorization, oauth_smtp)
    keeper = TokenKeeper(env={})
    with dovecot_server({USER: "unused-password"}, oauth2_introspection_url=authorization.introspection_url) as imap:
        account = ImapSettings(imap.host, imap.imaps_port, "tls", USER,
                               Credential(USER, "imap", "oauth2", oauth=submission.credential.oauth),
                               ca_file=str(imap.ca_file))
        with logged_in(account, {}, 10, keeper) as session:
            assert session.select("INBOX")[0] == "OK"
        first = keeper.secret(account.credential)
        with authorization.state.lock:
            del authorization.state.access_tokens[first]  # the provider dropped it before its expiry
        with logged_in(account, {}, 10, keeper) as session:
            assert session.select("INBOX")[0] == "OK"
        assert keeper.secret(account.credential) != first
        assert len(authorization.state.snapshot()[0]) == 2  # the first token, and one renewal


def test_an_oauth_mailboxs_imap_block_reuses_its_grant(tmp_path: Path) -> None:
    from toolkit.inventory import load_inventory

    token = tmp_path / "a.refresh"
    token.write_text("rt\n")
    token.chmod(0o600)
    path = tmp_path / "inventory.yml"
    path.write_text(
        "all:\n  vars:\n    sendhost_mailboxes:\n      - address: a@ex.com\n        domain: ex.com\n"
        "        start: '2026-11-01'\n"
        "        smtp: {host: smtp.gmail.com, username: a@ex.com, auth: oauth2,\n"
        f"               oauth: {{provider: google, client_id: c, refresh_token_file: '{token}'}}}}\n"
        "        imap: {host: imap.gmail.com}\n"
        "  children:\n    senders:\n      hosts: {}\n")
    (mailbox,) = load_inventory(path).mailboxes
    assert mailbox.imap is not None and mailbox.smtp is not None
    assert mailbox.imap.credential.auth == "oauth2" and mailbox.imap.credential.oauth == mailbox.smtp.credential.oauth
    assert mailbox.imap.username == "a@ex.com"


@pytest.mark.slow
@pytest.mark.parametrize("flow", ["device", "loopback"])
def test_ctrl_c_while_authorize_waits_says_so_in_one_line_exits_130_and_writes_no_token(
        tmp_path: Path, database_url: str, redis_url: str, authorization: AuthorizationServer,
        oauth_smtp: SubmissionServer, flow: str) -> None:
    world = make_oauth_world(tmp_path, database_url, redis_url, oauth_smtp, authorization)
    (mailbox,) = world.mailboxes
    token_file = refresh_token_file(world, mailbox)
    token_file.unlink()
    sendhost = str(Path(sys.executable).with_name("sendhost"))
    # SIGINT as a terminal's Ctrl-C delivers it (a test runner may have it ignored; the child must not inherit that)
    child = subprocess.Popen([sendhost, "--inventory", str(world.inventory), "mailbox", "authorize", mailbox,
                              "--flow", flow], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=tmp_path, env={k: v for k, v in os.environ.items()
                                                if k not in ("DISPLAY", "WAYLAND_DISPLAY")},
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert child.stdout is not None
    prompt = child.stdout.readline()
    assert "To authorize" in prompt, prompt + (child.stderr.read() if child.stderr else "")
    child.send_signal(signal.SIGINT)  # while it polls the token endpoint, or waits for the browser's redirect
    out, err = child.communicate(timeout=60)
    assert child.returncode == 130, out + err
    assert err == "interrupted: no token saved\n", err
    assert not token_file.exists()
    assert [p.name for p in token_file.parent.iterdir() if p.name.startswith(token_file.name)] == []
