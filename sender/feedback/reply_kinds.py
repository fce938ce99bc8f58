"""What a reply says, as a person reads it: an automatic one (and until when its author is away), a request to stop
mailing, a note that the lead left or is the wrong person, or a person's answer.

Every rule is one row of RULES (kind, language, words); the first kind in KIND_ORDER that has a matching row wins.
Only the newest part of a reply is read: quoted lines ('>') and everything after a quote header ("On ... wrote:",
"Am ... schrieb", "Le ... a écrit", ...) are dropped, so our own quoted unsubscribe footer never reads as a request.
The text is a stranger's: at most MAX_SCAN characters are looked at, the patterns have no nested repetition, and
the date parser looks at a bounded number of candidates and never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta
from enum import StrEnum

MAX_SCAN = 4000  # characters of the newest part that are read: a request or a return date comes first
MAX_DATES = 16  # date candidates looked at in one auto-reply
MAX_NAMED = 4  # addresses kept from a "write to bob@ instead" note
AWAY_CAP = timedelta(days=30)  # an auto-reply never holds a lead longer than this
AWAY_DEFAULT = timedelta(days=7)  # an auto-reply naming no usable return date holds the lead this long


class ReplyKind(StrEnum):
    AUTOMATIC = "automatic"  # never ends a sequence; holds the next step until the author is back
    STOP = "stop"  # suppresses the address (reason "asked in a reply") and counts as an unsubscribe
    LEFT = "left"  # the sequence ends as `left`; addresses it names are shown, never mailed
    PERSON = "person"  # a reply: ends the sequence as today


@dataclass(frozen=True)
class Rule:
    kind: ReplyKind
    language: str
    words: re.Pattern[str]


def _rule(kind: ReplyKind, language: str, words: str) -> Rule:
    return Rule(kind, language, re.compile(words, re.IGNORECASE))


RULES: tuple[Rule, ...] = (
    # Subjects of automatic replies (the headers Auto-Submitted, X-Autoreply, ... are checked by the caller).
    _rule(ReplyKind.AUTOMATIC, "en", r"\b(out of (the )?office|automatic reply|auto[- ]?reply|away from the office)\b"),
    _rule(ReplyKind.AUTOMATIC, "de", r"\b(abwesenheitsnotiz|automatische antwort|nicht im b[üu]ro)\b"),
    _rule(ReplyKind.AUTOMATIC, "fr", r"(r[ée]ponse automatique|absent(e)? du bureau|\babsence\b)"),
    _rule(ReplyKind.AUTOMATIC, "es", r"(respuesta autom[áa]tica|fuera de la oficina)"),
    _rule(ReplyKind.AUTOMATIC, "it", r"(risposta automatica|fuori ufficio)"),
    _rule(ReplyKind.AUTOMATIC, "nl", r"(automatisch antwoord|afwezig(heid)?\b|niet op kantoor)"),
    _rule(ReplyKind.AUTOMATIC, "pt", r"(resposta autom[áa]tica|fora do escrit[óo]rio)"),
    # Asking us to stop.
    _rule(ReplyKind.STOP, "en", r"\b(unsubscribe|remove me|take me off|stop (e-?mailing|mailing|sending|contacting)|"
                                r"do not (e-?mail|contact) me|don'?t (e-?mail|contact) me|opt(ing)? out)\b"),
    _rule(ReplyKind.STOP, "de", r"(austragen|abmelden|entfernen sie mich|keine (weiteren )?(e-?mails|nachrichten)|"
                                r"nicht mehr (an)?schreiben|nicht mehr kontaktieren)"),
    _rule(ReplyKind.STOP, "fr", r"(d[ée]sinscri|d[ée]sabonn|retirez[- ]moi|(ne|pas) plus recevoir|veux plus recevoir|"
                                r"ne m'[ée]crivez plus|ne plus me contacter)"),
    _rule(ReplyKind.STOP, "es", r"(no me escriba|dar(me)? de baja|no me env[íi]e|no me contacte|eliminarme de)"),
    _rule(ReplyKind.STOP, "it", r"(cancellami|disiscriv|non scrivermi|rimuovetemi|rimuovermi|non contattarmi)"),
    _rule(ReplyKind.STOP, "nl", r"(afmelden|uitschrijven|verwijder (mij|me)|geen e-?mails? meer|niet meer mailen)"),
    _rule(ReplyKind.STOP, "pt", r"(descadastr|remova-me|remover-me|n[ãa]o me envie|cancelar (a )?inscri[çc][ãa]o|"
                                r"n[ãa]o me contate)"),
    # The lead is not there (or never was the one to write to).
    _rule(ReplyKind.LEFT, "en", r"\b(no longer (with|at|works|working)|(has|have) left|left the company|"
                                r"wrong person|not the right (person|contact))\b"),
    _rule(ReplyKind.LEFT, "de", r"(nicht mehr (im|in unserem|bei|f[üu]r)|hat (das|unser) unternehmen verlassen|"
                                r"ausgeschieden|falsche(r)? ansprechpartner)"),
    _rule(ReplyKind.LEFT, "fr", r"(ne fait plus partie|a quitt[ée]|ne travaille plus|mauvaise personne|"
                                r"n'est plus (chez|dans))"),
    _rule(ReplyKind.LEFT, "es", r"(ya no (trabaja|forma parte|est[áa] en)|dej[óo] la empresa|persona equivocada)"),
    _rule(ReplyKind.LEFT, "it", r"(non lavora pi[ùu]|non fa pi[ùu] parte|ha lasciato|persona sbagliata)"),
    _rule(ReplyKind.LEFT, "nl", r"(niet meer werkzaam|werkt (hier )?niet meer|uit dienst|verkeerde persoon)"),
    _rule(ReplyKind.LEFT, "pt", r"(n[ãa]o trabalha mais|j[áa] n[ãa]o trabalha|n[ãa]o faz mais parte|deixou a empresa|"
                                r"pessoa errada)"),
)
KIND_ORDER = (ReplyKind.STOP, ReplyKind.LEFT)  # AUTOMATIC is decided first, PERSON is what is left

# A quote header: the line that starts what the reply quotes ("On Mon, Bob wrote:", "Am 3.1. schrieb Bob:", ...).
_QUOTE_HEADER = re.compile(
    r"^\s*(on\b.{0,200}\bwrote:|am\b.{0,200}\bschrieb\b|le\b.{0,200}\ba [ée]crit\s*:|el\b.{0,200}\bescribi[óo]:|"
    r"il\b.{0,200}\bha scritto:|op\b.{0,200}\bschreef\b|em\b.{0,200}\bescreveu:|-{2,}\s*(original message|"
    r"urspr[üu]ngliche nachricht|message d'origine|mensaje original|messaggio originale|oorspronkelijk bericht|"
    r"mensagem original)\s*-{2,}|from:\s|von:\s|de\s?:\s)", re.IGNORECASE)
_ADDRESS = re.compile(r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){1,8}")

_MONTHS = {
    # en, de, fr, es, it, nl, pt: full names and their common short forms
    1: "january jan januar janvier enero gennaio gen januari janeiro",
    2: "february feb februar février fevrier febrero febbraio februari fevereiro fev",
    3: "march mar märz maerz mars marzo maart março marco",
    4: "april apr avril abril aprile",
    5: "may mai mayo maggio mei maio",
    6: "june jun juni juin junio giugno junho",
    7: "july jul juli juillet julio luglio julho",
    8: "august aug août aout agosto augustus",
    9: "september sep sept septembre septiembre settembre setembro",
    10: "october oct oktober octobre octubre ottobre ott outubro",
    11: "november nov novembre noviembre novembro",
    12: "december dec dezember dez décembre decembre diciembre dicembre dic dezembro",
}
_MONTH_OF = {name: number for number, names in _MONTHS.items() for name in names.split()}
_MONTH_NAMES = "|".join(sorted((re.escape(n) for n in _MONTH_OF), key=len, reverse=True))
_DATE = re.compile(
    r"\b(?P<iy>\d{4})-(?P<im>\d{1,2})-(?P<id>\d{1,2})\b"  # 2027-01-12
    r"|\b(?P<nd>\d{1,2})[./](?P<nm>\d{1,2})(?:[./](?P<ny>\d{2}|\d{4}))?\b"  # 12.01. 12/01 12.01.2027
    r"|\b(?P<wd>\d{1,2})(?:st|nd|rd|th|er|\.|º)?\s(?:de\s)?(?P<wm>" + _MONTH_NAMES + r")\.?"
    r"(?:\s(?:de\s)?(?P<wy>\d{4}))?\b"  # 12 January, 12. Januar, 12 de enero (de 2027)
    r"|\b(?P<mm>" + _MONTH_NAMES + r")\.?\s(?P<md>\d{1,2})(?:st|nd|rd|th)?\b(?:,?\s(?P<my>\d{4}))?",  # January 12
    re.IGNORECASE)


@dataclass(frozen=True)
class ReplyReading:
    """What reading a reply tells: its kind, the rule that told it, and what an automatic or LEFT reply adds."""

    kind: ReplyKind
    rule: str  # "<kind>/<language>" of the matching row, or "header" for an automatic reply told by its headers
    back_on: date | None = None  # an automatic reply's return date, when it names one
    hold_until: date | None = None  # an automatic reply's: the lead's next step waits until this day
    named: tuple[str, ...] = ()  # a LEFT reply's: the addresses it names (shown, never mailed)


def newest_part(text: str) -> str:
    """The reply's own words: lines before the first quote header, without quoted ('>') lines, at most MAX_SCAN."""
    kept: list[str] = []
    size = 0
    for line in text[: MAX_SCAN * 4].splitlines():
        if line.lstrip().startswith(">"):
            continue
        if _QUOTE_HEADER.match(line[:300]):
            break
        kept.append(line)
        size += len(line) + 1
        if size >= MAX_SCAN:
            break
    return "\n".join(kept)[:MAX_SCAN]


