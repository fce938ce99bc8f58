"""One masking for every URL and DSN that may carry a password (sendhost.masking): a table of every spelling, none of
which reaches any output (the errors of `sender status --database-url`, `config show`, log lines)."""

from __future__ import annotations

import io
import json
import logging

import pytest

from sender.errors import SenderConfigError
from sender.ledger.connection import validate_url
from sendhost.masking import mask_text, mask_url, scrub
from tests.conftest import run_cli
from toolkit.logging_setup import configure_logging

# Every password below is made of these two halves, so one search finds a leak of either part: a parser that cut
# the password at an unencoded '@', '/' or '?' quotes the second half back as a host, a port or a parameter.
HALVES = ("Xq7hun", "Zt9ter")

DATABASE_URLS = [
    "postgresql://u:Xq7hunZt9ter@127.0.0.1:1/db",
    "postgres://u:Xq7hun%40Zt9ter@127.0.0.1:1/db",
    "postgresql://u:Xq7hun@Zt9ter@127.0.0.1:1/db",
    "postgresql://u:Xq7hun/Zt9ter@127.0.0.1:1/db",
    "postgresql://u:Xq7hun?Zt9ter@127.0.0.1:1/db",
    "postgresql://u:Xq7hun#Zt9ter@127.0.0.1:1/db",
    "postgresql://:Xq7hunZt9ter@127.0.0.1:1/db",
    "postgresql://Xq7hun@Zt9ter@127.0.0.1:1/db",
    "postgresql://u@127.0.0.1:1/db?password=Xq7hunZt9ter",
    "postgresql://127.0.0.1:1/db?application_name=x&PassWord=Xq7hunZt9ter",
    "postgresql://127.0.0.1:1/db?sslpassword=Xq7hunZt9ter&sslmode=disable",
    "postgresql://127.0.0.1:1/db?password=Xq7hun Zt9ter",
    "postgresql://u:Xq7hunZt9ter@127.0.0.1:1/db#Zt9ter",
    "host=127.0.0.1 port=1 password=Xq7hunZt9ter dbname=x",
    "host=127.0.0.1 port=1 password='Xq7hun Zt9ter' dbname=x",
    "host=127.0.0.1 password=Xq7hun Zt9ter",
    "postgress://u:Xq7hunZt9ter@127.0.0.1:1/db",
    "postgresql:/u:Xq7hunZt9ter@127.0.0.1:1/db",
    "u:Xq7hunZt9ter@127.0.0.1:1/db",
    "postgresql://u:Xq7hunZt9ter@127.0.0.1:1/db\nx",
    "postgresql://u:Xq7hunZt9ter@nonexistent.invalid:1/db",
    "Xq7hunZt9ter",
]
REDIS_URLS = [
    "redis://u:Xq7hunZt9ter@127.0.0.1:1/0",
    "redis://u:Xq7hun@Zt9ter@127.0.0.1:1/0",
    "redis://:Xq7hun#Zt9ter@127.0.0.1:1/0",
    "redis://:Xq7hun/Zt9ter@127.0.0.1:1/0",
    "rediss://u:Xq7hun?Zt9ter@127.0.0.1:1/0",
    "redis://127.0.0.1:1/0?password=Xq7hunZt9ter",
    "unix:///run/redis.sock?password=Xq7hunZt9ter",
    "redis:/u:Xq7hunZt9ter@127.0.0.1:1/0",
    "reddis://u:Xq7hunZt9ter@127.0.0.1:1/0",
    "Xq7hunZt9ter",
]


def _leaks(text: str) -> list[str]:
    return [half for half in HALVES if half in text]


@pytest.mark.parametrize("url", DATABASE_URLS + REDIS_URLS)
def test_mask_url_leaves_no_piece_of_the_password(url: str) -> None:
    assert _leaks(mask_url(url)) == []
    assert mask_url(mask_url(url)) == mask_url(url)  # masking what is masked changes nothing


@pytest.mark.parametrize(("url", "masked"), [
    ("postgresql://u:Xq7hunZt9ter@db.internal:5432/ledger", "postgresql://u:***@db.internal:5432/ledger"),
    ("postgresql://u:Xq7hun@Zt9ter@127.0.0.1/db", "postgresql://u:***@127.0.0.1/db"),
    ("postgresql://Xq7hun@Zt9ter@127.0.0.1/db", "postgresql://***@127.0.0.1/db"),
    ("postgresql://u@h/db?password=Xq7hunZt9ter&sslmode=require", "postgresql://u@h/db?password=***&sslmode=require"),
    ("host=h port=5432 password='Xq7hun Zt9ter' dbname=x", "host=h port=5432 password=*** dbname=x"),
    ("host=h password=Xq7hun Zt9ter", "host=h password=*** ***"),
    ("postgress://u:Xq7hunZt9ter@h/db", "postgress://u:***@h/db"),
    ("postgresql:/u:Xq7hunZt9ter@h/db", "***"),
    ("postgresql://postgres@/postgres?host=/var/lib/x&port=5432",
     "postgresql://postgres@/postgres?host=/var/lib/x&port=5432"),
])
def test_what_stays_readable(url: str, masked: str) -> None:
    assert mask_url(url) == masked


