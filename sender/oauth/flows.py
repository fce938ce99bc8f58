"""Which grant `sendhost mailbox authorize` runs for a mailbox when not told."""

from __future__ import annotations

import enum

from sender.oauth.metadata import server_metadata
from sendhost.model import OAuthSettings


class Flow(enum.Enum):
    DEVICE = "device"  # RFC 8628: a code typed at the provider's page, from any machine
    LOOPBACK = "loopback"  # RFC 8252: a browser on this machine, redirected to 127.0.0.1


def default_flow(settings: OAuthSettings) -> Flow:
    """Google: loopback (its device flow refuses https://mail.google.com/). Microsoft: device. Generic: device
    when it names or publishes a device endpoint, else loopback."""
    if settings.provider == "google":
        return Flow.LOOPBACK
    if settings.provider == "microsoft" or settings.device_authorization_url:
        return Flow.DEVICE
    document = server_metadata(settings.token_url).document or {}
    return Flow.DEVICE if document.get("device_authorization_endpoint") else Flow.LOOPBACK
