"""Labelled real bounces that registry packages ship, fetched by package name into a cache, never committed, and read
with the labels their authors' own tests assert (tests/data/README.md names each source, its version and licence).

    flufl.bounce   PyPI sdist, the version constraints.txt pins (Apache-2.0): tests/data/*.txt; labels from
                   tests/test_detectors.py's DETECTORS: the addresses each report fails, permanently or temporarily.
    bounceparser   Debian source package libmail-deliverystatus-bounceparser-perl (Perl's terms: GPL-1+ or
                   Artistic): t/corpus/*.msg; labels from t/*.t: the `std_reason` each test expects (user_unknown,
                   user_disabled, domain_error, over_quota, spam) and `is_bounce => 0` for mail that is no bounce.
    baunsu         npm package baunsu (MIT): tests/emails/*.txt; labels from tests/*Test.js: the files a test asserts
                   `isHard()` (a 5.x.x status: permanent) or `bounced` false (no bounce).

Each sample is read through the inbox's whole-message path (`sender.feedback.bounces.parse`) and judged by what
its label means for a sender (`LABELS`). The cache is `.sendhost/bounce-corpora` in the checkout (or
$SENDHOST_BOUNCE_CORPORA); a corpus is fetched once, with the registry's ordinary client (pip, apt-get, npm).
"""

from __future__ import annotations

import ast
import fcntl
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sender.feedback.bounces import MessageKind, Parsed  # noqa: E402
from warmup.failures import FailureClass  # noqa: E402

FETCH_TIMEOUT = 300  # seconds for one client command
DEBIAN_PACKAGE = "libmail-deliverystatus-bounceparser-perl"
NPM_PACKAGE = "baunsu@0.2.3"


class CorpusError(Exception):
    """A corpus could not be fetched or read."""


# -- what a label means for a sender ---------------------------------------------------------------------------

def _hard(p: Parsed) -> bool:
    return p.kind is MessageKind.HARD_BOUNCE


def _permanent(p: Parsed) -> bool:
    # A final failure of the address: suppressed (hard), or a permanent refusal noted as soft (policy, a full
    # mailbox, a reason the report does not give).
    # A 4.4.7 Status is final too: the relay gave up, its delivery time expired (RFC 3463 X.4.7).
    final = p.status.startswith("5") or p.status.endswith(".4.7")
    return p.kind is MessageKind.HARD_BOUNCE or (p.kind is MessageKind.SOFT_BOUNCE and final)


def _temporary(p: Parsed) -> bool:
    return p.kind is MessageKind.SOFT_BOUNCE and not p.status.startswith("5") and not p.status.endswith(".4.7")


def _mailbox_full(p: Parsed) -> bool:
    # The recipient's soft bounce: never suppressed, and never a verdict on our mailbox.
    return p.kind is MessageKind.SOFT_BOUNCE and p.failure in {FailureClass.RECIPIENT, FailureClass.TRANSIENT}


def _refused(p: Parsed) -> bool:
    return p.kind is MessageKind.SOFT_BOUNCE and p.failure in {FailureClass.CONTENT, FailureClass.RATE_LIMITED}


def _no_bounce(p: Parsed) -> bool:
    return p.kind not in {MessageKind.HARD_BOUNCE, MessageKind.SOFT_BOUNCE}


# label -> (what a right verdict is, whether it is a hard bounce for the floor)
LABELS: dict[str, tuple[Callable[[Parsed], bool], bool]] = {
    "permanent": (_permanent, True),  # flufl.bounce's and baunsu's: the address failed for good
    "temporary": (_temporary, False),
    "user_unknown": (_hard, True), "user_disabled": (_hard, True), "domain_error": (_hard, True),
    "over_quota": (_mailbox_full, False),
    "spam": (_refused, False),
    "no bounce": (_no_bounce, False),
}


@dataclass(frozen=True)
class Sample:
    name: str
    label: str
    raw: bytes


@dataclass(frozen=True)
class Corpus:
    name: str
    source: str  # package and version, as fetched
    samples: tuple[Sample, ...]


def cache_dir() -> Path:
    return Path(os.environ.get("SENDHOST_BOUNCE_CORPORA") or ROOT / ".sendhost" / "bounce-corpora")


