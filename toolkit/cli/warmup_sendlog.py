"""The sender's own send log (CSV or JSON) that `sendhost warmup import-sends` rebuilds counters from."""

from __future__ import annotations

import csv
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from sendhost.errors import ConfigError


def read_send_log(path: Path) -> list[tuple[str, datetime]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror}; pass a CSV or JSON send log") from None
    if path.suffix.lower() == ".json":
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ConfigError(f"{path}: expected a JSON list of objects with mailbox and sent_at")
        numbered: list[tuple[str, dict[str, Any]]] = [(f"item {i}", r) for i, r in enumerate(rows)]
    else:
        reader = csv.DictReader(text.splitlines())
        if not reader.fieldnames or not {"mailbox", "sent_at"} <= set(reader.fieldnames):
            raise ConfigError(f"{path}:1: the CSV header needs columns mailbox and sent_at")
        numbered = [(f"line {i + 2}", dict(r)) for i, r in enumerate(reader)]
    sends = []
    for where, row in numbered:
        if str(row.get("status") or "").lower() in ("cancelled", "rejected"):
            continue
        try:
            sent_at = datetime.fromisoformat(str(row.get("sent_at")))
        except ValueError:
            raise ConfigError(f"{path} {where}: sent_at {row.get('sent_at')!r} is not an ISO time like "
                              "2026-11-30T09:15:00+00:00") from None
        if sent_at.tzinfo is None:
            raise ConfigError(f"{path} {where}: sent_at {row.get('sent_at')!r} has no UTC offset; add one "
                              "like +00:00")
        sends.append((str(row.get("mailbox") or ""), sent_at))
    return sends
