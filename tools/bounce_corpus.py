"""How right `classify_bounce` is on a public corpus of real bounces, judged by its maintainers' published reasons.

    .venv/bin/python tools/bounce_corpus.py SET_OF_EMAILS GO_SISIMAI [--misses]

SET_OF_EMAILS is a checkout of github.com/sisimai/set-of-emails (real bounce mails, maildir/bsd/*.eml);
GO_SISIMAI a checkout of github.com/sisimai/go-sisimai, whose fact/*_test.go list, per mail, the reason its
maintainers give each failed recipient (userunknown, mailboxfull, blocked, expired, ...). Neither is shipped here.

For each mail that carries an RFC 3464 delivery-status part, this reads the first failed recipient's Status and
Diagnostic-Code (or, without one, the report's human-readable text) and the stage the report names, as sendhost's
inbox reader does (sender.feedback.bounces.failure_fields), classifies them with
`warmup.classify_bounce`, and compares the class with the one that reason means for a sender (`REASON_CLASSES`;
some reasons admit two classes). Reasons that say nothing about a failure (delivered, vacation, feedback, onhold,
undefined) are left out. Prints the share right, by reason and overall, and with --misses each miss; the cases in
tests/warmup/test_failures_replies.py come from these mails, and those judged otherwise than sisimai on purpose
are listed there with the reason.
"""

from __future__ import annotations

import argparse
import email
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sender.feedback.bounces import failure_fields
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
    "norelaying": frozenset({C}), "syntaxerror": frozenset({C, T}),
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("set_of_emails", type=Path)
    parser.add_argument("go_sisimai", type=Path)
    parser.add_argument("--misses", action="store_true")
    parser.add_argument("--replies-only", action="store_true",
                        help="only mails whose Diagnostic-Code quotes the remote server's reply (type smtp)")
    args = parser.parse_args()
    judged: Counter[str] = Counter()
    right: Counter[str] = Counter()
    families: set[str] = set()
    misses = []
    for name, reason in sorted(expectations(args.go_sisimai).items()):
        path = args.set_of_emails / "maildir" / "bsd" / name
        if reason not in REASON_CLASSES or not path.exists():
            continue
        status, diagnostic, report_text, stage = failure_fields(email.message_from_bytes(path.read_bytes()))
        if not status or (args.replies_only and not diagnostic.lower().lstrip().startswith("smtp;")):
            continue
        try:
            got = classify_bounce(status, diagnostic, report_text, stage)
        except ValueError:
            continue
        judged[reason] += 1
        families.add(name.rsplit("-", 1)[0])
        if got in REASON_CLASSES[reason]:
            right[reason] += 1
        else:
            misses.append((name, reason, status, diagnostic or report_text[:160], got))
    total, correct = sum(judged.values()), sum(right.values())
    for reason in sorted(judged):
        print(f"  {reason:16s} {right[reason]:3d} / {judged[reason]:3d}")
    print(f"{correct} of {total} right ({correct / total:.1%}), from {len(families)} MTAs and providers")
    if args.misses:
        for name, reason, status, diagnostic, got in misses:
            print(f"MISS {name} [{reason}] {status} {diagnostic!r} -> {got}")


if __name__ == "__main__":
    main()
