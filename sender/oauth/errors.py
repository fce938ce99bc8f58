"""Why the token keeper has no access token for a mailbox: nothing was sent, and the row can go back to the queue."""

from __future__ import annotations


class TokenUnavailable(Exception):
    """No access token now. `refused`: the token endpoint refused the grant (a person must authorize the mailbox
    again; the keeper paused it); otherwise the endpoint could not be reached: try again in `delay_s`."""

    def __init__(self, message: str, *, refused: bool, delay_s: float) -> None:
        super().__init__(message)
        self.refused = refused
        self.delay_s = delay_s
