"""Mailbox providers' presets: what `smtp: {provider: google|microsoft}` fills in, each value from the provider's
own documentation.

A preset gives the submission server (host, port, TLS mode) and the provider's documented sending limits, which
bound the warm-up's: the daily limit caps the ramp's ceiling, the per-minute limit sets the smallest gap. Every
value is a default: a key the inventory writes wins.

Sources: Google Workspace's SMTP settings (support.google.com/a/answer/176600) and sending limits, 2,000 messages a
day per user (support.google.com/a/answer/166852); Microsoft 365's SMTP AUTH client submission
(learn.microsoft.com/exchange/mail-flow-best-practices/how-to-set-up-a-multifunction-device-or-application-to-send-email-using-microsoft-365-or-office-365)
and its limits, 10,000 recipients a day and 30 messages a minute
(learn.microsoft.com/exchange/troubleshoot/send-emails/smtp-submission-improvements). One recipient per message
here, so recipients a day are messages a day.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProviderPreset:
    name: str
    smtp_host: str
    smtp_port: int
    smtp_security: str  # one of sendhost.model.SMTP_SECURITY
    imap_host: str
    daily_limit: int  # messages a day per mailbox, the provider's documented ceiling
    min_gap_s: float  # the provider's per-minute limit as a gap between two sends (0: none documented)
    # OAuth 2.0 (issue 28's token machinery reads these; nothing here uses them yet). `{tenant}` is the
    # Microsoft tenant the mailbox's oauth settings name.
    token_url: str = ""
    scopes: tuple[str, ...] = ()


PROVIDER_PRESETS: dict[str, ProviderPreset] = {
    "google": ProviderPreset(
        "google", "smtp.gmail.com", 587, "starttls", "imap.gmail.com",
        daily_limit=2000, min_gap_s=0.0,  # Google documents no per-minute limit for a user's sends
        token_url="https://oauth2.googleapis.com/token", scopes=("https://mail.google.com/",)),
    "microsoft": ProviderPreset(
        "microsoft", "smtp.office365.com", 587, "starttls", "outlook.office365.com",
        daily_limit=10_000, min_gap_s=2.0,  # 30 messages a minute
        token_url="https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token",
        scopes=("https://outlook.office.com/SMTP.Send", "https://outlook.office.com/IMAP.AccessAsUser.All",
                "offline_access")),
}
PROVIDERS = tuple(PROVIDER_PRESETS)