def _run(command: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=FETCH_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CorpusError(f"{command[0]} {command[1]}: {exc}") from exc
    if check and done.returncode != 0:
        raise CorpusError(f"{' '.join(command)} exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return done


def _unpack(archive: Path, into: Path) -> None:
    """Unpacks a tarball's regular files and folders only (no links, nothing outside `into`)."""
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")


def _fetched(name: str, fetch: Callable[[Path], None]) -> Path:
    """`cache/name`, fetched into a scratch folder and moved in whole, so a broken fetch leaves nothing behind. One
    process fetches a corpus at a time (a lock file beside it: pytest-xdist's workers, or two runs, ask at once);
    the others wait for it and read what it fetched."""
    target = cache_dir() / name
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if this process dies
        if target.is_dir():  # fetched while we waited
            return target
        scratch = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
        try:
            fetch(scratch)
            scratch.rename(target)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return target


# -- flufl.bounce (PyPI) ---------------------------------------------------------------------------------------

def pinned_version(package: str) -> str:
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        name, _, version = line.partition("==")
        if re.sub(r"[-_.]+", "-", name.strip().lower()) == package and version:
            return version.strip()
    raise CorpusError(f"constraints.txt pins no {package}: add it (make constraints)")


def flufl() -> Corpus:
    version = pinned_version("flufl-bounce")

    def fetch(scratch: Path) -> None:
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--quiet",
              f"flufl.bounce=={version}", "-d", str(scratch)], scratch)
        for archive in scratch.glob("*.tar.gz"):
            _unpack(archive, scratch)
            archive.unlink()

    root = _fetched(f"flufl.bounce-{version}", fetch)
    tests = next(root.glob("*/tests"), None)
    if tests is None:
        raise CorpusError(f"{root}: the flufl.bounce {version} sdist carries no tests/: remove it and fetch again")
    labels = flufl_labels((tests / "test_detectors.py").read_text())
    return Corpus("flufl.bounce", f"flufl.bounce {version} (PyPI sdist, Apache-2.0)",
                  tuple(Sample(n, label, (tests / "data" / n).read_bytes()) for n, label in sorted(labels.items())))


