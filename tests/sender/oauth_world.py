"""A sending world whose mailboxes log in with OAuth 2.0: the world of tests/sender/world.py, each mailbox's smtp
`auth: oauth2` against the test authorization server (its refresh token issued there, in a 0600 file), submitting
to the test submission server that checks each bearer token by introspection."""

from __future__ import annotations

import re
from pathlib import Path

from tests.sender.world import World, make_world
from tests.support.oauth_server import AuthorizationServer
from tests.support.submission import SubmissionServer


def refresh_token_file(world: World, mailbox: str) -> Path:
    return world.tmp / f"{mailbox}.refresh"


def make_oauth_world(tmp: Path, database_url: str, redis_url: str, server: SubmissionServer,
                     authorization: AuthorizationServer, *, mailboxes: int = 1, min_gap_s: float = 0) -> World:
    world = make_world(tmp, database_url, redis_url, server, mailboxes=mailboxes, min_gap_s=min_gap_s)
    for mailbox in world.mailboxes:
        path = refresh_token_file(world, mailbox)
        path.write_text(authorization.state.issue_refresh_token(mailbox) + "\n")
        path.chmod(0o600)

    def oauth(match: re.Match[str]) -> str:
        return (f"auth: oauth2, oauth: {{provider: generic, client_id: {authorization.state.client_id}, "
                f"token_url: '{authorization.token_url}', scope: smtp, refresh_token_file: '{match[1]}.refresh'}}")

    text = world.inventory.read_text()
    world.inventory.write_text(re.sub(r"password_file: '([^']+)\.pw'", oauth, text))
    return world
