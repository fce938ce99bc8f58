"""Redis URLs: validation and masking. No Redis client here, so importing it stays cheap.

A URL may carry a password (in the user part or a `?password=` parameter), and people paste URLs whose password
holds an unencoded `#`, `/` or `?`, which no URL parser reads as they meant. So masking never trusts a parse: it
hides everything between `://` and the last `@`, then every secret query parameter, and only then is a URL
fit for an error message, a log line or `config show`.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

SCHEMES = ("redis", "rediss", "unix")
EXPECTED = "expected redis://[user:pass@]host:port/db"
MASK = "***"
# Query parameters redis-py reads as credentials (`password`, `username` is not secret) or that commonly hold one.
SECRET_PARAMS = frozenset({"password", "passwd", "pass", "pwd", "secret", "token", "auth", "access_token"})
# Characters that end the user part of a URL early: unencoded in a password they cut it, and the rest of the
# password is read as host, port, path or fragment.
_USERINFO_BREAKERS = "/?#"


def validate_redis_url(url: str) -> str:
    """Return `url` if it is a usable Redis URL, else raise ValueError naming it (masked) and the expected form."""
    shown = mask_url(url)
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in url):
        raise ValueError(f"malformed Redis URL {shown!r}: it holds a control character (a newline?); remove it")
    scheme, separator, rest = url.partition("://")
    if not separator or scheme not in SCHEMES:
        raise ValueError(f"malformed Redis URL {shown!r}: scheme must be one of {', '.join(SCHEMES)}; {EXPECTED}")
    userinfo, at, _ = rest.rpartition("@")
    if at and any(char in userinfo for char in _USERINFO_BREAKERS):
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


def mask_url(url: str) -> str:
    """The URL with its password and secret query parameters replaced by `***`, fit for logs and `config show`.

    The user name stays visible when the user part parses cleanly; otherwise all of it, up to the last `@`, is
    masked, since there is no telling where the name ends and the password begins.
    """
    scheme, separator, rest = url.partition("://")
    if not separator:
        return MASK if "@" in url or "=" in url else url
    userinfo, at, location = rest.rpartition("@")
    if at:
        userinfo = _masked_userinfo(userinfo)
    else:
        location = rest
    return f"{scheme}://{userinfo}{at}{_masked_query(location)}"


def _masked_userinfo(userinfo: str) -> str:
    if any(char in userinfo for char in _USERINFO_BREAKERS):
        return MASK
    user, colon, _ = userinfo.partition(":")
    return f"{user}:{MASK}" if colon else userinfo  # `user@host` carries no password


def _masked_query(location: str) -> str:
    before, question, query = location.partition("?")
    if not question:
        return location
    query, hash_mark, fragment = query.partition("#")
    pairs = []
    for pair in query.split("&"):
        name, equals, _ = pair.partition("=")
        secret = unquote(name).strip().lower() in SECRET_PARAMS
        pairs.append(f"{name}={MASK}" if equals and secret else pair)
    return f"{before}?{'&'.join(pairs)}{hash_mark}{MASK if fragment else ''}"


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
