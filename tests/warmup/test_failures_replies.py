"""Classification of real replies: submission servers' answers and the diagnostics of real bounces from many MTAs.

Bounces are quoted from the sisimai project's corpus of real bounce mails (github.com/sisimai/set-of-emails,
maildir/bsd; each case names its file), Status and Diagnostic-Code as the bounce carries them. Submission replies
are quoted from the providers' documentation (Microsoft 365, Gmail, Yahoo, IONOS, Orange) or from reports of them.
Each case says which class it must get; docs/failure-classes.md explains the precedence that decides.
"""

from __future__ import annotations

import pytest

from warmup.failures import FailureClass, classify, classify_bounce, explain, split_reply

Q, R, A, P, C, T = (FailureClass.ACCOUNT_QUOTA, FailureClass.RATE_LIMITED, FailureClass.ACCOUNT_AUTH,
                    FailureClass.RECIPIENT, FailureClass.CONTENT, FailureClass.TRANSIENT)

# (source, Status, Diagnostic-Code, class)
BOUNCES = [
    # Postfix
    ("lhost-postfix-04", "5.1.1", "smtp; 550 5.1.1 Address rejected kijitora@example.co.jp", P),
    ("lhost-postfix-05", "4.1.1", "smtp; 450 4.1.1 <kijitora@example.org>: Recipient address rejected: User unknown "
                                  "in virtual alias table", P),
    ("lhost-postfix-06", "5.4.4", "X-Postfix; Host or domain name not found. Name service error for "
                                  "name=neko.example.jp type=AAAA: Host not found", P),
    ("lhost-postfix-08", "4.4.1", "X-mPOP-Fallback_MX; connect to example.com[93.184.216.119]: Connection timed out",
     T),
    ("lhost-postfix-09", "4.3.2", "smtp; 452 4.3.2 Connection rate limit exceeded.", R),
    ("lhost-postfix-10", "5.1.8", "smtp; 553 5.1.8 <root@vagrant-centos65.vagrantup.com>... Domain of sender "
                                  "address root@vagrant-centos65.vagrantup.com does not exist", A),
    ("lhost-postfix-16", "5.1.6", "smtp; 550 5.1.6 recipient no longer on server: kijitora@example.go.jp", P),
    ("lhost-postfix-17", "5.4.4", "X-Postfix; Name service error for name=example.org type=MX: Malformed or "
                                  "unexpected name server reply", T),
    ("lhost-postfix-30", "5.4.1", "smtp; 550 5.4.1 <kijitora@example.br>: Recipient address rejected: Access denied "
                                  "[BL2NAM02FT061.eop-nam02.prod.protection.outlook.com]", P),
    ("lhost-postfix-39", "5.0.0", "X-Postfix; host mta.example.com[192.0.2.225] said: 554 5.6.0 This message has been "
                                  "scored as spam with a probability of more than 90% (in reply to end of DATA "
                                  "command)", C),
    ("lhost-postfix-51", "5.7.0", "smtp; 550 5.7.0 Local Policy Violation", C),
    ("lhost-postfix-52", "5.0.0", "smtp; 554 delivery error: dd Sorry your message to kijitora@example.co.jp cannot "
                                  "be delivered. This account has been disabled or discontinued [#102]. - "
                                  "mta222.mail.neko.example.co.jp", P),
    ("lhost-postfix-56", "4.4.2", "X-Postfix; lost connection with mx2.qq.com[184.105.206.86] while performing the "
                                  "HELO handshake", T),
    ("lhost-postfix-59", "5.2.1", "smtp; 550-5.2.1 The user you are trying to contact is receiving mail at a rate "
                                  "that 550-5.2.1 prevents additional messages from being delivered.", T),
    ("lhost-postfix-63", "5.2.2", "smtp; 552 5.2.2 <neko@nyaaan.example.org> Quota exceeded (mailbox for user is "
                                  "full)", P),
    ("lhost-postfix-70", "5.7.26", "smtp; 550-5.7.26 Unauthenticated email from libsisimai.org is not accepted due "
                                   "to 550-5.7.26 domain's DMARC policy.", C),
    ("lhost-postfix-74", "4.7.0", "smtp; 421 4.7.0 [TSS04] Messages from 192.0.2.192 temporarily deferred due to "
                                  "unexpected volume or user complaints - 4.16.55.1; see "
                                  "https://postmaster.verizonmedia.com/error-codes", R),
    ("lhost-postfix-80", "5.1.0", "smtp; 550-5.1.0 MXIN506 MailFrom domain is listed in Spamhaus. To request "
                                  "removal from this list see https: 550 5.1.0 //www.spamhaus.org/query/lookup/", C),
    # Sendmail
    ("lhost-sendmail-01", "5.1.1", "SMTP; 550 5.1.1 <userunknown@bouncehammer.jp>... User Unknown", P),
    ("lhost-sendmail-04", "5.1.8", "SMTP; 553 5.1.8 <httpd@host1.mx.example.jp>... Domain of sender address "
                                   "httpd@host1.mx.example.jp does not exist", A),
    ("lhost-sendmail-05", "5.2.3", "SMTP; 552 5.2.3 Message size exceeds fixed maximum message size (10485760)", C),
    ("lhost-sendmail-07", "5.0.0", "SMTP; 554 5.7.1 <kijitora@example.org>: Relay access denied", C),
    ("lhost-sendmail-08", "4.4.7", "SMTP; 450 4.7.1 Access denied. IP name lookup failed [192.0.2.222]", T),
    ("lhost-sendmail-17", "5.1.6", "SMTP; 551 not our user", P),
    ("lhost-sendmail-20", "5.4.6", "SMTP; 554 5.4.6 Too many hops", T),
    ("lhost-sendmail-24", "5.1.2", "SMTP; 550 Host unknown", P),
    ("lhost-sendmail-33", "5.1.1", "SMTP; 550 5.7.1 IP address blacklisted by recipient", C),
    ("lhost-sendmail-35", "5.7.13", "SMTP; 525 5.7.13 Disabled recipient address", P),
    ("lhost-sendmail-39", "4.4.7", "SMTP; 452 4.4.5 Insufficient disk space; try again later", T),
    ("lhost-sendmail-48", "5.7.1", "SMTP; 550 5.7.1 <pseudo-local-part-kijitora-nyaan@sfr.fr>: Recipient address "
                                   "rejected: User unknown", P),
    ("lhost-sendmail-60", "5.7.26", "SMTP; 550-5.7.26 The MAIL FROM domain [email.example.jp] has an SPF record with "
                                    "a hard fail", C),
    # Exchange (on premises) and Microsoft 365
    ("lhost-exchange2007-01", "5.1.1", "smtp;550 5.1.1 RESOLVER.ADR.RecipNotFound; not found", P),
    ("lhost-exchange2007-02", "5.2.2", "smtp;550 5.2.2 STOREDRV.Deliver: mailbox full.", P),
    ("lhost-exchange2007-03", "5.2.3", "smtp;550 5.2.3 RESOLVER.RST.RecipSizeLimit; message too large for this "
                                       "recipient", C),
    ("lhost-exchange2007-04", "5.7.1", "smtp;550 5.7.1 RESOLVER.RST.AuthRequired; authentication required", P),
    ("lhost-exchange2007-05", "4.4.7", "smtp;550 4.4.7 QUEUE.Expired; message expired", T),
    ("lhost-office365-03", "5.1.0", "smtp;550 5.1.0 192.0.2.222 is not allowed to send from <example.net> per it's "
                                    "SPF Record. Please inspect your SPF settings, and try again.", C),
    ("lhost-office365-05", "5.1.8", "smtp;501 5.1.8 Sender address rejected", A),
    ("lhost-office365-06", "5.4.312", "smtp;550 5.4.312 Message expired, DNS query failed", T),
    ("lhost-office365-07", "5.1.351", "smtp;550 5.1.351 Remote server returned unknown recipient or mailbox "
                                      "unavailable -> 550 <otsu-sakaba-hunter-neko-nyaaaaaaan@ezweb.ne.jp>: User "
                                      "unknown", P),
    ("lhost-office365-13", "5.1.10", "smtp;550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP "
                                     "address lookup", P),
    ("rhost-microsoft-01", "5.7.606", "SMTP; 550 5.7.606 Access denied, banned sending IP [198.51.100.222].", C),
    ("rhost-microsoft-05", "4.7.650", "smtp; 451 4.7.650 The mail server [192.0.2.25] has been temporarily rate "
                                      "limited due to IP reputation.", R),
    # Courier
    ("lhost-courier-01", "5.0.0", "smtp; 550 5.1.1 <kijitora@example.co.jp>... User Unknown", P),
    ("lhost-courier-02", "5.0.0", "smtp; 550 Unknown user kijitora@example.jp", P),
    ("lhost-courier-03", "5.0.0", "smtp; 550 5.7.1 can't determine Purported Responsible Address", C),
    ("lhost-courier-04", "5.0.0", "unknown; No such domain.", P),
    # Exim
    ("lhost-exim-29", "5.0.0", "smtp; 550 Bad SPF records for [example.org:192.0.2.2], see http://spf.pobox.com/", C),
    ("lhost-exim-43", "5.0.0", "smtp; 550 5.7.1 Connections not accepted from servers without a valid sender "
                               "domain. Fix reverse DNS for 203.0.113.2", C),
    # Google Workspace (as the sending side reports a remote failure), Gmail, AOL
    ("rhost-gsuite-03", "4.0.0", "smtp; DNS Error: 80458680 DNS type 'mx' lookup of libsisimai.org responded with "
                                 "code NOERROR The domain libsisimai.org doesn't receive email according to the "
                                 "administrator: returned Null MX", P),
    ("rhost-gsuite-04", "4.0.0", "smtp; DNS Error: 80335577 DNS type 'mx' lookup of example.jp responded with code "
                                 "NXDOMAIN Domain name not found: example.jp", P),
    ("rhost-gsuite-06", "4.4.1", "smtp; The recipient server did not accept our requests to connect. [nora.nyaan.jp "
                                 "192.0.2.222: timed out]", T),
    ("rhost-gsuite-11", "5.1.8", "smtp; 501 5.1.8 Sender address rejected", A),
    ("rhost-google-01", "5.2.1", "SMTP; 550 5.2.1 The email account that you tried to reach is disabled.", P),
    ("rhost-google-05", "5.2.2", "smtp; 552-5.2.2 The recipient's inbox is out of storage space and inactive.", P),
    ("rhost-google-06", "5.7.25", "smtp; 550-5.7.25 [192.0.2.202] The IP address sending this message does not have "
                                  "a 550-5.7.25 PTR record setup", C),
    ("rhost-aol-01", "5.4.4", "X-Outbound-Mail-Relay; Host or domain name not found. Name service error for "
                              "name=example.jp type=A: Host not found", P),
    ("rhost-aol-06", "5.4.4", "X-Outbound-Mail-Relay; Name service error for name=libsisimai.org type=MX: Malformed "
                              "or unexpected name server reply", T),
    # Yahoo, Tencent (QQ)
    ("rhost-yahooinc-03", "5.0.0", "SMTP; 554 delivery error: dd This user doesn't have a yahoo.com account "
                                   "(this-local-part-does-not-exist@yahoo.com) [0] - mta1061.mail.ne1.yahoo.com", P),
    ("rhost-tencent-01", "5.0.0", "smtp; 550 Ip frequency limited", R),
    ("rhost-tencent-02", "5.0.0", "smtp; 550 Connection frequency limited", R),
    ("rhost-tencent-03", "5.0.0", "smtp; 550 DMARC check failed.", C),
    # Japanese carriers (docomo, au/KDDI): they answer in English
    ("rhost-nttdocomo-02", "5.0.0", "smtp; 550 Unknown user azumakuniyuki@ntt.docomo.example.ne.jp", P),
    ("rhost-kddi-01", "5.2.0", "SMTP; 550 : User unknown", P),
    ("rhost-kddi-02", "5.1.1", "SMTP; 550 <otsu-sakaba-hunter-neko-nyaaaaaaan@au.com>: User unknown", P),
    # French providers (Orange, La Poste): bilingual replies
    ("rhost-franceptt-01", "5.1.1", "SMTP; 550 5.1.1 Adresse d au moins un destinataire invalide. Invalid "
                                    "recipient. OFR_416 [416]", P),
    ("rhost-franceptt-02", "5.5.0", "SMTP; 550 5.5.0 Adresse destinataire invalide. Invalid recipient. LPN007_416",
     P),
    ("rhost-franceptt-05", "5.5.0", "smtp; 550 5.5.0 Le compte du destinataire est bloque. The recipient account is "
                                    "blocked. LPN007_426", P),
    ("rhost-franceptt-06", "4.0.0", "smtp; 550 mwinf5c04 ME Adresse IP source bloquee pour incident de spam. Client "
                                    "host blocked for spamming issues. OFR006_102", C),
    ("rhost-franceptt-08", "4.2.0", "smtp; 421 4.2.0 Service refuse. Veuillez essayer plus tard. Service refused, "
                                    "please try later. OFR005_505 [505]", T),
]


