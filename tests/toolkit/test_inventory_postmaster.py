"""`sendhost_postmaster` in the inventory (toolkit.inventory): an OAuth grant with the read-only postmaster scope or
a service account's key file, exactly one; each mistake named by file:line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from sendhost.errors import ConfigError
from sendhost.model import POSTMASTER_API_URL, POSTMASTER_SCOPE
from tests.toolkit.test_inventory import MINIMAL, write
from toolkit.inventory import load_inventory


def _with(tmp_path: Path, block: str) -> Path:
    return write(tmp_path, MINIMAL.replace("  vars:\n", f"  vars:\n    sendhost_postmaster: {block}\n", 1))


def test_an_oauth_grant_gets_the_read_only_postmaster_scope(tmp_path: Path) -> None:
    inventory = load_inventory(_with(tmp_path, "{oauth: {provider: google, client_id: c1, client_secret_env: "
                                               "SENDHOST_SECRET_PM, refresh_token_file: /tmp/pm.token}}"))
    settings = inventory.postmaster
    assert settings is not None and settings.oauth is not None
    assert settings.oauth.scope == POSTMASTER_SCOPE == "https://www.googleapis.com/auth/postmaster.readonly"
    assert settings.oauth.token_url == "https://oauth2.googleapis.com/token"
    assert (settings.api_url, settings.days, settings.domains) == (POSTMASTER_API_URL, 14, ())


def test_a_service_account_with_its_subject_domains_and_days(tmp_path: Path) -> None:
    inventory = load_inventory(_with(tmp_path, "{service_account_key_file: /etc/sa.json, subject: ops@example.com, "
                                               "domains: [Example.COM.], days: 30}"))
    settings = inventory.postmaster
    assert settings is not None and settings.oauth is None
    assert (settings.service_account_key_file, settings.subject, settings.domains, settings.days) == (
        "/etc/sa.json", "ops@example.com", ("example.com",), 30)


def test_no_block_means_no_postmaster(tmp_path: Path) -> None:
    assert load_inventory(write(tmp_path, MINIMAL)).postmaster is None


@pytest.mark.parametrize(("block", "expected"), [
    ("{domains: [example.com]}", "sendhost_postmaster: give exactly one of oauth:"),
    ("{service_account_key_file: /etc/sa.json, oauth: {provider: google, client_id: c, refresh_token_file: /t}}",
     "sendhost_postmaster: give exactly one of oauth:"),
    ("{oauth: {provider: microsoft, client_id: c, refresh_token_file: /t}}",
     "sendhost_postmaster.oauth.provider: Postmaster Tools is Google's"),
    ("{oauth: {provider: google, client_id: c, refresh_token_file: /t}, subject: a@example.com}",
     "sendhost_postmaster.subject: subject is a service account setting"),
    ("{service_account_key_file: /etc/sa.json, domains: ['not a domain']}",
     "sendhost_postmaster.domains[0]: 'not a domain' is not a domain name"),
    ("{service_account_key_file: /etc/sa.json, api_url: 'http://postmaster.example'}",
     "sendhost_postmaster.api_url: 'http://postmaster.example' is not an https:// URL"),
    ("{service_account_key_file: /etc/sa.json, every: day}", "sendhost_postmaster"),
])
def test_a_mistake_is_named_with_its_key(tmp_path: Path, block: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=r"inventory.yml:\d+: ") as refused:
        load_inventory(_with(tmp_path, block))
    assert expected in str(refused.value)
