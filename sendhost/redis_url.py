"""Redis URLs: validation (and the masking of sendhost.masking, which every URL shown goes through). No Redis
client here, so importing it stays cheap.

A URL may carry a password (in the user part or a `?password=` parameter), and people paste URLs whose password
holds an unencoded `#`, `/` or `?`, which no URL parser reads as they meant: such a URL is refused, masked.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from sendhost.masking import MASK, SECRET_PARAMS, USERINFO_BREAKERS, mask_url

__all__ = ["MASK", "SECRET_PARAMS", "insecure_tls_reason", "mask_url", "validate_redis_url"]

SCHEMES = ("redis", "rediss", "unix")
EXPECTED = "expected redis://[user:pass@]host:port/db"


def validate_redis_url(url: str) -> str:
    """Return `url` if it is a usable Redis URL, else raise ValueError naming it (masked) and the expected form."""
    shown = mask_url(url)
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in url):
        raise ValueError(f"malformed Redis URL {shown!r}: it holds a control character (a newline?); remove it")
    scheme, separator, rest = url.partition("://")
    if not separator or scheme not in SCHEMES:
        raise ValueError(f"malformed Redis URL {shown!r}: scheme must be one of {', '.join(SCHEMES)}; {EXPECTED}")
    userinfo, at, _ = rest.rpartition("@")
    if at and any(char in userinfo for char in USERINFO_BREAKERS):
        raise ValueError(
            f"malformed Redis URL {shown!r}: the user or password holds '/', '?' or '#'; percent-encode them "
            "(%2F, %3F, %23), and any '@' after the host (%40)"
        )
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError on a non-numeric port
    except ValueError:
        # The parser's own message quotes the text it choked on, which may be part of a password: not shown.
        raise ValueError(f"malformed Redis URL {shown!r}: the host or port cannot be read; {EXPECTED}") from None
    if parts.scheme == "unix":
        if not parts.path:
            raise ValueError(f"malformed Redis URL {shown!r}: a unix:// URL needs a socket path")
        return url
    if not parts.hostname:
        raise ValueError(f"malformed Redis URL {shown!r}: no host; expected redis://host:port/db")
    if port is not None and not 0 < port < 65536:
        raise ValueError(f"malformed Redis URL {shown!r}: port {port} out of range")
    db = parts.path.lstrip("/")
    if db and not db.isdigit():
        raise ValueError(f"malformed Redis URL {shown!r}: database {db!r} must be a number")
    return url


def insecure_tls_reason(url: str) -> str | None:
    """Why a `rediss://` URL does not verify the server, or None when it does (or is not TLS at all)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    settings = {}
    for pair in parts.query.split("&"):
        name, _, value = pair.partition("=")
        settings[unquote(name).strip().lower()] = unquote(value).strip().lower()
    if settings.get("ssl_cert_reqs") in ("none", "cert_none"):  # (client-side "optional" still verifies)
        return (f"ssl_cert_reqs={settings['ssl_cert_reqs']} turns off checking the Redis server's certificate, "
                "so anyone on the path can read the password and the traffic; drop it and trust the server's CA "
                "(ssl_ca_certs=PATH)")
    if settings.get("ssl_check_hostname") in ("false", "0", "no", "off"):
        return ("ssl_check_hostname=false accepts any server's certificate for this host name; drop it "
                "(redis>=6 checks the name by default)")
    return None
