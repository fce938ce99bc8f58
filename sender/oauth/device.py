"""The first refresh token of a mailbox, from the device authorization grant (RFC 8628): the provider shows a code
the person enters at its page, signed in as the mailbox, while we poll the token endpoint."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests
from authlib.integrations.base_client.errors import OAuthError
from authlib.integrations.requests_client import OAuth2Session

from sendhost.errors import SecretUnavailable
from sendhost.model import OAuthSettings

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
# Where Google and Microsoft take device authorization requests; generic providers name theirs, or publish it in
# their RFC 8414 metadata.
DEVICE_URLS = {"google": "https://oauth2.googleapis.com/device/code",
               "microsoft": "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/devicecode"}
REQUEST_TIMEOUT_S = 15.0


class DeviceFlowFailed(Exception):
    """The flow ended without a refresh token: denied, expired, or the provider cannot be asked."""


@dataclass(frozen=True)
class Prompt:
    verification_uri: str
    user_code: str
    expires_in_s: float


@dataclass(frozen=True)
class Tokens:
    refresh_token: str
    access_token: str
    expires_in_s: float


def device_authorization_url(settings: OAuthSettings) -> str:
    """The provider's device authorization endpoint: named, a preset, or from RFC 8414 metadata at the token URL's
    origin."""
    if settings.device_authorization_url:
        return settings.device_authorization_url
    if settings.provider in DEVICE_URLS:
        return DEVICE_URLS[settings.provider].replace("{tenant}", settings.tenant or "common")
    parts = urlsplit(settings.token_url)
    metadata_url = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-authorization-server"
    try:
        reply = requests.get(metadata_url, timeout=REQUEST_TIMEOUT_S)
        reply.raise_for_status()
        url = reply.json().get("device_authorization_endpoint")
    except (requests.RequestException, ValueError, AttributeError) as exc:
        raise DeviceFlowFailed(f"no device_authorization_url in the oauth block and none in {metadata_url} "
                               f"({exc}); add device_authorization_url") from None
    if not isinstance(url, str) or not url:
        raise DeviceFlowFailed(f"{metadata_url} names no device_authorization_endpoint; add device_authorization_url")
    return url


def authorize(settings: OAuthSettings, show: Callable[[Prompt], None], *, env: Mapping[str, str] | None = None,
              sleep: Callable[[float], None] = time.sleep) -> Tokens:
    """Run the device flow to its end: `show` tells the person where to go and what to type."""
    try:
        secret = settings.client_secret(env)
    except SecretUnavailable as exc:
        raise DeviceFlowFailed(str(exc)) from None
    session = OAuth2Session(settings.client_id, secret, scope=settings.scope,
                            token_endpoint_auth_method="client_secret_post" if secret else "none")
    with session:
        started = _start(session, device_authorization_url(settings), settings)
        show(Prompt(str(started["verification_uri"]), str(started["user_code"]), float(started["expires_in"])))
        interval = float(started.get("interval") or 5)
        deadline = time.monotonic() + float(started["expires_in"])
        while time.monotonic() < deadline:
            sleep(interval)
            try:
                token = session.fetch_token(settings.token_url, grant_type=DEVICE_GRANT,
                                            device_code=started["device_code"], timeout=REQUEST_TIMEOUT_S)
            except OAuthError as exc:
                if exc.error == "authorization_pending":
                    continue
                if exc.error == "slow_down":  # RFC 8628 section 3.5: five seconds more from now on
                    interval += 5
                    continue
                raise DeviceFlowFailed(f"the provider ended the flow: {exc.error} {exc.description or ''}".strip()
                                       ) from None
            except requests.RequestException as exc:
                raise DeviceFlowFailed(f"token endpoint {settings.token_url}: {exc}") from None
            if not token.get("refresh_token"):
                raise DeviceFlowFailed("the provider granted no refresh token; ask for offline access in scope "
                                       "(Microsoft: offline_access)")
            return Tokens(str(token["refresh_token"]), str(token["access_token"]),
                          float(token.get("expires_in") or 3600))
    raise DeviceFlowFailed("the code expired before it was entered; run the command again")


def _start(session: OAuth2Session, url: str, settings: OAuthSettings) -> dict[str, Any]:
    data = {"client_id": settings.client_id, "scope": settings.scope}
    try:
        reply = session.post(url, data=data, timeout=REQUEST_TIMEOUT_S, withhold_token=True)
        body = reply.json()
    except (requests.RequestException, ValueError) as exc:
        raise DeviceFlowFailed(f"device authorization at {url}: {exc}") from None
    if not isinstance(body, dict) or "device_code" not in body:
        error = body.get("error") if isinstance(body, dict) else reply.text[:200]
        raise DeviceFlowFailed(f"device authorization at {url} refused: {error}")
    return body