def classify(subject: str, body: str, *, automatic: bool, received: date, sender: str = "") -> ReplyReading:
    """What the reply (its Subject, its text body) says. `automatic` is what its headers say (Auto-Submitted,
    X-Autoreply, ...); `received` is the reply's date, from which a return date's year and the hold are counted."""
    subject = subject[:300]
    text = newest_part(body)
    auto_rule = "header" if automatic else _first(ReplyKind.AUTOMATIC, subject)
    if auto_rule is not None:
        back = return_date(text, received)
        hold = min(back + timedelta(days=1), received + AWAY_CAP) if back else received + AWAY_DEFAULT
        return ReplyReading(ReplyKind.AUTOMATIC, auto_rule, back_on=back, hold_until=hold)
    words = subject + "\n" + text
    for kind in KIND_ORDER:
        rule = _first(kind, words)
        if rule is not None:
            named = _named(text, sender) if kind is ReplyKind.LEFT else ()
            return ReplyReading(kind, rule, named=named)
    return ReplyReading(ReplyKind.PERSON, "person")


def _first(kind: ReplyKind, text: str) -> str | None:
    for rule in RULES:
        if rule.kind is kind and rule.words.search(text):
            return f"{kind}/{rule.language}"
    return None


def _named(text: str, sender: str) -> tuple[str, ...]:
    found: list[str] = []
    for match in _ADDRESS.finditer(text):
        address = match.group(0).lower().rstrip(".")
        if address != sender.lower() and address not in found:
            found.append(address)
            if len(found) == MAX_NAMED:
                break
    return tuple(found)


