"""Bounces by meaning (issue 39): reports in the non-RFC 3464 shapes real MTAs write, vendor delivery-status
types, and mail from a mailer-daemon or postmaster are bounces, never a lead's reply; a full mailbox is a soft
bounce whatever the server's words."""

from __future__ import annotations

import pytest

from sender.feedback.bounces import MessageKind, parse
from warmup import FailureClass

OURS = "<ours-1@sender.example>"
LEAD = "lead@rcpt.example"
BOX = "box0@sender.example"


def _mail(sender: str, subject: str, body: str, content_type: str = "text/plain; charset=utf-8") -> bytes:
    return (f"From: {sender}\r\nTo: {BOX}\r\nSubject: {subject}\r\nDate: Mon, 30 Nov 2026 10:00:00 +0000\r\n"
            f"Message-ID: <ndr-1@mx.rcpt.example>\r\nMIME-Version: 1.0\r\nContent-Type: {content_type}\r\n\r\n"
            f"{body}").encode()


def _original() -> str:
    return f"From: {BOX}\r\nTo: {LEAD}\r\nSubject: Hello\r\nMessage-ID: {OURS}\r\n"


GROUPWISE = ("The message that you sent was undeliverable to the following:\r\n"
             f"\t{LEAD} (user not found)\r\n\r\nPossible causes:\r\n\tThe e-mail address was misspelled.\r\n\r\n"
             f"Original message header:\r\n\r\n{_original()}")
DOMINO = (f"Your message\r\n\r\n  Subject: Hello\r\n\r\nwas not delivered to:\r\n\r\n  {LEAD}\r\n\r\n"
          "because:\r\n\r\n  User lead (lead@rcpt.example) not listed in Domino Directory\r\n\r\n"
          f"{_original()}")
EXCHANGE_DE = (f"Ihre Nachricht hat einige oder alle Empfänger nicht erreicht.\r\n\r\n  Betreff: Hello\r\n"
               f"  Gesendet: 30.11.2026 09:00\r\n\r\nDie folgenden Empfänger sind nicht erreichbar:\r\n\r\n"
               f"  '{LEAD}' am 30.11.2026 09:00\r\n    550 5.1.1 RESOLVER.ADR.RecipNotFound; not found\r\n\r\n"
               f"{_original()}")


@pytest.mark.parametrize(("sender", "subject", "body"), [
    ("Postmaster <postmaster@rcpt.example>", "Message status - undeliverable", GROUPWISE),
    ("Postmaster <postmaster@rcpt.example>", "DELIVERY FAILURE: User lead not listed", DOMINO),
    ("Microsoft Outlook <postmaster@rcpt.example>", "Unzustellbar: Hello", EXCHANGE_DE),
], ids=["groupwise", "domino", "exchange-de"])
def test_a_postmasters_text_report_of_a_missing_user_is_a_hard_bounce_not_a_reply(sender: str, subject: str,
                                                                                  body: str) -> None:
    parsed = parse(_mail(sender, subject, body))
    assert parsed.kind is MessageKind.HARD_BOUNCE, parsed
    assert OURS in parsed.quoted


@pytest.mark.parametrize(("subject", "words"), [
    ("Non remis : Hello", "Votre message n'a pas pu être remis. Destinataire inconnu."),
    ("No se pudo entregar: Hello", "No se pudo entregar el mensaje: user not found"),
    ("Niet bezorgd: Hello", "Het bericht is niet bezorgd: user not found"),
    ("Não entregue: Hello", "A mensagem não foi entregue: user not found"),
    ("Non consegnato: Hello", "Il messaggio non consegnato: user not found"),
], ids=["fr", "es", "nl", "pt", "it"])
def test_a_localised_report_quoting_our_message_id_is_never_a_reply(subject: str, words: str) -> None:
    # From a relay's ordinary address (not mailer-daemon): the quoted Message-ID and the failure words decide.
    parsed = parse(_mail("Exchange <exchange@relay.rcpt.example>", subject, f"{words}\r\n\r\n{_original()}"))
    assert parsed.kind is MessageKind.HARD_BOUNCE, parsed


def test_a_mailer_daemons_mail_naming_no_failure_is_unread_not_a_reply() -> None:
    parsed = parse(_mail("MAILER-DAEMON@mx.rcpt.example", "Hello", "Your mail was handled.\r\n"))
    assert parsed.kind is MessageKind.MALFORMED


def test_a_persons_reply_quoting_words_of_failure_is_still_a_reply() -> None:
    body = "Hi, I could not be delivered the parcel either. Let's talk.\r\n"
    parsed = parse(_mail(f"Lead <{LEAD}>", "Re: Hello", body))
    assert parsed.kind is MessageKind.REPLY