@pytest.mark.parametrize(("source", "status", "diagnostic", "expected"), BOUNCES, ids=[b[0] for b in BOUNCES])
def test_real_bounce_diagnostics_get_their_class(source: str, status: str, diagnostic: str,
                                                 expected: FailureClass) -> None:
    assert classify_bounce(status, diagnostic) is expected


def test_the_bounces_cover_many_mtas_and_providers() -> None:
    families = {source.split("-")[1] for source, *_ in BOUNCES}
    assert {"postfix", "sendmail", "exchange2007", "office365", "courier", "exim", "gsuite", "google", "aol",
            "yahooinc", "nttdocomo", "kddi", "franceptt", "tencent"} <= families


# Submission replies: what the mailbox's provider answers our agent. (reply, class)
SUBMISSION_REPLIES = [
    # Microsoft 365: three concurrent connections per mailbox (Exchange team blog, 2018), send-as permission,
    # the sending mailbox full (Sent Items), in English and in the Japanese documentation.
    ("432 4.3.2 STOREDRV.ClientSubmit; sender thread limit exceeded", R),
    ("432 4.3.2 concurrent connection limit exceeded", R),
    ("554 5.2.0 STOREDRV.Submission.Exception:SendAsDeniedException.MapiExceptionSendAsDenied; Failed to process "
     "message due to a permanent exception with message Cannot submit message", A),
    ("554 5.2.2 mailbox full; STOREDRV.Submission.Exception:QuotaExceededException.MapiExceptionShutoffQuotaExceeded",
     Q),
    ("554 5.2.2 メールボックスがいっぱいです; STOREDRV.Submission.Exception:QuotaExceededException."
     "MapiExceptionShutoffQuotaExceeded", Q),
    # IONOS (German host): its documented replies
    ("421 Rate limit reached. Please try again later", R),
    ("421 Reject due to policy violations", T),
    # A German host's documented replies (bytecamp): greylisting, a full mailbox for now, spam
    ("450 4.2.0 Recipient address rejected: Greylisted", T),
    ("422 4.2.2 Quota limit exceeded (Speicherplatz des Kontos ueberschritten)", T),
    ("571 5.7.1 message classified as spam (Nachricht als Spam eingestuft)", C),
    # Web.de, GMX (German): documented replies
    ("550 Benutzer nicht bekannt/User unknown", P),
    ("550 Benutzer hat das Speichervolumen ueberschritten. / User has exhausted allowed storage space.", P),
    # Orange (French): too many connections as its code list quotes it (OFR004_104), a temporary refusal
    ("421 Trop de connexions, veuillez verifier votre configuration / Too many connections, slow down. "
     "OFR004_104", R),
    ("421 mwinf5c77 ME Service refuse. Veuillez essayer plus tard.", T),
    # StartMail: the account's sending limit
    ("550 5.7.1 Your mail limit has been reached.", Q),
    # Gmail: a busy server is congestion (X.4.x), not a verdict on the sender
    ("421 4.4.5 Server busy, try again later.", T),
    ("451 4.4.2 Timeout - closing connection.", T),
]


