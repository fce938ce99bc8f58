"""Access tokens for Postmaster Tools, with the read-only scope: a Google account's OAuth grant (the refresh token
`sendhost postmaster authorize` wrote, renewed by the token keeper the mailboxes use), or a service account's key
file (a JWT it signs, exchanged for a token: RFC 7523, as Google documents for server-to-server calls)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import requests
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import RSAKey

from sender.errors import SenderConfigError
from sender.oauth import TokenKeeper, TokenUnavailable
from sender.postmaster.api import Credentials
from sender.postmaster.errors import PostmasterRefused, PostmasterUnavailable
from sendhost.model import POSTMASTER_SCOPE, Credential, PostmasterSettings

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
GOOGLE_TOKEN_URL = "https://oauth2.googleapis.com/token"
ASSERTION_LIFETIME_S = 3600  # Google's longest
REQUEST_TIMEOUT_S = 30.0
RENEW_MARGIN_S = 60.0


def credentials_for(settings: PostmasterSettings, *, env: Mapping[str, str] | None = None,
                    clock: Callable[[], float] = time.time) -> Credentials:
    """The credentials `settings` name: the OAuth grant, else the service account."""
    if settings.oauth is not None:
        return OAuthGrant(settings, env=env, clock=clock)
    assert settings.service_account_key_file is not None
    return ServiceAccount(Path(settings.service_account_key_file).expanduser(), settings.subject, clock=clock)


class OAuthGrant(Credentials):
    """A Google account's grant, kept like an OAuth mailbox's (the same files, lock and keeper)."""

    fix_refused = "run sendhost postmaster authorize, signed in as a user of the domain in Postmaster Tools"

    def __init__(self, settings: PostmasterSettings, *, env: Mapping[str, str] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        assert settings.oauth is not None
        self.account = "the Google account of sendhost postmaster authorize"
        self._credential = Credential("postmaster", "postmaster", "oauth2", oauth=settings.oauth)
        self._keeper = TokenKeeper(env=env, clock=clock)

    def token(self, refused: str | None = None) -> str:
        try:
            return self._keeper.access_token(self._credential, refused=refused).value
        except TokenUnavailable as exc:
            if exc.refused:
                reason = str(exc).split(";")[0]
                raise PostmasterRefused(f"Postmaster Tools: {reason}; {self.fix_refused}") from None
            raise PostmasterUnavailable(f"Postmaster Tools: {exc}") from None


class ServiceAccount(Credentials):
    """A service account's key file (Google's JSON: client_email, private_key, token_uri): a JWT signed with its
    key, exchanged at token_uri for an access token, renewed a minute before it expires."""

    def __init__(self, key_file: Path, subject: str | None, *, clock: Callable[[], float] = time.time) -> None:
        self._key_file = key_file
        self._subject = subject
        self._clock = clock
        self._lock = threading.Lock()
        self._token: tuple[str, float] | None = None  # (token, expires at)
        email, _key, _key_id, _url = self._read_key()
        self.account = f"{subject} (through the service account {email})" if subject else email
        self.fix_refused = (f"check the service account key file {key_file} (a current key of an enabled service "
                            "account" + (", with domain-wide delegation of the postmaster.readonly scope)"
                                         if subject else ")"))

    def _read_key(self) -> tuple[str, RSAKey, str | None, str]:
        where = f"service_account_key_file {self._key_file}"
        try:
            document = json.loads(self._key_file.read_text(encoding="utf-8"))
        except OSError as exc:
            raise SenderConfigError(f"{where}: {exc.strerror}; download the service account's JSON key there "
                                    "(mode 0600)") from None
        except ValueError:
            raise SenderConfigError(f"{where} is not JSON; download the service account's JSON key from the "
                                    "Google Cloud console") from None
        if not isinstance(document, dict) or document.get("type") != "service_account":
            raise SenderConfigError(f"{where} is not a service account key (\"type\": \"service_account\"); "
                                    "download one from the Google Cloud console")
        email, pem = document.get("client_email"), document.get("private_key")
        if not isinstance(email, str) or not isinstance(pem, str):
            raise SenderConfigError(f"{where} lacks client_email or private_key; download the key again")
        try:
            key = RSAKey.import_key(pem)
        except (JoseError, ValueError, TypeError):
            raise SenderConfigError(f"{where}: its private_key is not an RSA key in PEM; download the key "
                                    "again") from None
        key_id = document.get("private_key_id")
        url = document.get("token_uri") or GOOGLE_TOKEN_URL
        return email, key, key_id if isinstance(key_id, str) else None, str(url)

    def token(self, refused: str | None = None) -> str:
        with self._lock:
            now = self._clock()
            if self._token is not None and self._token[0] != refused and now < self._token[1] - RENEW_MARGIN_S:
                return self._token[0]
            email, key, key_id, url = self._read_key()
            claims: dict[str, object] = {"iss": email, "scope": POSTMASTER_SCOPE, "aud": url, "iat": int(now),
                                         "exp": int(now) + ASSERTION_LIFETIME_S}
            if self._subject:
                claims["sub"] = self._subject
            header = {"alg": "RS256", "typ": "JWT", **({"kid": key_id} if key_id else {})}
            assertion = jwt.encode(header, claims, key)
            try:
                reply = requests.post(url, data={"grant_type": JWT_BEARER, "assertion": assertion},
                                      timeout=REQUEST_TIMEOUT_S)
            except requests.RequestException as exc:
                raise PostmasterUnavailable(f"Postmaster Tools: token endpoint {url} unreachable ({exc})") from None
            try:
                body = reply.json()
            except ValueError:
                body = {}
            body = body if isinstance(body, dict) else {}
            if reply.status_code in (400, 401, 403):
                error = " ".join(str(body.get(k, "")) for k in ("error", "error_description")).strip()
                raise PostmasterRefused(f"Postmaster Tools: {url} refused the service account {email} "
                                        f"({error or reply.status_code}); {self.fix_refused}")
            if reply.status_code != 200 or not isinstance(body.get("access_token"), str):
                raise PostmasterUnavailable(f"Postmaster Tools: token endpoint {url} answered {reply.status_code} "
                                            "without an access token; run the sync again later")
            lifetime = float(body.get("expires_in") or ASSERTION_LIFETIME_S)
            self._token = (body["access_token"], now + lifetime)
            return self._token[0]
