"""Replies as a person reads them, one rule table (sender.feedback.reply_kinds), per language: an automatic reply
holds the next step until after the return date it names (capped, year inferred), a request to stop, a lead who
left, and only the newest part of a reply counts."""

from __future__ import annotations

from datetime import date

import pytest

from sender.feedback.reply_kinds import AWAY_CAP, AWAY_DEFAULT, ReplyKind, classify, newest_part, return_date

RECEIVED = date(2027, 1, 4)

STOPS = {
    "en": ["Please remove me from your list.", "Unsubscribe", "take me off your list", "Stop emailing me."],
    "de": ["Bitte austragen.", "Bitte keine weiteren E-Mails."],
    "fr": ["Merci de me désinscrire.", "Je ne veux plus recevoir vos messages."],
    "es": ["No me escriba más, por favor.", "Quiero darme de baja."],
    "it": ["Cancellami dalla lista.", "Non scrivermi più."],
    "nl": ["Graag afmelden.", "Verwijder mij van uw lijst."],
    "pt": ["Por favor, não me envie mais e-mails.", "Quero me descadastrar."],
}
LEFTS = {
    "en": ["Anna is no longer with the company.", "She left the company in May.", "You have the wrong person."],
    "de": ["Frau Berg ist nicht mehr im Unternehmen.", "Er hat das Unternehmen verlassen."],
    "fr": ["Mme Roy ne fait plus partie de l'entreprise.", "Il a quitté la société."],
    "es": ["Ana ya no trabaja aquí.", "Dejó la empresa el mes pasado."],
    "it": ["Anna non lavora più qui.", "Ha lasciato l'azienda."],
    "nl": ["Anna is niet meer werkzaam bij ons.", "Hij is uit dienst."],
    "pt": ["A Ana não trabalha mais aqui.", "Ele deixou a empresa."],
}
AWAY = {
    "en": ("Out of office", "I am back on 12 January.", date(2027, 1, 12)),
    "de": ("Abwesenheitsnotiz", "Ich bin zurück am 12.01.", date(2027, 1, 12)),
    "fr": ("Réponse automatique", "Je serai de retour le 12/01.", date(2027, 1, 12)),
    "es": ("Respuesta automática", "Estaré de vuelta el 12 de enero.", date(2027, 1, 12)),
    "it": ("Risposta automatica", "Sarò di ritorno il 12 gennaio.", date(2027, 1, 12)),
    "nl": ("Automatisch antwoord", "Ik ben terug op 12 januari.", date(2027, 1, 12)),
    "pt": ("Resposta automática", "Estarei de volta em 12 de janeiro.", date(2027, 1, 12)),
}


@pytest.mark.parametrize(("language", "text"), [(k, t) for k, ts in STOPS.items() for t in ts])
def test_a_reply_asking_to_stop_is_a_stop_in_each_language(language: str, text: str) -> None:
    verdict = classify("Re: our offer", text, automatic=False, received=RECEIVED)
    assert verdict.kind is ReplyKind.STOP
    assert verdict.rule.endswith("/" + language)


@pytest.mark.parametrize(("language", "text"), [(k, t) for k, ts in LEFTS.items() for t in ts])
def test_a_reply_saying_the_lead_left_is_left_in_each_language(language: str, text: str) -> None:
    verdict = classify("Re: our offer", text, automatic=False, received=RECEIVED)
    assert verdict.kind is ReplyKind.LEFT
    assert verdict.rule.endswith("/" + language)


def test_a_left_reply_names_the_address_to_write_to_but_not_its_author() -> None:
    verdict = classify("Re: hi", "She left the company, write to Bob@Acme.example. -- eve@acme.example",
                       automatic=False, received=RECEIVED, sender="eve@acme.example")
    assert verdict.named == ("bob@acme.example",)


@pytest.mark.parametrize("language", sorted(AWAY))
def test_an_out_of_office_subject_holds_the_lead_until_after_its_return_date(language: str) -> None:
    subject, body, back = AWAY[language]
    verdict = classify(subject, body, automatic=False, received=RECEIVED)
    assert verdict.kind is ReplyKind.AUTOMATIC
    assert verdict.back_on == back
    assert verdict.hold_until == date(2027, 1, 13)


def test_an_automatic_reply_by_its_headers_is_automatic_even_when_it_says_unsubscribe() -> None:
    verdict = classify("Thanks for your mail", "To unsubscribe from my newsletter ...", automatic=True,
                       received=RECEIVED)
    assert verdict.kind is ReplyKind.AUTOMATIC and verdict.rule == "header"


def test_an_automatic_reply_with_no_date_holds_the_lead_seven_days() -> None:
    verdict = classify("Out of office", "I am travelling.", automatic=True, received=RECEIVED)
    assert verdict.back_on is None and verdict.hold_until == RECEIVED + AWAY_DEFAULT


def test_a_return_date_far_ahead_holds_the_lead_at_most_thirty_days() -> None:
    verdict = classify("Out of office", "On parental leave until 2027-09-01.", automatic=True, received=RECEIVED)
    assert verdict.back_on == date(2027, 9, 1) and verdict.hold_until == RECEIVED + AWAY_CAP


def test_a_return_date_without_year_is_its_next_occurrence_after_the_reply() -> None:
    assert return_date("back on 12 January", date(2026, 12, 20)) == date(2027, 1, 12)
    assert return_date("zurück am 03.12.", date(2026, 12, 1)) == date(2026, 12, 3)


def test_an_iso_date_and_the_latest_of_several_dates_is_the_return_date() -> None:
    assert return_date("away from 2027-01-05 to 2027-01-15", RECEIVED) == date(2027, 1, 15)


def test_a_date_before_the_reply_or_no_date_at_all_is_no_return_date() -> None:
    assert return_date("I was away on 2026-12-01", RECEIVED) is None
    assert return_date("31.02. 99/99 January 45", RECEIVED) is None
    assert return_date("I will be out 5 days", RECEIVED) is None


def test_quoted_text_is_not_read_so_our_own_footer_is_no_request() -> None:
    body = ("Sounds interesting, call me.\n\nOn Mon, 4 Jan 2027, Ann <ann@sender.example> wrote:\n"
            "> Hi Bob\n> Reply unsubscribe to stop these emails.\n")
    assert classify("Re: hi", body, automatic=False, received=RECEIVED).kind is ReplyKind.PERSON
    for header in ("Am 04.01.2027 um 10:00 schrieb Ann:", "Le lun. 4 janv. 2027, Ann a écrit :",
                   "El lun, 4 ene 2027, Ann escribió:", "-----Original Message-----"):
        assert newest_part(f"Ok.\n{header}\nunsubscribe") == "Ok."
    assert newest_part("Yes\n> unsubscribe\nthanks") == "Yes\nthanks"


def test_hostile_input_is_read_in_bounded_time_and_never_raises() -> None:
    import time
    started = time.monotonic()
    for body in ("9" * 200_000, "1." * 100_000, "On " * 100_000 + "wrote", "a@" * 100_000, "\n>" * 100_000,
                 "12 " * 100_000, "\udcff\x00" * 10_000):
        classify("Out of office " * 1000, body, automatic=False, received=RECEIVED)
        classify("Re", body, automatic=False, received=RECEIVED)
    assert time.monotonic() - started < 2.0
