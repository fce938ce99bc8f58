"""A placement seed that logs in by OAuth 2.0 (`imap: {auth: oauth2, oauth: ...}`): `sendhost mailbox authorize
SEED` runs the device flow against the test authorization server, writes the refresh token 0600 and checks the
seed's IMAP login with it on Dovecot (its oauth2 passdb asking the server by introspection); the placement reader
then logs in with the same grant."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sender.placement.seeds import look
from sendhost.model import Seed
from tests.conftest import REPO_ROOT
from tests.support.dovecot import Dovecot, dovecot_server
from tests.support.oauth_server import AuthorizationServer, authorization_server
from toolkit.inventory import load_inventory

SEED = "seed@mx.test"


@pytest.fixture
def authorization() -> Iterator[AuthorizationServer]:
    with authorization_server(client_secret=None) as server:
        yield server


@pytest.fixture
def imap(authorization: AuthorizationServer) -> Iterator[Dovecot]:
    with dovecot_server({SEED: "unused-password"}, oauth2_introspection_url=authorization.introspection_url) as server:
        yield server


def inventory(tmp_path: Path, authorization: AuthorizationServer, imap: Dovecot) -> Path:
    text = (REPO_ROOT / "inventory.example.yml").read_text()
    seeds = (f"    sendhost_seeds:\n      - address: {SEED}\n        provider: other\n"
             f"        imap: {{host: 127.0.0.1, port: {imap.imaps_port}, ca_file: '{imap.ca_file}', auth: oauth2, "
             f"oauth: {{provider: generic, client_id: {authorization.state.client_id}, "
             f"token_url: '{authorization.token_url}', scope: imap, "
             f"refresh_token_file: '{tmp_path}/seed.refresh'}}}}\n")
    path = tmp_path / "inventory.yml"
    path.write_text(text.replace("    sendhost_mailboxes:\n", seeds + "    sendhost_mailboxes:\n", 1))
    return path


@pytest.mark.slow
def test_mailbox_authorize_gets_a_seeds_grant_and_checks_its_imap_login(
        tmp_path: Path, authorization: AuthorizationServer, imap: Dovecot) -> None:
    path = inventory(tmp_path, authorization, imap)
    sendhost = str(Path(sys.executable).with_name("sendhost"))
    child = subprocess.Popen([sendhost, "--inventory", str(path), "mailbox", "authorize", SEED],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    assert child.stdout is not None
    prompt = child.stdout.readline()
    found = re.search(r"open (\S+/device) and enter the code (\w+)", prompt)
    assert found, prompt + (child.stderr.read() if child.stderr else "")
    authorization.state.approve(found[2], SEED)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    token_file = tmp_path / "seed.refresh"
    assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
    assert authorization.state.refresh_tokens.get(token_file.read_text().strip()) == SEED
    assert json.loads(out.splitlines()[-1]) == {"seed": SEED, "imap_login": "ok", "host": "127.0.0.1"}
    # the placement reader logs in with the same grant
    (seed,) = load_inventory(path).seeds
    assert isinstance(seed, Seed)
    looked = look(seed, ["sh-nothing-here"], env={})
    assert (looked.failed, looked.found) == (None, {})