def _xdsn(status: str, diagnostic: str) -> bytes:
    boundary = "X-1"
    body = (f"--{boundary}\r\nContent-Type: text/plain\r\n\r\nDelivery has failed.\r\n\r\n"
            f"--{boundary}\r\nContent-Type: message/xdelivery-status\r\n\r\n"
            "Reporting-MTA: dns; mx.rcpt.example\r\n\r\n"
            f"Final-Recipient: rfc822; {LEAD}\r\nAction: failed\r\nStatus: {status}\r\n"
            f"Diagnostic-Code: {diagnostic}\r\n\r\n"
            f"--{boundary}\r\nContent-Type: text/rfc822-headers\r\n\r\n{_original()}\r\n--{boundary}--\r\n")
    return _mail("MAILER-DAEMON@mx.rcpt.example", "Undeliverable: Hello", body,
                 f'multipart/report; report-type=delivery-status; boundary="{boundary}"')


def test_a_vendor_xdelivery_status_report_is_read() -> None:
    parsed = parse(_xdsn("5.1.1", "smtp; 550 5.1.1 User unknown"))
    assert (parsed.kind, parsed.about, parsed.recipients) == (MessageKind.HARD_BOUNCE, (OURS,), frozenset({LEAD}))


def test_web_des_too_many_messages_on_the_server_is_a_soft_bounce_of_a_full_mailbox() -> None:
    parsed = parse(_xdsn("4.2.2", "smtp; 452 4.2.2 User has too many messages on the server"))
    assert parsed.kind is MessageKind.SOFT_BOUNCE
    assert not parsed.detail.startswith("rate_limited"), parsed.detail


def test_a_permanently_full_mailbox_is_a_soft_bounce_that_never_suppresses() -> None:
    parsed = parse(_xdsn("5.2.2", "smtp; 552 5.2.2 Mailbox full"))
    assert (parsed.kind, parsed.failure, parsed.status) == (MessageKind.SOFT_BOUNCE, FailureClass.RECIPIENT, "5.2.2")


def test_a_disabled_mailbox_is_still_a_hard_bounce() -> None:
    assert parse(_xdsn("5.2.1", "smtp; 550 5.2.1 Mailbox disabled")).kind is MessageKind.HARD_BOUNCE


def test_a_text_warning_that_delivery_goes_on_is_a_temporary_soft_bounce() -> None:
    body = ("This message was created automatically by mail delivery software.\r\n"
            f"A message that you sent has not yet been delivered to {LEAD} after 24 hours.\r\n"
            "Delivery attempts will continue for some time.\r\n\r\n" + _original())
    parsed = parse(_mail("Mail Delivery System <MAILER-DAEMON@mx.rcpt.example>", "Warning: message delayed", body))
    assert (parsed.kind, parsed.status) == (MessageKind.SOFT_BOUNCE, "4.0.0")


def test_a_telephone_number_in_a_text_report_is_no_reply_code() -> None:
    body = (f"Hi. This is the qmail-send program. For help call (480) 624-2500.\r\n<{LEAD}>:\r\n"
            "The e-mail message could not be delivered because the user's mailfolder is full.\r\n\r\n" + _original())
    parsed = parse(_mail("MAILER-DAEMON@mx.rcpt.example", "failure notice", body))
    assert (parsed.kind, parsed.status) == (MessageKind.SOFT_BOUNCE, "5.0.0")


def test_digits_inside_an_encoded_line_or_an_identifier_are_no_reply_code() -> None:
    body = (f"Your message could not be delivered to {LEAD}.\r\nUser not found.\r\n\r\n"
            "X-Mailru-Sender: 529FC3EDD4E672349037D5FA5C4224003CC836476C0CAF46E3\r\n"
            "Message-ID: <479ce6@df.example.jp>\r\n\r\n" + _original())
    parsed = parse(_mail("MAILER-DAEMON@mx.rcpt.example", "Undelivered mail", body))
    assert (parsed.kind, parsed.status) == (MessageKind.HARD_BOUNCE, "5.0.0")


def test_a_qmail_report_stating_its_code_is_read_with_it_and_final() -> None:
    body = ("Hi. This is the qmail-send program at mx.rcpt.example.\r\n"
            "I'm afraid I wasn't able to deliver your message to the following addresses.\r\n\r\n"
            f"<{LEAD}>:\r\nSorry, I wasn't able to establish an SMTP connection. (#4.4.1)\r\n"
            "I'm not going to try again; this message has been in the queue too long.\r\n\r\n" + _original())
    parsed = parse(_mail("MAILER-DAEMON@mx.rcpt.example", "failure notice", body))
    assert (parsed.kind, parsed.status, parsed.failure) == (MessageKind.SOFT_BOUNCE, "5.4.1", FailureClass.TRANSIENT)


