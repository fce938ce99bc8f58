"""`sendhost mailbox check`: a mailbox's logins tried step by step, nothing sent and nothing changed. SMTP: its
secret (an OAuth mailbox's access token), connect, TLS, AUTH; IMAP, when it has an `imap:` block: its secret,
connect (with TLS), login, and its folder selected read-only. Each step ok, failed (with the server's reply), or
not tried because an earlier one failed."""

from __future__ import annotations

import imaplib
from dataclasses import dataclass
from enum import StrEnum

from sender.feedback.imap import ImapFailure, ImapStage, first_line, logged_in, quote
from sender.oauth import TokenKeeper, TokenUnavailable
from sender.oauth.opening import open_refreshing
from sender.sending.submission import Result, Stage
from sendhost.errors import SecretUnavailable
from sendhost.model import ImapSettings, Submission

TIMEOUT_S = 30.0
# The SMTP steps in the order a session takes them; implicit TLS (port 465) connects and secures in one.
SMTP_STEPS = (Stage.CONNECT, Stage.TLS, Stage.AUTH)


class StepState(StrEnum):
    OK = "ok"
    FAILED = "failed"
    NOT_TRIED = "not tried"  # an earlier step failed


@dataclass(frozen=True)
class Step:
    protocol: str  # smtp | imap
    name: str  # secret, connect, tls, auth / login, select
    state: StepState
    detail: str = ""

    def as_json(self) -> dict[str, str]:
        return {"protocol": self.protocol, "step": self.name, "state": self.state.value, "detail": self.detail}

    def __str__(self) -> str:
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.protocol} {self.name} {self.state.value}{detail}"


def check_smtp(server: Submission, tokens: TokenKeeper, *, timeout_s: float = TIMEOUT_S) -> list[Step]:
    """Read the secret, open a submission session (a refused OAuth token renewed once, as the agent does), QUIT."""
    try:
        secret = tokens.secret(server.credential)
    except (SecretUnavailable, TokenUnavailable) as exc:
        return [Step("smtp", "secret", StepState.FAILED, str(exc)),
                *(Step("smtp", stage.value, StepState.NOT_TRIED) for stage in SMTP_STEPS)]
    steps = [Step("smtp", "secret", StepState.OK, server.credential.auth)]
    session = open_refreshing(tokens, server, secret, source_ip=None, timeout_s=timeout_s)
    if not isinstance(session, Result):
        session.close()
        where = {Stage.CONNECT: f"{server.host}:{server.port}", Stage.TLS: server.security,
                 Stage.AUTH: server.username}
        return steps + [Step("smtp", stage.value, StepState.OK, where[stage]) for stage in SMTP_STEPS]
    failed = SMTP_STEPS.index(session.stage) if session.stage in SMTP_STEPS else 0
    for index, stage in enumerate(SMTP_STEPS):
        state = StepState.OK if index < failed else StepState.FAILED if index == failed else StepState.NOT_TRIED
        steps.append(Step("smtp", stage.value, state, str(session) if state is StepState.FAILED else ""))
    return steps


IMAP_STEPS = (ImapStage.SECRET, ImapStage.CONNECT, ImapStage.LOGIN)


def check_imap(account: ImapSettings, tokens: TokenKeeper, *, timeout_s: float = TIMEOUT_S) -> list[Step]:
    """Log in and select the inbox folder read-only (EXAMINE: no flag changes), then log out."""
    try:
        with logged_in(account, None, timeout_s, tokens) as imap:
            steps = [Step("imap", stage.value, StepState.OK) for stage in IMAP_STEPS]
            try:
                status, data = imap.select(quote(account.folder), readonly=True)
            except (OSError, imaplib.IMAP4.error) as exc:
                return [*steps, Step("imap", "select", StepState.FAILED, f"{account.folder}: {first_line(exc)}")]
            first = data[0] if data else b""
            reply = first.decode("utf-8", "replace") if isinstance(first, bytes) else str(first)
            if status != "OK":
                return [*steps, Step("imap", "select", StepState.FAILED, f"{account.folder}: {status} {reply}")]
            return [*steps, Step("imap", "select", StepState.OK, f"{account.folder} ({reply} messages)")]
    except ImapFailure as exc:
        failed = IMAP_STEPS.index(exc.stage)
        return [Step("imap", stage.value,
                     StepState.OK if index < failed else StepState.FAILED if index == failed else StepState.NOT_TRIED,
                     exc.why if index == failed else "")
                for index, stage in enumerate(IMAP_STEPS)] + [Step("imap", "select", StepState.NOT_TRIED)]


def all_ok(steps: list[Step]) -> bool:
    return all(step.state is StepState.OK for step in steps)
