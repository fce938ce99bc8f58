"""The words and codes servers use for each kind of send failure, as warmup.failures' rules read them: each
pattern with the sources it was learned from. No logic here: which of them decides, and in what order, is RULES."""

from __future__ import annotations

import re


def text_pattern(pattern: str) -> re.Pattern[str]:
    """A pattern over a server's words, case aside."""
    return re.compile(pattern, re.IGNORECASE)


# The sending account's own quota, not a recipient's full mailbox ("over quota", "Quota exceeded (mailbox for user
# is full)", "Quota limit exceeded (Speicherplatz ...)" are the recipient's storage and must not match).
SENDING_QUOTA = text_pattern(
    r"submissionquotaexceeded|outboundspamexception|storedrv\.submission\.exception:quotaexceeded|"
    r"sending (?:limit|quota)|(?:daily|hourly) (?:user )?(?:sending )?(?:limit|quota) exceeded|"
    r"message count quota exceeded|mail limit has been reached|reached your daily limit for message recipients|"
    r"number (?:of )?(?:messages|recipients) per (?:hour|day) exceeded|"
    r"(?:versand|sende)-?limit|送信(?:数|量)?の?(?:上限|制限)"
)
# A rate limit on the sender: Gmail, Microsoft, Yahoo's [TS..] codes, Tencent, IONOS, Orange (French), German hosts.
RATE_LIMIT = text_pattern(
    r"unusual rate|rate[ -]?limit|too many (?:messages(?! (?:on|in) (?:the|this|your) (?:server|mailbox|account))|"
    r"connections|concurrent|recipients)|submission rate|"
    r"\[TS[S0-9]\d*\]|deferred due to (?:unexpected volume|user complaints)|sender thread limit|"
    r"concurrent connections? limit|(?:connection|ip) frequency limit|trop de connexions|"
    r"zu viele (?:verbindungen|nachrichten|e-?mails)"
)
# Providers that name a rate limit by a published code rather than in words. Spectrum (Charter) answers mail into
# its domains with "AUP#In-NNNN" (spectrum.net/support/internet/understanding-email-error-codes): 1300-1340 too many
# connections, 1350-1490 too many messages or recipients, 1540 too many messages in one session, 1550 too many
# recipients in one message, 1580 too many recipients in a short time; its other codes name blocks and policies.
SPECTRUM_CODE = text_pattern(r"\bAUP#(?:In?|O(?:ut)?)-?(\d{4})\b")
SPECTRUM_RATE_CODES = frozenset(range(1300, 1491)) | {1540, 1550, 1580}
# The provider stopped taking logins from the account for a while (Gmail's `454 4.7.0 Too many login attempts`):
# whatever code it carries, another login only extends the lock, so the account is stopped, not cooled down.
LOGINS_LOCKED = text_pattern(r"too many (?:failed )?(?:login|authentication|auth) (?:attempts|failures)")
# Exchange Online stops a mailbox's SMTP AUTH submissions after repeated errors that "won't correct [themselves]
# without human intervention" (5.2.251 mailbox full, 5.2.252 send as denied, 5.2.253 invalid license, 5.2.254 too
# many recipients, 5.2.255 invalid recipients: learn.microsoft.com/exchange/mail-flow-best-practices/
# continuous-error-throttling-smtp-auth-submissions): the account is stopped until a person fixes it.
CONTINUOUS_ERROR_THROTTLE_CODES = frozenset({f"5.2.{n}" for n in range(251, 256)})
AUTH_FAILED = text_pattern(
    r"authentication (?:unsuccessful|failed|credentials invalid)|username and password not accepted|"
    r"#auth\d+|invalid credentials|client not authenticated"
)
# The account may not send as this From/envelope address: a setting to fix, not a recipient to suppress.
SENDER_REFUSED = text_pattern(
    r"sender address rejected|send ?as ?denied|send as (?:this )?sender|not (?:allowed|permitted) to send as|"
    r"not owned by|domain of sender address|unrout(?:e)?able sender"
)
# The recipient's domain does not exist (NXDOMAIN, a null MX), as opposed to a lookup that failed for now.
DOMAIN_MISSING = text_pattern(
    r"host or domain name not found.*host not found(?!, try again)|nxdomain|domain name not found|invalid domain|"
    r"\bhost (?:\S{1,253} )?not found|name or service not known|no such host|"
    r"illegal host/domain name|host does not accept mail|"
    r"nonexistentdomain|domain (?:name )?does not exist|no such domain|unrouteable mail domain|\bhost unknown|"
    r"couldn't find any host (?:named|by that name)|couldn't find a mail exchanger|"
    r"returned null mx|doesn't receive email according to the administrator|"
    r"domaine inexistant|domain existiert nicht|ドメインが存在しません"
)
DOMAIN_LOOKUP_TEMPORARY = text_pattern(r"try again|temporar|servfail|timed out")
# The domain's name servers answer, but with a reply no MTA can use (Postfix's "Malformed or unexpected name server
# reply": an MX naming an address or an alias): final when the relay gave up on it (a permanent Status), a lookup to
# try again when it did not.
DOMAIN_DNS_BROKEN = text_pattern(r"malformed (?:or unexpected )?name server reply")
# The recipient does not exist or cannot receive: English, French (Orange, La Poste, SFR), German (Web.de, GMX),
# Japanese.
RECIPIENT_GONE = text_pattern(
    r"user unknown|unknown user|no such (?:user|mailbox|recipient|address)|does(?: not|n't) exist|"
    r"recip(?:ient)?notfound|recipient not found|user not found|mailbox not found|mailbox unavailable|"
    r"invalid recipient|unknown recipient|no valid recipients?|invalid (?:final delivery )?user ?(?:id|name)?\b|"
    # Postfix's "Recipient address rejected:" prefixes any refusal of its recipient restrictions: it is the
    # recipient's unless the reason after it names our message or the destination's system ("Spam detected",
    # "Message too big", "Mailer error"), which then decides by its own words and codes.
    r"(?:recipient |(?<!sender ))address rejected(?!:[^.;(<-]{0,60}?\b(?:spam|virus|polic|content|media|message|"
    r"mailer|system|internal|authori[sz]ed|blocked|dmarc|spf))|recipient rejected|"
    r"unknown or illegal (?:user|alias)|doesn't have a [\w.]+ account|not our (?:user|customer)|"
    r"no mailbox here|account (?:has been |is )?(?:disabled|inactive|discontinued)|disabled recipient|"
    r"mailbox is frozen|address couldn't be found|domain is not reachable\. please check the domain|"
    r"^\s*<?[^\s<>@]+@[^\s<>@]+>?\s+rejected\.?\s*$|"
    r"is (?:disabled|inactive)|no longer on server|unrouteable address|"
    r"resolver\.rst\.(?:authrequired|notauthorized|restrictedtorecipients)|"
    r"is not a known user|deactivated (?:mailbox|account|user)|is deactivated|bad[_ ]recipient|badrcptto|"
    r"no mail ?box(?:es)? (?:found|available|here)|not an? (?:active|valid) (?:address|user|account|mailbox|recipient)|"
    r"addressee unknown|(?:e-?mail )?address is (?:wrong|invalid|no longer valid)|"
    r"mail-?box not found|"
    r"not listed in (?:the )?(?:domino directory|public (?:name (?:&|and) )?address book|address book)|"
    r"destinataire (?:invalide|inconnu)|utilisateur inconnu|adresse inconnue|compte du destinataire est bloqu|"
    r"benutzer (?:nicht bekannt|unbekannt)|empf(?:ä|ae)nger (?:unbekannt|existiert nicht)|"
    r"(?:postfach|adresse) existiert nicht|存在しません|ユーザー(?:が)?(?:不明|見つかりません)"
)
# The words a server uses for an address it does not know (a subset of RECIPIENT_GONE: not disabled, not full).
USER_UNKNOWN = text_pattern(
    r"user unknown|unknown user|no such (?:user|mailbox|recipient)|unknown recipient|user not found"
)
# The recipient's mailbox is full: permanent replies suppress the address (as X.2.2 does), temporary ones wait.
MAILBOX_FULL = text_pattern(
    r"(?:mail ?box|mail ?folder|account|inbox) (?:is )?full|over ?quota|quota (?:exceeded|violation)|"
    r"would exceed (?:the )?(?:mailbox )?quota|mail ?box exceeds (?:the |its )?(?:allowed|maximum) (?:size|quota)|"
    r"out of storage space|exhausted allowed storage|over (?:disk|storage) quota|"
    r"too many messages (?:on|in) (?:the|this|your) (?:server|mailbox|account)|"
    r"exceeded (?:its|the|their|his|her) (?:disk|storage) (?:space )?(?:limit|quota)|"
    r"speichervolumen|boîte (?:aux lettres )?pleine|メールボックスがいっぱい"
)
# The destination's MX will not take mail for the recipient's domain ("Relaying denied", qmail's "not in my list of
# allowed rcpthosts", "trying to use me as a relay"): said by the recipient's own MX in a relay's bounce, the
# domain is not served where its MX record points, and no later send gets through (RFC 5321 3.6.2: a server that
# is not the domain's final destination refuses to relay). Said by our submission server, it is our account's.
RELAY_REFUSED = text_pattern(
    r"relaying (?:denied|not (?:permitted|allowed))|relay (?:access )?denied|unable to relay|"
    r"we do not relay|(?:not|n.t) (?:in|on) my list of (?:allowed )?rcpthosts|use me .{0,80}as a relay"
)
# Our message is too big for the destination (RFC 3463 X.3.4, X.2.3 in words): whatever code a server puts with it
# (a 5.1.1 on "max message size exceeded"), the address is not at fault and a smaller message would pass.
MESSAGE_TOO_BIG = text_pattern(
    r"message (?:size|length) exceeds|(?:max(?:imum)? )?message size (?:limit )?exceeded|"
    r"message (?:is )?too (?:big|large)|exceeds (?:the )?max(?:imum)? (?:message )?size"
)
# The recipient's inbox is flooded (Gmail X.2.1 "receiving mail at a rate that prevents ..."): congestion.
RECIPIENT_FLOODED = text_pattern(r"receiving (?:mail|email) (?:at a rate|too quickly)")
CONTENT_TEXT = text_pattern(r"spam|policy|block ?list|blocked|blacklist|spamhaus|virus|dmarc|\bspf\b|content")
# A block list named in the reply: a verdict on our sending IP or domain, whatever code a server puts with it
# (GoDaddy answers `553 5.1.3` and a Spamhaus URL).
BLOCKLIST_TEXT = text_pattern(r"spamhaus|block ?list|blacklist|\bdnsbl\b|\brbl\b")
# The destination cannot take it for now, whatever the code says: a routing loop (RFC 3463 X.4.6), a service
# unavailable for the moment, a connection that timed out or was refused (an MTA that gave up on an unreachable
# host: X.4.1/X.4.7 in substance), its own local delivery program (Exim's `pipe to |...`) failing.
# The destination's local delivery program failing on its own files (procmail's `Couldn't create "<mailbox>"`,
# `Lock failure on`, `Error while writing to`): the mail system there, not the address (RFC 3463 X.3.0 in substance).
# The MTA runs that program only for a recipient it accepted as local, so this outranks words about a user in the
# same line (Postfix's `x-unix; procmail: Couldn't create "/var/spool/mail/neko" id: ...: No such user`).
LOCAL_DELIVERY_FAILED = text_pattern(r"procmail: (?:couldn't create|lock failure|error while writing)")
# The relay gave up after retrying for days (RFC 3463 X.4.7, in words): the delivery, not the address, ran out of
# time. A reason stated with it (a full mailbox) decides first.
GAVE_UP_RETRYING = text_pattern(
    r"delivery time expired|retry time(?:out)? (?:exceeded|expired)|delivery failed \d+ attempts"
)
UNAVAILABLE_FOR_NOW = text_pattern(
    r"(?:unable|wasn't able|was not able) to (?:establish an smtp connection|connect to)|"
    r"routing loop|hop count exceeded|too many hops|service (?:is )?(?:currently|temporarily) "
    r"unavailable|\bpipe to \||connection (?:timed out|refused)|no route to host"
)
SERVER_BUSY = text_pattern(r"server busy")

