"""A submission session for any mailbox: an `auth: oauth2` one whose token the server refused (535, or a 334
challenge that ended in one) gets one renewed token and one more session; a second refusal stands."""

from __future__ import annotations

import ssl

from sender.oauth.errors import TokenUnavailable
from sender.oauth.keeper import TokenKeeper
from sender.sending.submission import Result, ResultKind, Stage, SubmissionSession, open_session
from sendhost.model import Submission

AUTH_REFUSALS = (535, 334)


def open_refreshing(keeper: TokenKeeper, server: Submission, secret: str, *, source_ip: str | None,
                    timeout_s: float, context: ssl.SSLContext | None = None) -> SubmissionSession | Result:
    """`open_session`, retried once with a renewed token when the server refuses an OAuth token."""
    session = open_session(server, secret, source_ip=source_ip, timeout_s=timeout_s, context=context)
    if server.credential.auth != "oauth2" or not _token_refused(session):
        return session
    try:
        renewed = keeper.access_token(server.credential, refused=secret).value
    except TokenUnavailable as exc:
        # Nothing handed over: a retry later, not the mailbox's disconnection (a refused grant paused it).
        return Result(ResultKind.NO_REPLY, Stage.AUTH, None, str(exc))
    return open_session(server, renewed, source_ip=source_ip, timeout_s=timeout_s, context=context)


def _token_refused(session: SubmissionSession | Result) -> bool:
    return (isinstance(session, Result) and session.kind is ResultKind.REJECTED and session.stage is Stage.AUTH
            and session.code in AUTH_REFUSALS)