def flufl_labels(source: str) -> dict[str, str]:
    """{file: permanent|temporary} from DETECTORS, a list of (detector, file, failed addresses, is temporary)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "DETECTORS" for t in node.targets):
            rows = ast.literal_eval(node.value)
            break
    else:
        raise CorpusError("flufl.bounce's tests/test_detectors.py has no DETECTORS list")
    labels: dict[str, str] = {}
    for _detector, name, addresses, temporary in rows:
        if addresses:  # a file a detector must find nothing in says nothing of a failure
            labels.setdefault(name, "temporary" if temporary else "permanent")
    return labels


# -- Mail::DeliveryStatus::BounceParser (Debian source package) ------------------------------------------------

def _apt_sources() -> str:
    """A deb-src line for each Debian archive this machine installs from (its own mirror and suites)."""
    paths = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    found = debian_source_lines([path.read_text() for path in paths if path.is_file()])
    if not found:
        raise CorpusError("no Debian archive in /etc/apt/sources*: this corpus is fetched as a Debian source package")
    return "\n".join(found) + "\n"


def debian_source_lines(sources: list[str]) -> list[str]:
    """The deb-src lines of the Debian archives in apt source files (deb822 stanzas or one-line entries): Debian's
    own archive (its keyring, or a mirror's /debian path), not the security suite nor a vendor's repository."""
    lines = []
    for text in sources:
        for stanza in re.split(r"\n\s*\n", text):
            fields = dict(re.findall(r"^([\w-]+):\s*(.+)$", stanza, re.MULTILINE))
            if "deb" in fields.get("Types", "").split():
                keyring = fields.get("Signed-By", "").strip()
                keys = f"[signed-by={keyring}] " if keyring.startswith("/") else ""
                for uri in fields.get("URIs", "").split():
                    lines.append(f"deb-src {keys}{uri} {fields.get('Suites', '')} {fields.get('Components', 'main')}")
        lines += [f"deb-src {rest}" for rest in re.findall(r"^\s*deb\s+(\S+\s+\S+.*)$", text, re.MULTILINE)]
    return [line for line in lines if "security" not in line and
            ("debian-archive-keyring" in line or re.search(r"\s\S+/debian/?\s", line))]


def bounceparser() -> Corpus:
    def fetch(scratch: Path) -> None:
        apt = scratch / "apt"
        for folder in ("lists/partial", "cache/archives/partial", "parts"):
            (apt / folder).mkdir(parents=True)
        (apt / "sources.list").write_text(_apt_sources())
        options = ["-o", f"Dir::Etc::SourceList={apt / 'sources.list'}", "-o", f"Dir::Etc::SourceParts={apt / 'parts'}",
                   "-o", f"Dir::State::Lists={apt / 'lists'}", "-o", f"Dir::Cache={apt / 'cache'}",
                   "-o", "Debug::NoLocking=1", "-o", "APT::Sandbox::User=root", "-q"]
        _run(["apt-get", *options, "update"], scratch)
        # Only the upstream tarball is needed: apt checks each file against the signed index as it arrives, so
        # a Debian-side file the mirror lacks (a non-zero exit) does not make the tarball less genuine.
        done = _run(["apt-get", *options, "source", "--download-only", DEBIAN_PACKAGE], scratch, check=False)
        tarballs = list(scratch.glob(f"{DEBIAN_PACKAGE}_*.orig.tar.*"))
        if not tarballs:
            raise CorpusError(f"apt-get source {DEBIAN_PACKAGE} brought no upstream tarball: {done.stderr[-400:]}")
        _unpack(tarballs[0], scratch)
        shutil.rmtree(apt)
        for leftover in scratch.glob(f"{DEBIAN_PACKAGE}_*"):
            leftover.unlink()

    root = _fetched("bounceparser", fetch)
    upstream = next(root.glob("Mail-DeliveryStatus-BounceParser-*"), None)
    if upstream is None:
        raise CorpusError(f"{root}: no Mail-DeliveryStatus-BounceParser-* inside: remove it and fetch again")
    corpus = upstream / "t" / "corpus"
    names = sorted(p.name for p in corpus.glob("*.msg"))
    labels: dict[str, str] = {}
    for test in sorted((upstream / "t").glob("*.t")):
        for name, label in bounceparser_labels(test.read_text(), names).items():
            labels.setdefault(name, label)
    version = upstream.name.rpartition("-")[2]
    return Corpus("bounceparser", f"Mail::DeliveryStatus::BounceParser {version} (Debian source, GPL-1+ or Artistic)",
                  tuple(Sample(n, label, (corpus / n).read_bytes()) for n, label in sorted(labels.items())))


_ENTRY = re.compile(r"""["']([\w.-]+\.msg)["']\s*=>\s*\{([^{}]*)\}""")
_STD_REASON = re.compile(
    r"""std_reason\s*=>\s*(?:\(\s*\$\w+->\{std_reason\}\s*\|\|\s*)?["'](\w+)["']|"""
    r"""\bis\(\s*\$std_reason\d*\s*,\s*["'](\w+)["']|(\bis_bounce\s*=>\s*0\b)""")
_REFERENCE = re.compile(r"""(glob\s*\(?\s*)?["'](t/corpus/)?([\w.*-]+\.msg)["']""")


def bounceparser_labels(test: str, corpus: list[str]) -> dict[str, str]:
    """{file: label} from one BounceParser test script. A `"file" => {...}` entry with its own std_reason keeps it;
    an assertion labels the files named since the last one (a literal t/corpus/ path starts a new test, a list, a
    glob or entries add up); one met before any file (a helper's body) labels every file the script leaves
    unlabelled."""
    labels: dict[str, str] = {}
    for name, body in _ENTRY.findall(test):
        own = _STD_REASON.search(body)
        if own and own.group(1):
            labels[name] = own.group(1)
    text = _ENTRY.sub(lambda m: f'"{m.group(1)}"', test)
    pending: list[str] = []
    defaults: list[str] = []
    named: list[str] = []
    events = sorted([(m.start(), "file", m) for m in _REFERENCE.finditer(text)] +
                    [(m.start(), "label", m) for m in _STD_REASON.finditer(text)], key=lambda e: e[0])
    for _, kind, match in events:
        if kind == "file":
            globbed, literal, pattern = match.group(1), match.group(2), match.group(3)
            if globbed or "*" in pattern:
                files = fnmatch.filter(corpus, pattern)
            else:
                files = [pattern] if pattern in corpus else []
                if literal:  # one test's own file: the assertions after it are about it alone
                    pending = []
            pending += files
            named += files
            continue
        label = match.group(1) or match.group(2) or "no bounce"
        if not pending:
            defaults.append(label)
        for name in pending:
            labels.setdefault(name, label)
        pending = []
    for name in named:
        if defaults:
            labels.setdefault(name, defaults[0])
    return labels


# -- baunsu (npm) ----------------------------------------------------------------------------------------------

def baunsu() -> Corpus:
    def fetch(scratch: Path) -> None:
        _run(["npm", "pack", NPM_PACKAGE, "--silent", "--pack-destination", str(scratch)], scratch)
        for archive in scratch.glob("*.tgz"):
            _unpack(archive, scratch)
            archive.unlink()

    root = _fetched(NPM_PACKAGE.replace("@", "-"), fetch)
    tests = root / "package" / "tests"
    emails = sorted(p.name for p in (tests / "emails").glob("*"))
    labels: dict[str, str] = {}
    for script in sorted(tests.glob("*Test.js")):
        labels.update(baunsu_labels(script.read_text(), emails))
    return Corpus("baunsu", f"{NPM_PACKAGE.replace('@', ' ')} (npm, MIT)",
                  tuple(Sample(n, label, (tests / "emails" / n).read_bytes()) for n, label in sorted(labels.items())))


def baunsu_labels(script: str, emails: list[str]) -> dict[str, str]:
    """{file: label} from one test script: the files its `/^prefix/i.test(file)` picks, `permanent` where it asserts
    `isHard()` true (a 5.x.x status), `no bounce` where it asserts `bounced` false."""
    prefix = re.search(r"/\^(\w+)/i\.test\(file\)", script)
    if prefix is None:
        return {}
    if re.search(r"assert\.isTrue\(result\.isHard\(\)\)", script):
        label = "permanent"
    elif re.search(r"assert\.isFalse\(result\.bounced\)", script):
        label = "no bounce"
    else:
        return {}
    return {name: label for name in emails if name.lower().startswith(prefix.group(1).lower())}


CORPORA: dict[str, Callable[[], Corpus]] = {"flufl.bounce": flufl, "bounceparser": bounceparser, "baunsu": baunsu}