# Enhanced codes that name the provider's content or policy verdict (Gmail, Microsoft, Yahoo).
CONTENT_CODES = frozenset({"5.7.0", "5.7.1", "5.7.9", "5.7.25", "5.7.26", "5.7.27", "5.7.509", "5.7.606",
                           "5.7.708", "5.3.4", "5.2.3", "5.6.0"})
AUTH_CODES = frozenset({"5.7.8", "5.7.139", "5.7.57", "5.7.11", "5.7.60"})
# RFC 7372's codes for the message's own authentication failing at the receiver: no DKIM signature or a failing
# one (X.7.20-X.7.22), SPF (X.7.23, X.7.24), reverse DNS (X.7.25), several checks (X.7.26, DMARC). They name our
# message and sending IP, so they decide over Postfix's generic "Recipient address rejected:" wording.
MESSAGE_AUTH_CODES = frozenset({f"5.7.{n}" for n in range(20, 27)})
AUTH_REPLY_CODES = frozenset({530, 534, 535, 538})
# X.1.x details that name the *sender's* address (RFC 3463 X.1.7, X.1.8), or nothing in particular (X.1.0).
SENDER_ADDRESS_DETAILS = frozenset({"7", "8"})
NOT_RECIPIENT_DETAILS = frozenset({"0", "5"}) | SENDER_ADDRESS_DETAILS
