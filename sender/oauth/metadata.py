"""An authorization server's RFC 8414 metadata, at the token URL's origin: where it publishes the endpoints an
inventory may leave out (device authorization, authorization)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests

REQUEST_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class Metadata:
    url: str
    document: dict[str, Any] | None  # None: unreachable or not a JSON object
    problem: str | None = None


def server_metadata(token_url: str) -> Metadata:
    parts = urlsplit(token_url)
    url = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-authorization-server"
    try:
        reply = requests.get(url, timeout=REQUEST_TIMEOUT_S)
        reply.raise_for_status()
        document = reply.json()
    except (requests.RequestException, ValueError) as exc:
        return Metadata(url, None, str(exc))
    if not isinstance(document, dict):
        return Metadata(url, None, "not a JSON object")
    return Metadata(url, document)
