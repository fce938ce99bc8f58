"""Whether a reply's author may be a lead's colleague: another address at the lead's own domain, and never one of the
free-mail providers', where everyone shares the domain and nobody is anyone's colleague (gmail.com, outlook.com,
yahoo.*, ...). What follows from a colleague's reply is the ledger's (sender_colleague_reply, a campaign's
`stop_on_domain_reply`)."""

from __future__ import annotations

# Domains whose addresses belong to anyone: the biggest providers' own, by whole domain.
FREE_MAIL_DOMAINS = frozenset({
    "gmail.com", "googlemail.com", "msn.com", "ymail.com", "rocketmail.com", "aol.com", "aim.com", "icloud.com",
    "me.com", "mac.com", "web.de", "t-online.de", "freenet.de", "mail.ru", "inbox.ru", "list.ru", "bk.ru",
    "proton.me", "protonmail.com", "protonmail.ch", "pm.me", "tutanota.com", "tutanota.de", "tuta.io",
    "zoho.com", "mail.com", "email.com", "fastmail.com", "hey.com", "gmx.net", "orange.fr", "wanadoo.fr",
    "free.fr", "sfr.fr", "laposte.net", "libero.it", "virgilio.it", "alice.it", "tiscali.it", "qq.com", "163.com",
    "126.com", "sina.com", "naver.com", "daum.net", "seznam.cz", "wp.pl", "o2.pl", "interia.pl", "onet.pl",
    "btinternet.com", "comcast.net", "verizon.net", "att.net", "sbcglobal.net", "bellsouth.net", "cox.net",
    "bluewin.ch", "uol.com.br", "bol.com.br", "terra.com.br", "ziggo.nl", "kpnmail.nl", "telenet.be",
    "skynet.be", "shaw.ca", "rogers.com", "bigpond.com", "optusnet.com.au", "rediffmail.com",
})
# Providers that run one free-mail domain per country (yahoo.co.uk, hotmail.fr, gmx.de, ...): any domain whose
# name, before its public suffix, is one of these.
FREE_MAIL_NAMES = frozenset({"yahoo", "hotmail", "outlook", "live", "windowslive", "gmx", "yandex", "aol"})
_SECOND_LEVEL = frozenset({"co", "com", "net", "org", "ne", "or"})  # yahoo.co.uk, yahoo.com.br, ...


def is_free_mail(domain: str) -> bool:
    """Whether `domain` (lower-case) is a free-mail provider's, where an address is anyone's."""
    if domain in FREE_MAIL_DOMAINS:
        return True
    labels = domain.split(".")
    if len(labels) >= 3 and labels[-2] in _SECOND_LEVEL:
        labels = labels[:-1]
    return len(labels) >= 2 and labels[-2] in FREE_MAIL_NAMES and len(labels) == 2


def colleague_domain(sender: str) -> str | None:
    """The domain a reply from `sender` (canonical) may share with a lead, or None: no domain, or a free-mail one."""
    _local, _at, domain = sender.rpartition("@")
    if not _at or not domain or is_free_mail(domain):
        return None
    return domain
