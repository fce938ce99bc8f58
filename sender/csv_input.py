"""What goes wrong opening a CSV (no file, not UTF-8, broken quoting), said once for every CSV the sender reads."""

from __future__ import annotations

import csv
from pathlib import Path

from sender.errors import SenderConfigError

CSV_OPEN_ERRORS = (FileNotFoundError, UnicodeDecodeError, csv.Error)


def csv_open_error(path: Path, what: str, exc: Exception,
                   error: type[SenderConfigError] = SenderConfigError) -> SenderConfigError:
    """The user's error for one of CSV_OPEN_ERRORS reading `path`; `what` is the file to pass ("the CSV to enqueue")."""
    if isinstance(exc, FileNotFoundError):
        return error(f"{path}: no such file; pass {what}")
    if isinstance(exc, UnicodeDecodeError):
        return error(f"{path}: not UTF-8 text; save the CSV as UTF-8")
    return error(f"{path}: malformed CSV: {exc}")
