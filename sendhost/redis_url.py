"""Redis URLs: validation and masking. No Redis client here, so importing it stays cheap."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

SCHEMES = ("redis", "rediss", "unix")


def validate_redis_url(url: str) -> str:
    """Return `url` if it is a usable Redis URL, else raise ValueError naming it and the expected form."""
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError on a non-numeric port
    except ValueError as exc:
        raise ValueError(
            f"malformed Redis URL {mask_url(url)!r}: {exc}; expected redis://[user:pass@]host:port/db"
        ) from exc
    if parts.scheme not in SCHEMES:
        raise ValueError(
            f"malformed Redis URL {mask_url(url)!r}: scheme must be one of {', '.join(SCHEMES)}; "
            "expected redis://[user:pass@]host:port/db"
        )
    if parts.scheme == "unix":
        if not parts.path:
            raise ValueError(f"malformed Redis URL {url!r}: a unix:// URL needs a socket path")
        return url
    if not parts.hostname:
        raise ValueError(f"malformed Redis URL {mask_url(url)!r}: no host; expected redis://host:port/db")
    if port is not None and not 0 < port < 65536:
        raise ValueError(f"malformed Redis URL {mask_url(url)!r}: port {port} out of range")
    db = parts.path.lstrip("/")
    if db and not db.isdigit():
        raise ValueError(f"malformed Redis URL {mask_url(url)!r}: database {db!r} must be a number")
    return url


def mask_url(url: str) -> str:
    """The URL with any password replaced by `***`, fit for logs and `config show`."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        user = parts.username or ""
        host = parts.hostname or ""
        netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        return "<unparseable URL>"
