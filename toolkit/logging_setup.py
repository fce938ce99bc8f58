"""Logging for the CLI: `-v` and `-vv` raise sendhost's own loggers only, and no password reaches stderr.

Raising the root logger would turn on botocore's request logging too, which prints every request's headers,
the AWS session token among them; urllib3 and paramiko log connection details the same way. Third-party loggers
stay at WARNING whatever the verbosity.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

from sendhost.masking import mask_text

# The top-level packages of this project; every logger they create is named under one of these.
OWN_LOGGERS = ("sendhost", "toolkit", "ippool", "warmup", "dns_audit", "provisioning", "simulation", "sender")
# Libraries that log what sendhost already reports in one line: flufl.bounce logs each bounce detector's
# exception with a traceback (log.exception) before re-raising it, and any stranger can mail a message that makes
# one fail; the inbox reader catches it and logs the mailbox, the UID and the reason.
QUIET_LOGGERS = ("flufl.bounce",)


class SecretMasking(logging.Filter):
    """Masks every URL (Redis, PostgreSQL, any scheme) and `password=`-like pair in a record's final message, a
    library's included: a password must not reach a log even by mistake."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = mask_text(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info:  # the traceback the formatter prints (another handler may have formatted it already)
            record.exc_text = mask_text(record.exc_text or logging.Formatter().formatException(record.exc_info))
        return True


def configure_logging(verbose: int, stream: TextIO | None = None) -> None:
    """WARNING by default; `-v` INFO and `-vv` DEBUG for sendhost's own loggers, never for libraries."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(SecretMasking())
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "sendhost_cli", False):
            root.removeHandler(old)
    handler.sendhost_cli = True  # type: ignore[attr-defined]  # so a second call replaces, not duplicates
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    own_level = logging.DEBUG if verbose >= 2 else logging.INFO if verbose else logging.WARNING
    for name in OWN_LOGGERS:
        logging.getLogger(name).setLevel(own_level)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
