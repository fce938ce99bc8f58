"""The Postmaster Tools client (sender.postmaster.api and .credentials) against a local FAKE of Google's API speaking
its documented JSON (tests/support/postmaster_fake.py): pages followed to the end, days Google has no ratio for
kept as no data, 429 asked again after Retry-After within a bound, 401 renewed once then refused naming the fix,
403 refused naming the domain, a service account's signed JWT exchanged for a token, an OAuth grant renewed by
the token keeper."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from sender.postmaster.api import Credentials, PostmasterApi
from sender.postmaster.credentials import ServiceAccount, credentials_for
from sender.postmaster.errors import PostmasterRefused, PostmasterUnavailable
from sendhost.errors import ConfigError
from sendhost.model import POSTMASTER_SCOPE, OAuthSettings, PostmasterSettings
from tests.support.oauth_server import authorization_server
from tests.support.postmaster_fake import FakePostmasterTools, fake_postmaster_tools, write_service_account_key

pytestmark = pytest.mark.service  # each test serves the fake on loopback

DOMAIN = "sender.example"
START = date(2026, 11, 1)


class StaticToken(Credentials):
    """Hands out the tokens of `tokens` in turn, the next one whenever one was refused."""

    account = "ops@sender.example"
    fix_refused = "run sendhost postmaster authorize"

    def __init__(self, *tokens: str) -> None:
        self.tokens = list(tokens)
        self.renewals = 0

    def token(self, refused: str | None = None) -> str:
        if refused is not None:
            self.renewals += 1
            self.tokens.pop(0)
        return self.tokens[0]


@pytest.fixture
def fake() -> Iterator[FakePostmasterTools]:
    with fake_postmaster_tools() as served:
        yield served


def _api(fake: FakePostmasterTools, credentials: Credentials | None = None, **kwargs: object) -> tuple[PostmasterApi,
                                                                                                         list[float]]:
    slept: list[float] = []
    api = PostmasterApi(fake.url, credentials or StaticToken("good-token"), sleep=slept.append,
                        clock=lambda: 1_796_000_000.0, **kwargs)  # type: ignore[arg-type]
    return api, slept


def test_every_page_of_days_is_read_and_a_day_without_a_ratio_is_no_data(fake: FakePostmasterTools) -> None:
    for n, ratio in enumerate([0.0, 0.0004, None, 0.0012, 0.0031]):
        fake.set_day(DOMAIN, START + timedelta(days=n), ratio, reputation="MEDIUM" if n else "HIGH")
    # day 5 is absent: Google had too little mail to say anything
    fake.set_day(DOMAIN, START + timedelta(days=6), 0.0001)
    api, _ = _api(fake)
    days = api.traffic_stats(DOMAIN, START, START + timedelta(days=7))
    assert [(d.day, d.spam_ratio, d.reputation) for d in days] == [
        (START, 0.0, "HIGH"), (START + timedelta(days=1), 0.0004, "MEDIUM"),
        (START + timedelta(days=2), None, "MEDIUM"),
        (START + timedelta(days=3), 0.0012, "MEDIUM"), (START + timedelta(days=4), 0.0031, "MEDIUM"),
        (START + timedelta(days=6), 0.0001, "HIGH")]
    pages = fake.asked_for("/trafficStats")
    assert len(pages) == 3  # two days a page, followed by nextPageToken
    assert "pageToken" not in pages[0].query and pages[1].query["pageToken"] and pages[2].query["pageToken"]
    assert {k: pages[0].query[k] for k in ("startDate.year", "startDate.month", "startDate.day", "endDate.day")} == \
        {"startDate.year": "2026", "startDate.month": "11", "startDate.day": "1", "endDate.day": "8"}


def test_the_domains_list_is_paged_too(fake: FakePostmasterTools) -> None:
    for name in ("a.example", "b.example", "c.example", DOMAIN, "z.example"):
        fake.add_domain(name)
    api, _ = _api(fake)
    assert sorted(api.domains()) == ["a.example", "b.example", "c.example", DOMAIN, "z.example"]
    assert len(fake.asked_for("/v1/domains")) == 3


def test_a_429_is_asked_again_after_its_retry_after(fake: FakePostmasterTools) -> None:
    fake.set_day(DOMAIN, START, 0.001)
    fake.answer_next(429, {"Retry-After": "7"})
    fake.answer_next(429, {"Retry-After": format_datetime(datetime.fromtimestamp(1_796_000_000 + 12, UTC),
                                                          usegmt=True)})
    fake.answer_next(503)
    api, slept = _api(fake)
    (day,) = api.traffic_stats(DOMAIN, START, START + timedelta(days=1))
    assert day.spam_ratio == 0.001
    assert slept == [7.0, 12.0, 4.0]  # Google's two waits, then our own (1 s doubling at each ask: the third)


def test_a_retry_after_past_the_bound_is_not_slept_through(fake: FakePostmasterTools) -> None:
    fake.answer_next(429, {"Retry-After": "3600"})
    api, slept = _api(fake, max_wait_s=60.0)
    with pytest.raises(PostmasterUnavailable, match=r"rate limited \(429\), and it asks to wait 3600 s, more than the "
                                                    r"60 s a sync waits; run it again later"):
        api.traffic_stats(DOMAIN, START, START + timedelta(days=1))
    assert slept == []


def test_429s_give_up_after_the_attempts(fake: FakePostmasterTools) -> None:
    fake.add_domain(DOMAIN)
    for _ in range(3):
        fake.answer_next(429, {"Retry-After": "1"})
    api, slept = _api(fake, attempts=3)
    with pytest.raises(PostmasterUnavailable, match=r"rate limited \(429\) after 3 tries"):
        api.traffic_stats(DOMAIN, START, START + timedelta(days=1))
    assert slept == [1.0, 1.0]


def test_a_401_renews_the_token_once(fake: FakePostmasterTools) -> None:
    fake.set_day(DOMAIN, START, 0.0)
    credentials = StaticToken("expired-token", "good-token")
    api, _ = _api(fake, credentials)
    assert [d.spam_ratio for d in api.traffic_stats(DOMAIN, START, START + timedelta(days=1))] == [0.0]
    assert credentials.renewals == 1
    assert [a.token for a in fake.asked] == ["expired-token", "good-token"]


def test_a_second_401_is_refused_naming_the_domain_and_the_fix(fake: FakePostmasterTools) -> None:
    fake.add_domain(DOMAIN)
    api, _ = _api(fake, StaticToken("bad-1", "bad-2"))
    with pytest.raises(PostmasterRefused) as refused:
        api.traffic_stats(DOMAIN, START, START + timedelta(days=1))
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("Postmaster Tools refused the credentials of ops@sender.example reading the traffic "
                              "statistics of sender.example (401 UNAUTHENTICATED")
    assert message.endswith("run sendhost postmaster authorize")
    assert refused.value.exit_code == 2


def test_a_403_is_refused_naming_the_domain_and_the_fix(fake: FakePostmasterTools) -> None:
    fake.add_domain(DOMAIN)
    fake.forbidden.add(DOMAIN)
    api, _ = _api(fake)
    with pytest.raises(PostmasterRefused, match=r"^Postmaster Tools denied ops@sender.example access to sender.example "
                                                r"\(403 PERMISSION_DENIED The caller does not have permission\); add "
                                                r"ops@sender.example as a user of sender.example at "
                                                r"https://postmaster.google.com"):
        api.traffic_stats(DOMAIN, START, START + timedelta(days=1))


@pytest.fixture
def key_file(tmp_path: Path, fake: FakePostmasterTools) -> Path:
    return write_service_account_key(fake, tmp_path / "postmaster-sa.json")


def test_a_service_account_signs_a_jwt_for_the_read_only_scope(fake: FakePostmasterTools, key_file: Path) -> None:
    fake.set_day(DOMAIN, START, 0.002)
    account = ServiceAccount(key_file, "ops@sender.example")
    api, _ = _api(fake, account)
    assert [d.spam_ratio for d in api.traffic_stats(DOMAIN, START, START + timedelta(days=1))] == [0.002]
    (claims,) = fake.assertions
    assert claims["scope"] == "https://www.googleapis.com/auth/postmaster.readonly"
    assert claims["sub"] == "ops@sender.example" and claims["aud"] == f"{fake.url}/token"
    api.traffic_stats(DOMAIN, START, START + timedelta(days=1))
    assert len(fake.assertions) == 1  # the token is kept until it nears its end


def test_a_service_account_key_the_endpoint_refuses_names_the_file(fake: FakePostmasterTools, key_file: Path,
                                                                   tmp_path: Path) -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    document = json.loads(key_file.read_text())
    document["private_key"] = other.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()).decode()
    key_file.write_text(json.dumps(document))
    with pytest.raises(PostmasterRefused, match=rf"refused the service account {fake.service_account_email} "
                                                rf"\(invalid_grant Invalid JWT Signature.\); check the service "
                                                rf"account key file {key_file}"):
        ServiceAccount(key_file, None).token()


def test_a_key_file_that_is_not_a_service_account_key_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "client.json"
    path.write_text(json.dumps({"installed": {"client_id": "x"}}))
    with pytest.raises(ConfigError, match=r"client.json is not a service account key"):
        ServiceAccount(path, None)


def test_an_oauth_grant_is_kept_by_the_token_keeper_and_a_revoked_one_names_authorize(
        fake: FakePostmasterTools, tmp_path: Path) -> None:
    """The Google account's grant (`sendhost postmaster authorize` wrote its refresh token) against the test
    authorization server: its access token reads the fake; once revoked, a 401 renews, the grant is refused, and the
    message names the command that fixes it."""
    fake.set_day(DOMAIN, START, 0.0007)
    with authorization_server(client_secret=None) as server:

        class Live(set[str]):  # the fake takes what the authorization server issued and still honours
            def __contains__(self, token: object) -> bool:
                return token in server.state.access_tokens

        fake.access_tokens = Live()
        token_file = tmp_path / "postmaster.token"
        token_file.write_text(server.state.issue_refresh_token("ops@sender.example") + "\n")
        token_file.chmod(0o600)
        settings = PostmasterSettings(oauth=OAuthSettings(
            provider="google", client_id="sendhost-test", token_url=server.token_url, scope=POSTMASTER_SCOPE,
            refresh_token_file=str(token_file)), api_url=fake.url)
        api, _ = _api(fake, credentials_for(settings, env={}))
        assert [d.spam_ratio for d in api.traffic_stats(DOMAIN, START, START + timedelta(days=1))] == [0.0007]
        assert len(server.state.grants) == 1
        server.state.revoke("ops@sender.example")
        fake.answer_next(401)
        with pytest.raises(PostmasterRefused, match=r"refresh refused \(invalid_grant\); run sendhost postmaster "
                                                    r"authorize, signed in as a user of the domain"):
            api.traffic_stats(DOMAIN, START, START + timedelta(days=1))