def return_date(text: str, received: date) -> date | None:
    """The latest date in `text` after `received` (a date with no year is its next occurrence after `received`),
    or None. Day-first for numeric dates (12.01., 12/01), as every language here but US English writes them; a
    day-first reading that is no date is read month-first. Never raises."""
    best: date | None = None
    for count, match in enumerate(_DATE.finditer(text[:MAX_SCAN])):
        if count == MAX_DATES:
            break
        found = _date_of(match, received)
        if found is not None and found > received and (best is None or found > best):
            best = found
    return best


def _date_of(match: re.Match[str], received: date) -> date | None:
    g = match.groupdict()
    if g["iy"]:
        return _make(int(g["iy"]), int(g["im"]), int(g["id"]))
    if g["nd"]:
        year = _year(g["ny"])
        day, month = int(g["nd"]), int(g["nm"])
        return _dated(year, month, day, received) or _dated(year, day, month, received)
    if g["wd"]:
        return _dated(_year(g["wy"]), _MONTH_OF[g["wm"].lower()], int(g["wd"]), received)
    return _dated(_year(g["my"]), _MONTH_OF[g["mm"].lower()], int(g["md"]), received)


def _year(text: str | None) -> int | None:
    if not text:
        return None
    year = int(text)
    return year + 2000 if year < 100 else year


def _dated(year: int | None, month: int, day: int, received: date) -> date | None:
    if year is not None:
        return _make(year, month, day)
    this_year = _make(received.year, month, day)
    if this_year is not None and this_year > received:
        return this_year
    return _make(received.year + 1, month, day)


def _make(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None