def _dsn_without_status(words: str) -> bytes:
    boundary = "N-1"
    body = (f"--{boundary}\r\nContent-Type: text/plain\r\n\r\n{words}\r\n\r\n"
            f"--{boundary}\r\nContent-Type: message/delivery-status\r\n\r\n"
            "Reporting-MTA: dns; mx.rcpt.example\r\n\r\n"
            f"Final-Recipient: rfc822; {LEAD}\r\nAction: failed\r\n\r\n"
            f"--{boundary}\r\nContent-Type: text/rfc822-headers\r\n\r\n{_original()}\r\n--{boundary}--\r\n")
    return _mail("MAILER-DAEMON@mx.rcpt.example", "Returned mail", body,
                 f'multipart/report; report-type=delivery-status; boundary="{boundary}"')


def test_a_final_failure_with_no_status_is_hard_only_when_its_words_say_the_address_is_gone() -> None:
    gone = parse(_dsn_without_status(f"mail.local: unknown user: {LEAD}"))
    assert (gone.kind, gone.status, gone.failure) == (MessageKind.HARD_BOUNCE, "5.0.0", FailureClass.RECIPIENT)
    refused = parse(_dsn_without_status("The owner of the list did not accept your message."))
    assert (refused.kind, refused.status) == (MessageKind.SOFT_BOUNCE, "5.0.0")


def test_a_report_whose_boundaries_were_dropped_is_read_as_its_text() -> None:
    body = (f"Undeliverable Address: {LEAD}\r\nReason: mail.local: unknown user: lead\r\n"
            "Original message attached\r\n\r\n" + _original())
    raw = _mail("Mail Delivery Subsystem <MAILER-DAEMON@mx.rcpt.example>", "Returned mail",
                body, 'multipart/report; report-type=delivery-status; boundary="B-1"')
    parsed = parse(raw)
    assert (parsed.kind, parsed.failure) == (MessageKind.HARD_BOUNCE, FailureClass.RECIPIENT), parsed


@pytest.mark.parametrize(("sender", "subject"), [
    ("MAILER-DAEMON", "There was an error sending your mail"),
    ('"Mail Deliver System" <MAILER-DAEMON>', "Returned Mail: User unknown"),
    ("post_master@vtext.example", "Re:Hello"),
    ("Mailer Daemon <bounces@mx.rcpt.example>", "Delivery status notification: error"),
    ("MMSC NDR Administrator <sysadmin@mmsc.rcpt.example>", "Undeliverable Message"),
], ids=["daemon-without-domain", "deliver-system", "post_master", "mailer-daemon-name", "undeliverable-subject"])
def test_reports_in_the_spellings_mtas_use_are_never_a_reply(sender: str, subject: str) -> None:
    body = f"Message could not be delivered to {LEAD}.\r\nError: No valid recipients for this message.\r\n"
    parsed = parse(_mail(sender, subject, body))
    assert parsed.kind is MessageKind.HARD_BOUNCE, parsed


def test_a_report_with_the_returned_message_but_no_status_part_is_read_as_a_text_report() -> None:
    boundary = "R-1"
    body = (f"--{boundary}\r\nContent-Type: text/plain\r\n\r\nYour message was not delivered.\r\n"
            f"{LEAD}: 550 sorry, no mailbox here by that name (#5.1.1 - chkusr)\r\n\r\n"
            f"--{boundary}\r\nContent-Type: message/rfc822\r\n\r\n{_original()}\r\nHello\r\n--{boundary}--\r\n")
    parsed = parse(_mail("MAILER-DAEMON@mx.rcpt.example", "Returned mail", body,
                         f'multipart/report; report-type=delivery-status; boundary="{boundary}"'))
    assert (parsed.kind, parsed.failure) == (MessageKind.HARD_BOUNCE, FailureClass.RECIPIENT), parsed


@pytest.mark.parametrize("words", [
    "There was an error delivering your mail to <lead@rcpt.example>.\r\n"
    "DNS lookup failure: host rcpt.example not found",
    "------- Failure Reasons --------\r\nUser not listed in public Name & Address Book lead@rcpt.example",
], ids=["dma-host-not-found", "notes-address-book"])
def test_text_reports_of_a_missing_host_or_user_are_hard(words: str) -> None:
    parsed = parse(_mail("MAILER-DAEMON@mx.rcpt.example", "Mail failure", f"{words}\r\n\r\n{_original()}"))
    assert (parsed.kind, parsed.failure) == (MessageKind.HARD_BOUNCE, FailureClass.RECIPIENT), parsed


@pytest.mark.parametrize(("action", "expected"), [("failed", MessageKind.HARD_BOUNCE),
                                                  ("delayed", MessageKind.SOFT_BOUNCE)])
def test_an_action_failed_is_final_whatever_class_its_status_carries(action: str, expected: MessageKind) -> None:
    # Gmail reports a domain it gave up on as Action: failed with Status 4.0.0 (RFC 3464 2.3.3: no further attempt).
    raw = _xdsn("4.0.0", "smtp; DNS Error: DNS type 'mx' lookup of rcpt.example responded with code NXDOMAIN")
    parsed = parse(raw.replace(b"Action: failed", f"Action: {action}".encode()))
    assert parsed.kind is expected, parsed
