"""`sendhost_seeds` and `sendhost_placement`: seed mailboxes parsed like the mailboxes (file:line and key on every
error, secrets only by file or SENDHOST_SECRET_ variable, the provider's IMAP host and authserv-id as defaults), no
seed a mailbox, and the placement policy's threshold a fraction."""

from __future__ import annotations

from pathlib import Path

import pytest

from sendhost.errors import ConfigError
from sendhost.model import PlacementPolicy
from tests.conftest import REPO_ROOT
from toolkit.inventory import load_inventory

EXAMPLE = (REPO_ROOT / "inventory.example.yml").read_text()
ANCHOR = "    sendhost_mailboxes:\n"


def with_seeds(tmp_path: Path, block: str) -> Path:
    path = tmp_path / "inventory.yml"
    path.write_text(EXAMPLE.replace(ANCHOR, block + ANCHOR, 1))
    return path


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_seeds_take_their_providers_imap_host_and_authserv_id(tmp_path: Path) -> None:
    path = with_seeds(tmp_path, (
        "    sendhost_seeds:\n"
        "      - address: Seed.One@gmail.com\n        provider: google\n"
        "        imap: {password_env: SENDHOST_SECRET_SEED_ONE}\n"
        "      - address: seed2@outlook.com\n        provider: microsoft\n"
        "        imap: {password_file: /etc/sendhost/seed2.pw, username: other-login}\n"
        "      - address: seed3@mx.test\n        provider: other\n"
        "        imap: {host: 127.0.0.1, port: 1993, password_env: SENDHOST_SECRET_S3, authserv_id: mx.test}\n"
        "    sendhost_placement: {rest_below: 0.7, pause: true}\n"))
    inventory = load_inventory(path)
    one, two, three = inventory.seeds
    assert (one.address, one.provider, one.imap.host, one.imap.port, one.imap.username, one.imap.authserv_id) == (
        "seed.one@gmail.com", "google", "imap.gmail.com", 993, "seed.one@gmail.com", "mx.google.com")
    assert (one.imap.credential.password_env, one.imap.credential.service) == ("SENDHOST_SECRET_SEED_ONE", "imap")
    assert (two.imap.host, two.imap.username, two.imap.authserv_id) == ("outlook.office365.com", "other-login", None)
    assert two.imap.credential.password_file == "/etc/sendhost/seed2.pw"
    assert (three.imap.host, three.imap.port, three.imap.authserv_id) == ("127.0.0.1", 1993, "mx.test")
    assert inventory.placement == PlacementPolicy(rest_below=0.7, pause=True, tests=3)


def test_no_seeds_and_no_policy_by_default(tmp_path: Path) -> None:
    inventory = load_inventory(with_seeds(tmp_path, ""))
    assert (inventory.seeds, inventory.placement) == ((), PlacementPolicy())


@pytest.mark.parametrize(("imap", "marker", "problem"), [
    ("{password: hunter2}", "imap: {password: hunter2}",
     "sendhost_seeds[0].imap.password: never put a password in the inventory; use password_file (a 0600 file) "
     "or password_env"),
    ("{password_env: SEED_PASSWORD}", "imap: {password_env: SEED_PASSWORD}",
     "sendhost_seeds[0].imap.password_env: 'SEED_PASSWORD' is not a secret's variable name"),
    ("{host: imap.example.net}", "imap: {host: imap.example.net}",
     "sendhost_seeds[0].imap: name exactly one of password_file or password_env"),
])
def test_a_seeds_secret_is_handled_like_a_mailboxs(tmp_path: Path, imap: str, marker: str, problem: str) -> None:
    path = with_seeds(tmp_path, f"    sendhost_seeds:\n      - address: s@gmail.com\n        provider: google\n"
                                f"        imap: {imap}\n")
    with pytest.raises(ConfigError) as caught:
        load_inventory(path)
    assert str(caught.value).startswith(f"{path}:{line_of(path, marker)}: {problem}")


def test_a_seed_is_never_a_mailbox(tmp_path: Path) -> None:
    mailbox = load_inventory(with_seeds(tmp_path, "")).mailboxes[0].address
    path = with_seeds(tmp_path, f"    sendhost_seeds:\n      - address: {mailbox}\n        provider: other\n"
                                "        imap: {host: imap.example.net, password_env: SENDHOST_SECRET_X}\n")
    with pytest.raises(ConfigError) as caught:
        load_inventory(path)
    assert str(caught.value) == (
        f"{path}:{line_of(path, f'address: {mailbox}')}: sendhost_seeds[0].address: {mailbox} is a mailbox in "
        "sendhost_mailboxes; a seed only receives placement tests, and a mailbox only sends")


def test_an_unknown_provider_and_a_share_above_one_are_refused(tmp_path: Path) -> None:
    path = with_seeds(tmp_path, "    sendhost_seeds:\n      - address: s@aol.com\n        provider: aol\n"
                                "        imap: {host: imap.aol.com, password_env: SENDHOST_SECRET_X}\n")
    with pytest.raises(ConfigError, match=r"sendhost_seeds\[0\]\.provider: 'aol' is not one of google, microsoft, "
                                          r"yahoo, other"):
        load_inventory(path)
    path = with_seeds(tmp_path, "    sendhost_placement: {rest_below: 70}\n")
    with pytest.raises(ConfigError, match=r"sendhost_placement.rest_below: 70.0 is an inbox share above 1; write a "
                                          r"fraction like 0.7"):
        load_inventory(path)