def test_a_library_error_quoting_a_misread_password_is_scrubbed() -> None:
    url = "postgresql://u:Xq7hun@Zt9ter@127.0.0.1/db"
    # What libpq said of this URL: it ends the user part at the first '@'.
    said = "failed to resolve host 'Zt9ter@127.0.0.1': [Errno -2] Name or service not known"
    assert scrub(said, url) == "failed to resolve host '***@127.0.0.1': [Errno -2] Name or service not known"


def test_free_text_is_masked_wherever_a_url_or_a_password_pair_sits() -> None:
    text = ("tried redis://u:Xq7hunZt9ter@h:1/0, then postgresql://h/db?password=Xq7hunZt9ter&sslmode=require "
            "and host=h password='Xq7hun Zt9ter' dbname=x")
    assert mask_text(text) == ("tried redis://u:***@h:1/0, then postgresql://h/db?password=***&sslmode=require "
                               "and host=h password=*** dbname=x")


@pytest.mark.parametrize("url", [url for url in DATABASE_URLS if "@Zt9ter" in url or "/Zt9ter" in url
                                 or "?Zt9ter" in url or "#Zt9ter@" in url])
def test_a_url_libpq_would_misread_is_refused_before_it_reaches_libpq(url: str) -> None:
    with pytest.raises(SenderConfigError, match="percent-encode") as refused:
        validate_url(url)
    assert _leaks(str(refused.value)) == []


@pytest.mark.service
@pytest.mark.parametrize("url", DATABASE_URLS)
def test_sender_status_with_a_database_url_never_prints_its_password(url: str) -> None:
    result = run_cli("sender", "--database-url", url, "status")
    assert result.returncode in (1, 2), result.stdout + result.stderr
    assert _leaks(result.stdout + result.stderr) == []
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr  # one line


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_config_show_never_prints_a_database_password(fmt: str) -> None:
    for url in DATABASE_URLS:
        result = run_cli("config", "show", "--format", fmt, env={"SENDHOST_DATABASE_URL": url})
        assert result.returncode == 0, result.stderr
        assert _leaks(result.stdout + result.stderr) == [], url
        if fmt == "json":
            assert json.loads(result.stdout)["database_url"]["value"] == mask_url(url)


@pytest.mark.parametrize("url", REDIS_URLS)
def test_config_show_never_prints_a_redis_password_even_in_its_error(url: str) -> None:
    result = run_cli("--redis-url", url, "config", "show", "--format", "json")
    assert _leaks(result.stdout + result.stderr) == []
    if result.returncode == 0:
        assert json.loads(result.stdout)["redis_url"]["value"] == mask_url(url)
    else:
        assert result.returncode == 2 and result.stderr.startswith("error: redis_url from flag --redis-url")


# What the log filter can recognise in free text: a URL of any scheme (a mistyped one too) and `password=`-like pairs.
# A bare password, or one cut by an unencoded space, is not recognisable there: the error paths above never print
# those (they show mask_url's form, which hides whatever it cannot read), and nothing of ours logs a raw URL.
IN_TEXT = [url for url in DATABASE_URLS + REDIS_URLS
           if ("://" in url or "password=" in url) and " Zt9ter" not in url]


def test_no_log_line_carries_the_password_of_a_url_or_dsn() -> None:
    stream = io.StringIO()
    try:
        configure_logging(0, stream=stream)
        for url in IN_TEXT:
            logging.getLogger("sender.ledger").warning("connecting to %s", url)
            logging.getLogger("psycopg.pool").warning("error connecting in 'pool-1': to %s failed", url)
        try:
            raise ValueError(f"bad {DATABASE_URLS[0]}")
        except ValueError:
            logging.getLogger("sender.feedback").exception("the ledger failed")
    finally:
        configure_logging(0, stream=io.StringIO())
    logged = stream.getvalue()
    assert logged.count("WARNING") == 2 * len(IN_TEXT) and "Traceback" in logged and "ValueError: bad" in logged
    assert len(IN_TEXT) >= 24
    assert _leaks(logged) == []
