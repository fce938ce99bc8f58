"""OAuth 2.0 for mailboxes with `auth: oauth2`: access tokens kept fresh with the refresh-token grant (keeper),
the refresh token and the shared access token kept in private files beside each other (files), the SASL initial
responses on the wire (sasl), and a submission session that refreshes once on a refused token (opening)."""

from sender.oauth.errors import TokenUnavailable
from sender.oauth.keeper import AccessToken, TokenKeeper, refresh_margin_s

__all__ = ["AccessToken", "TokenKeeper", "TokenUnavailable", "refresh_margin_s"]
