"""One masking for every value that may carry a secret: Redis and PostgreSQL URLs (any scheme, a mistyped one too),
libpq `key=value` DSNs, and the free text they end up in (log lines, a library's error message).

People paste URLs whose password holds an unencoded `@`, `#`, `/` or `?`, which no two parsers read alike (Python
splits the user part at the last `@`, libpq at the first one), so masking never trusts a parse: everything between
`://` and the last `@` is hidden unless it reads plainly as `user:password`, then every secret query parameter. A
DSN shows only the keys known to hold no secret. What is neither is hidden whole. `scrub` cleans a library's error
text, which may quote a fragment of a misread password as a host name or a port ("failed to resolve host
'ter2@127.0.0.1'").
"""

from __future__ import annotations

import re
from urllib.parse import unquote

MASK = "***"
# Query parameters redis-py reads as credentials (`username` is not secret) or that commonly hold one; any parameter
# whose name contains one of SECRET_WORDS is masked too (libpq's `sslpassword`, `client_secret`, ...).
SECRET_PARAMS = frozenset({"password", "passwd", "pass", "pwd", "secret", "token", "auth", "access_token"})
SECRET_WORDS = ("pass", "pwd", "secret", "token", "auth", "credential")
# libpq DSN keys shown as written; every other key's value is masked.
DSN_PUBLIC_KEYS = frozenset({"host", "hostaddr", "port", "dbname", "user", "sslmode", "connect_timeout",
                             "application_name", "target_session_attrs", "service"})
# Characters that end the user part of a URL early: unencoded in a password they cut it short, and the rest is read
# as host, port, path or fragment.
USERINFO_BREAKERS = "/?#"
# Pieces of a password shorter than this are not scrubbed from free text: they occur in ordinary words.
MIN_FRAGMENT = 3

_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", re.DOTALL)
_URL_IN_TEXT_RE = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
_DSN_PAIR_RE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*('(?:[^'\\]|\\.)*'|[^\s']*)")
_SECRET_PAIR_IN_TEXT_RE = re.compile(
    r"\b([A-Za-z_]*(?:pass|pwd|secret|token)[A-Za-z_]*)(\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&'\"]+)", re.IGNORECASE)


def mask_url(value: str) -> str:
    """`value` (a URL of any scheme, or a DSN) with every password and secret parameter replaced by `***`, fit for
    an error message, a log line or `config show`."""
    if not value:
        return value
    url = _SCHEME_RE.match(value)
    if url is None:
        return _masked_dsn(value) if "=" in value else MASK
    scheme, rest = url.groups()
    userinfo, at, location = rest.rpartition("@")
    if not at:
        location = rest
    return f"{scheme}://{_masked_userinfo(userinfo) if at else ''}{at}{_masked_query(location)}"


def mask_text(text: str) -> str:
    """Free text with every URL in it masked, and every `password=...`-like pair (a DSN quoted in a message)."""
    text = _URL_IN_TEXT_RE.sub(lambda match: mask_url(match.group(0)), text)
    return _SECRET_PAIR_IN_TEXT_RE.sub(lambda match: f"{match.group(1)}{match.group(2)}{MASK}", text)


def scrub(text: str, *sources: str) -> str:
    """A library's message about `sources` (the URLs or DSNs it was given), masked, and with every piece of their
    secrets removed wherever it appears (a misread password is quoted back as a host, a port or a parameter)."""
    cleaned = mask_text(text)
    fragments = {piece for source in sources for piece in secret_fragments(source) if len(piece) >= MIN_FRAGMENT}
    for piece in sorted(fragments, key=len, reverse=True):
        cleaned = cleaned.replace(piece, MASK)
    return cleaned


def secret_fragments(value: str) -> set[str]:
    """The secrets `value` holds, whole and split wherever a parser may have cut them, raw and decoded."""
    secrets: list[str] = []
    url = _SCHEME_RE.match(value)
    if url is not None:
        userinfo, at, location = url.group(2).rpartition("@")
        if at:
            user, colon, password = userinfo.partition(":")
            secrets.append(password if colon else userinfo if any(c in userinfo for c in "@" + USERINFO_BREAKERS)
                           else "")
            if colon and any(c in user for c in "@" + USERINFO_BREAKERS):
                secrets.append(userinfo)
        else:
            location = url.group(2)
        for pair in location.partition("?")[2].split("&"):
            name, equals, secret = pair.partition("=")
            if equals and _secret_name(name):
                secrets.append(secret)
    else:
        secrets.extend(_dsn_secrets(value) if "=" in value else [value])
    pieces = set()
    for secret in filter(None, secrets):
        for form in (secret, unquote(secret)):
            pieces.add(form)
            pieces.update(re.split(r"[@:/?#&\s']+", form))
    return {piece for piece in pieces if piece}


def _secret_name(name: str) -> bool:
    lowered = unquote(name).strip().lower()
    return lowered in SECRET_PARAMS or any(word in lowered for word in SECRET_WORDS)


def _masked_userinfo(userinfo: str) -> str:
    user, colon, _ = userinfo.partition(":")
    if any(char in user for char in "@" + USERINFO_BREAKERS) or (colon and any(
            char in userinfo for char in USERINFO_BREAKERS)):
        return MASK  # no telling where the name ends and the password begins
    return f"{user}:{MASK}" if colon else user  # `user@host` carries no password


def _masked_query(location: str) -> str:
    location, hash_mark, fragment = location.partition("#")
    fragment = MASK if fragment else ""
    before, question, query = location.partition("?")
    if not question:
        return f"{location}{hash_mark}{fragment}"
    pairs = []
    for pair in query.split("&"):
        name, equals, _ = pair.partition("=")
        pairs.append(f"{name}={MASK}" if equals and _secret_name(name) else pair)
    return f"{before}?{'&'.join(pairs)}{hash_mark}{fragment}"


def _dsn_pairs(value: str) -> tuple[list[tuple[str, str]], str]:
    """The `key=value` pairs of a DSN, and what is left after them that does not parse (empty when all does)."""
    pairs: list[tuple[str, str]] = []
    position = 0
    while value[position:].strip():
        match = _DSN_PAIR_RE.match(value, position)
        if match is None or match.end() == position:
            return pairs, value[position:]
        pairs.append((match.group(1), match.group(2)))
        position = match.end()
    return pairs, ""


def _masked_dsn(value: str) -> str:
    pairs, rest = _dsn_pairs(value)
    shown = [f"{key}={secret if key.lower() in DSN_PUBLIC_KEYS else MASK}" for key, secret in pairs]
    return " ".join(shown + ([MASK] if rest else []))


def _dsn_secrets(value: str) -> list[str]:
    pairs, rest = _dsn_pairs(value)
    # The unparsed rest may be the tail of a password with a space in it.
    return [secret.strip("'") for key, secret in pairs if key.lower() not in DSN_PUBLIC_KEYS] + rest.split()
