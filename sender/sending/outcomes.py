"""What each submission result does: to the row (a `Settle`), to the mailbox's reservation (confirm, cancel with a
failure class, or keep), and whether it costs the lead an attempt."""

from __future__ import annotations

from dataclasses import dataclass

from sender.ledger.store import Settle
from sender.sending.submission import Result, ResultKind, Stage
from warmup import FailureClass, SmtpStage
from warmup.failures import blames_connecting_ip, explain, refuses_send_as

# The submission's stages as warmup.classify knows them (the TLS handshake belongs to the greeting's exchange).
_CLASSIFY_STAGE = {
    Stage.CONNECT: SmtpStage.CONNECT, Stage.TLS: SmtpStage.HELO, Stage.AUTH: SmtpStage.AUTH,
    Stage.MAIL: SmtpStage.MAIL, Stage.RCPT: SmtpStage.RCPT, Stage.DATA: SmtpStage.DATA,
    Stage.AFTER_DATA: SmtpStage.AFTER_DATA, Stage.DONE: SmtpStage.AFTER_DATA,
}
REROUTE_DELAY_S = 0.0  # another mailbox of the group can take it at once
THROTTLED_DELAY_S = 0.0  # quota / rate limit: the guard parks the mailbox; the next pick says how long
BLAMED_RETIRED = "the connecting address is blamed: retired, the row goes from another"
BLAMED_KEPT = ("the connecting address is blamed and could not be retired (the host's primary address?): "
               "retried later")


@dataclass(frozen=True)
class Disposition:
    settle: Settle | None  # None: accepted (record the send)
    failure: FailureClass | None  # the guard's class; None with keep=True: an unknown outcome
    keep_reservation: bool  # True: neither confirm nor cancel (unknown outcome: the slot stays used)
    delay_s: float
    detail: str
    # The refusal blames the address we connected from: take the lease's address out of service (Pool.retire_blamed)
    # and send the row again from another one; the mailbox is not at fault and is not cooled down.
    retire_source: bool = False


def decide(result: Result, retry_delay_s: float) -> Disposition:
    """The response to one submission result (DESIGN.md, "Outcomes")."""
    detail = str(result)
    if result.kind is ResultKind.ACCEPTED:
        return Disposition(None, None, False, 0.0, detail)
    if result.kind is ResultKind.CERTIFICATE:
        # The mailbox's server setting is wrong, not the lead: disconnect the mailbox, reroute the row.
        return Disposition(Settle.REROUTE, FailureClass.ACCOUNT_AUTH, False, REROUTE_DELAY_S, detail)
    if result.kind is ResultKind.REJECTED and blames_connecting_ip(result.code, result.text):
        # Before any class: Exchange's "banned sending IP" is a 5.7.x (content), a Spamhaus listing a block list.
        # The reservation is cancelled as never attempted (no failure class): the slot freed, no breaker count.
        return Disposition(Settle.REROUTE, None, False, REROUTE_DELAY_S, f"{detail}; {BLAMED_RETIRED}",
                           retire_source=True)
    # No reply before the end of DATA is transient (nothing was handed over); after it, unknown.
    verdict = explain(result.code, None, result.text, stage=_CLASSIFY_STAGE[result.stage])
    failure = verdict.failure
    if failure is FailureClass.UNKNOWN:
        # Lost after the end of DATA: the server may have it. Never retried; a person checks Sent Items.
        return Disposition(Settle.UNCONFIRMED, None, True, 0.0, detail + "; check Sent Items")
    if failure in (FailureClass.ACCOUNT_QUOTA, FailureClass.RATE_LIMITED):
        return Disposition(Settle.REROUTE, failure, False, THROTTLED_DELAY_S, detail)
    if failure is FailureClass.ACCOUNT_AUTH:
        if refuses_send_as(result.text):
            # The login is fine; the From is not its to use. Say which fix, or a person hunts a password.
            detail += ("; the login may not send as the From (the mailbox's address): grant it Send As on that "
                       "address, or make smtp.username the mailbox's own address")
        return Disposition(Settle.REROUTE, failure, False, REROUTE_DELAY_S, detail)
    if verdict.rule == "mailbox_full":
        # The recipient's full mailbox: this step failed, but the address is kept (a mailbox can be emptied, as a
        # bounce of it is soft) and our mailbox is not at fault (the class frees the slot, no breaker count).
        return Disposition(Settle.FAILED, failure, False, 0.0, detail + "; the recipient's mailbox is full")
    if failure is FailureClass.RECIPIENT:
        # A permanent refusal of the address is a hard bounce of the mailbox, as the same refusal in a DSN would be;
        # a temporary one (450 4.1.1) suppresses the address but says less about the list.
        permanent = result.code is not None and 500 <= result.code < 600
        return Disposition(Settle.BOUNCE if permanent else Settle.SUPPRESS, failure, False, 0.0, detail)
    if failure is FailureClass.CONTENT:
        return Disposition(Settle.FAILED, failure, False, 0.0, detail)
    return Disposition(Settle.RETRY, failure, False, retry_delay_s, detail)


def blamed_but_kept(result: Result, retry_delay_s: float) -> Disposition:
    """A refusal blamed an address that could not be taken out of service (the host's primary, Redis down): the
    row waits as a retry does (an attempt used), so it does not come straight back to the same address; the
    mailbox is still not at fault (no failure class: the reservation is freed, no cooldown, no breaker count)."""
    return Disposition(Settle.RETRY, None, False, retry_delay_s, f"{result}; {BLAMED_KEPT}")