@pytest.mark.parametrize(("reply", "expected"), SUBMISSION_REPLIES, ids=[r[:40] for r, _ in SUBMISSION_REPLIES])
def test_submission_replies_get_their_class(reply: str, expected: FailureClass) -> None:
    assert classify(*split_reply(reply)) is expected


# The other-language half of a real bilingual reply, alone: the words themselves must decide, not the English.
OTHER_LANGUAGE_HALVES = [
    ("550 5.5.0 Adresse destinataire invalide.", P),  # La Poste
    ("550 5.5.0 Le compte du destinataire est bloque.", P),  # La Poste
    ("421 Trop de connexions, veuillez verifier votre configuration", R),  # Orange
    ("550 Benutzer nicht bekannt", P),  # Web.de
    ("550 Benutzer hat das Speichervolumen ueberschritten.", P),  # Web.de
    ("554 5.2.2 メールボックスがいっぱいです", P),  # Microsoft, Japanese: without the submission token, a recipient's
]


@pytest.mark.parametrize(("reply", "expected"), OTHER_LANGUAGE_HALVES, ids=[r for r, _ in OTHER_LANGUAGE_HALVES])
def test_french_german_and_japanese_words_decide_alone(reply: str, expected: FailureClass) -> None:
    assert classify(*split_reply(reply)) is expected


def test_the_deciding_rule_of_a_few_real_replies() -> None:
    # The precedence, seen on real replies: text about a rate beats the 4.3.2 "system" code; an addressing code
    # decides a temporary reply; recipient text beats the X.4.x code of Microsoft's "Access denied".
    assert explain(432, "4.3.2", "STOREDRV.ClientSubmit; sender thread limit exceeded").rule == "rate_limit_text"
    assert explain(450, "4.1.1", "<k@example.org>: Recipient address rejected: User unknown").rule == \
        "addressing_code"
    assert explain(550, "5.4.1", "<k@example.br>: Recipient address rejected: Access denied").rule == \
        "recipient_text"
    assert explain(550, None, "Host or domain name not found. Name service error for name=x type=A: Host not found"
                   ).rule == "recipient_domain_missing"
