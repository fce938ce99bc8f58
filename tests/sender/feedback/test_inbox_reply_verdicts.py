"""`sendhost sender inbox --once` against a real IMAP server (dovecot) and a real ledger, per language: an automatic
reply naming its return date holds the lead's next step until the day after it (one naming none: 7 days), and never
ends the sequence, whether its headers or only its Subject say it is automatic; a reply saying the lead left ends
the sequence as `left`, naming the address it gives, which is never mailed; a colleague's reply at the lead's
domain ends the lead's sequence in a campaign with `stop_on_domain_reply: true`, and a free-mail one never does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from sender.ledger.events import Feedback
from tests.sender.feedback.test_inbox import BOX0, BOX1, PASSWORDS, _inbox, _inventory, _stop_the_embedded_redis  # noqa: F401
from tests.sender.inbox_samples import BOX
from tests.sender.web_server import sent_row
from tests.support.dovecot import Dovecot, dovecot_server

MONTHS = {
    "en": "January February March April May June July August September October November December",
    "es": "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre",
    "it": "gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre novembre dicembre",
    "nl": "januari februari maart april mei juni juli augustus september oktober november december",
    "pt": "janeiro fevereiro março abril maio junho julho agosto setembro outubro novembro dezembro",
}


def _month(language: str, day: date) -> str:
    return MONTHS[language].split()[day.month - 1]


# An automatic reply in each language: (Subject, its text for a return day, whether its headers say automatic).
AWAY = {
    "en": ("Automatic reply: Hello", lambda d: f"I am out of the office and back on {d.day} {_month('en', d)}.",
           True),
    "de": ("Abwesenheitsnotiz: Hello", lambda d: f"Ich bin ab dem {d.day:02d}.{d.month:02d}. wieder im Büro.", True),
    "fr": ("Réponse automatique : Hello", lambda d: f"Je serai de retour le {d.day:02d}/{d.month:02d}.", True),
    "es": ("Respuesta automática: Hello", lambda d: f"Estaré de vuelta el {d.day} de {_month('es', d)}.", True),
    "it": ("Risposta automatica: Hello", lambda d: f"Sarò di ritorno il {d.day} {_month('it', d)}.", True),
    # no Auto-Submitted or X-Autoreply: only its Subject, read per language, says it is automatic
    "nl": ("Automatisch antwoord: Hello", lambda d: f"Ik ben terug op {d.day} {_month('nl', d)}.", False),
    "pt": ("Resposta automática: Hello", lambda d: f"Estarei de volta em {d.isoformat()}.", True),
}
LEFT = {
    "en": "Eve is no longer with the company. Please write to {named} instead.",
    "de": "Frau Berg hat das Unternehmen verlassen. Schreiben Sie bitte an {named}.",
    "fr": "Mme Roy ne fait plus partie de l'entreprise, écrivez à {named}.",
    "es": "Ana ya no trabaja aquí; escriba a {named}.",
    "it": "Anna non lavora più qui, scrivete a {named}.",
    "nl": "Anna is niet meer werkzaam bij ons, mail {named}.",
    "pt": "A Ana não trabalha mais aqui, escreva para {named}.",
}


@pytest.fixture(scope="module")
def imap() -> Iterator[Dovecot]:
    with dovecot_server(PASSWORDS) as server:
        yield server


def _mail(sender: str, subject: str, own_id: str, body: str, *, about: str | None, automatic: bool = False) -> bytes:
    extra = (f"In-Reply-To: {about}\r\nReferences: {about}\r\n" if about else "") + (
        "Auto-Submitted: auto-replied\r\nX-Autoreply: yes\r\n" if automatic else "")
    return (f"From: {sender}\r\nTo: {BOX}\r\nSubject: {subject}\r\nDate: Mon, 30 Nov 2026 10:00:00 +0000\r\n"
            f"Message-ID: {own_id}\r\nMIME-Version: 1.0\r\n{extra}Content-Type: text/plain; charset=utf-8\r\n"
            f"Content-Transfer-Encoding: 8bit\r\n\r\n{body}\r\n").encode()


def _lead_and_steps(database_url: str, lead: str) -> tuple[tuple[object, ...], list[tuple[object, ...]]]:
    with psycopg.connect(database_url) as conn:
        found = conn.execute("SELECT ended, ended_note, held_until FROM sender_leads WHERE lead = %s",
                             (lead,)).fetchone()
        steps = conn.execute("SELECT e.step, e.status::text, e.not_before FROM sender_emails e JOIN sender_leads l "
                             "ON l.id = e.lead_id WHERE l.lead = %s ORDER BY e.step", (lead,)).fetchall()
    assert found is not None
    return found, steps


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def test_an_automatic_reply_holds_the_next_step_until_after_its_return_date_in_each_language(
        imap: Dovecot, feedback: Feedback, database_url: str, tmp_path: Path) -> None:
    today = datetime.now(UTC).date()
    back = today + timedelta(days=12)
    for n, (language, (subject, text, automatic)) in enumerate(AWAY.items()):
        lead, to = f"away-{language}", f"away-{language}@rcpt.example"
        _row, message_id = sent_row(feedback, lead, to, mailbox=BOX0 if n % 2 == 0 else BOX1)
        feedback.ledger.enqueue(lead=lead, step=2, address=to, group="sales", subject="Again", text="x",
                                not_before=datetime.now(UTC) + timedelta(days=3))
        imap.append(BOX0 if n % 2 == 0 else BOX1,
                    _mail(f"<{to}>", subject, f"<away-{language}@rcpt.example>", text(back), about=message_id,
                          automatic=automatic))
    _row, message_id = sent_row(feedback, "away-nodate", "nodate@rcpt.example", mailbox=BOX0)
    feedback.ledger.enqueue(lead="away-nodate", step=2, address="nodate@rcpt.example", group="sales", subject="Again",
                            text="x", not_before=datetime.now(UTC) + timedelta(days=3))
    imap.append(BOX0, _mail("<nodate@rcpt.example>", "Out of office", "<nodate@rcpt.example>",
                            "I am travelling with limited access to email.", about=message_id, automatic=True))

    result = _inbox(_inventory(tmp_path, imap), database_url, tmp_path)
    assert result.returncode == 0, result.stderr
    for language in AWAY:
        lead, steps = _lead_and_steps(database_url, f"away-{language}")
        assert (language, lead) == (language, (None, None, _midnight(back + timedelta(days=1))))
        assert (language, steps[0][1], steps[1][1:]) == (language, "sent",
                                                         ("queued", _midnight(back + timedelta(days=1))))
    lead, steps = _lead_and_steps(database_url, "away-nodate")
    assert lead == (None, None, _midnight(today + timedelta(days=7)))
    assert steps[1][1:] == ("queued", _midnight(today + timedelta(days=7)))
    outcomes: dict[str, int] = {}
    for mailbox in json.loads(result.stdout)["mailboxes"]:
        for key, count in mailbox["outcomes"].items():
            outcomes[key] = outcomes.get(key, 0) + count
    assert outcomes == {"applied": len(AWAY) + 1, "auto_replied": len(AWAY) + 1}


def test_a_reply_saying_the_lead_left_ends_the_sequence_as_left_in_each_language_and_mails_no_one_it_names(
        imap: Dovecot, feedback: Feedback, database_url: str, tmp_path: Path) -> None:
    for language, text in LEFT.items():
        lead, to, named = f"left-{language}", f"left-{language}@rcpt.example", f"bob-{language}@rcpt.example"
        _row, message_id = sent_row(feedback, lead, to, mailbox=BOX1)
        feedback.ledger.enqueue(lead=lead, step=2, address=to, group="sales", subject="Again", text="x",
                                not_before=datetime.now(UTC) + timedelta(days=3))
        imap.append(BOX1, _mail("Colleague <office@rcpt.example>", "Re: Hello", f"<left-{language}@rcpt.example>",
                                text.format(named=named), about=message_id))
    result = _inbox(_inventory(tmp_path, imap), database_url, tmp_path)
    assert result.returncode == 0, result.stderr
    for language in LEFT:
        (ended, note, _held), steps = _lead_and_steps(database_url, f"left-{language}")
        assert (language, ended, [s[1] for s in steps]) == (language, "left", ["replied", "cancelled"])
        assert f"(left/{language}); the reply names bob-{language}@rcpt.example" in str(note)
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM sender_emails WHERE address LIKE 'bob-%'").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM sender_suppressions").fetchone() == (0,)


def test_a_colleagues_reply_ends_the_leads_sequence_only_where_the_campaign_says_and_never_from_free_mail(
        imap: Dovecot, feedback: Feedback, database_url: str, tmp_path: Path) -> None:
    from tests.sender.feedback.test_reply_verdicts import _campaign, _send

    ledger = feedback.ledger
    _campaign(tmp_path, ledger, {"ann@bigco.example": "", "carl@bigco.example": "", "gil@gmail.com": ""},
              extra="stop_on_domain_reply: true\n")
    _campaign(tmp_path, ledger, {"uma@smallco.example": ""}, name="q2")  # stop_on_domain_reply: false
    for lead in ("ann@bigco.example", "carl@bigco.example", "gil@gmail.com", "uma@smallco.example"):
        _send(ledger, BOX0, lead=lead)
    # Fresh mail, not in any thread: from a colleague of ann and carl, from another gmail user, from uma's colleague.
    imap.append(BOX0, _mail("Dave <dave@bigco.example>", "Your offer", "<dave-1@bigco.example>",
                            "Hi, I handle purchasing here: send me the details.", about=None))
    imap.append(BOX0, _mail("<hal@gmail.com>", "Your offer", "<hal-1@gmail.com>", "Tell me more.", about=None))
    imap.append(BOX0, _mail("<vic@smallco.example>", "Your offer", "<vic-1@smallco.example>", "Tell me more.",
                            about=None))
    result = _inbox(_inventory(tmp_path, imap), database_url, tmp_path)
    assert result.returncode == 0, result.stderr
    with psycopg.connect(database_url) as conn:
        ended = dict(conn.execute("SELECT address, ended FROM sender_leads WHERE campaign_id <> 1").fetchall())
        note = conn.execute("SELECT ended_note FROM sender_leads WHERE address = 'carl@bigco.example'").fetchone()
    # carl was mailed last from this mailbox at bigco.example
    assert ended == {"ann@bigco.example": None, "carl@bigco.example": "colleague_replied", "gil@gmail.com": None,
                     "uma@smallco.example": None}
    assert note == ("dave@bigco.example replied",)
    (box0,) = [m for m in json.loads(result.stdout)["mailboxes"] if m["mailbox"] == BOX0]
    # (the module's mailboxes also hold the earlier tests' mail, which names no row of this ledger)
    assert (box0["outcomes"]["applied"], box0["outcomes"]["colleague_replied"]) == (1, 1)
