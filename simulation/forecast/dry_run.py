"""What a forecast's agents submit through: nothing. The send path runs whole (claim, gate, reservation, lease,
attempt, record), and the mailbox's provider is the one part left out: no secret is read, no connection opened, and
every message is accepted as it is handed over, as a provider accepts a message of a mailbox within its limits."""

from __future__ import annotations

from email.message import EmailMessage

from sender.oauth import TokenKeeper
from sender.sending.submission import Result, ResultKind, Stage, SubmissionSession
from sendhost.model import Credential, Submission

ACCEPTED = "250 2.0.0 accepted by the forecast (nothing was sent)"


class DryRunTokens(TokenKeeper):
    """A token keeper that reads no secret: a forecast logs in nowhere."""

    def secret(self, credential: Credential) -> str:
        return ""


class DryRunSession(SubmissionSession):
    """A session that accepts the one message handed over, and sends nothing."""

    def __init__(self) -> None:
        super().__init__(None)  # type: ignore[arg-type]  # no client: nothing is connected

    def hand_over(self, message: EmailMessage, address: str | None = None) -> Result:
        return Result(ResultKind.ACCEPTED, Stage.DONE, 250, ACCEPTED)

    def close(self) -> None:
        pass


def open_dry_run(keeper: TokenKeeper, server: Submission, secret: str, *, source_ip: str | None,
                 timeout_s: float) -> SubmissionSession | Result:
    """The opener of a forecast's agent (sender.sending.attempt.Opener): a session that connects nowhere."""
    return DryRunSession()
