"""The Gmail Postmaster Tools API v1, over plain HTTPS with its documented JSON: the domains the account sees
(`GET /v1/domains`) and a domain's traffic statistics per day (`GET /v1/domains/{domain}/trafficStats`), page by
page (`pageToken` / `nextPageToken`).

A 429 or a server error is asked again after the wait Google names (Retry-After) or a doubling one, each wait at
most `max_wait_s` and `attempts` asks in all: a longer wait is not slept through, the sync says to run it later. A
401 renews the access token once; a second 401, or a 403, is a refusal only a person can fix (PostmasterRefused,
naming the domain and the fix). A day Google reports no ratio for is `spam_ratio=None`: no data, never 0.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote

import requests

from sender.postmaster.errors import PostmasterRefused, PostmasterUnavailable

log = logging.getLogger("sendhost.sender.postmaster")

REQUEST_TIMEOUT_S = 30.0
ATTEMPTS = 5  # asks of one page, the first included
MAX_WAIT_S = 60.0  # the longest wait between two asks; Google asking for more ends the sync (run it again later)
FIRST_BACKOFF_S = 1.0  # the first wait when Google names none, doubling
REPUTATIONS = ("HIGH", "MEDIUM", "LOW", "BAD")  # REPUTATION_CATEGORY_UNSPECIFIED, or none: not reported
POSTMASTER_UI = "https://postmaster.google.com"


@dataclass(frozen=True)
class DayStats:
    """One day of a domain as Postmaster Tools reports it."""

    day: date
    spam_ratio: float | None  # userReportedSpamRatio, a fraction; None: Google reported no ratio that day
    reputation: str | None  # domainReputation: HIGH | MEDIUM | LOW | BAD; None: none reported


class Credentials:
    """Where the API's access tokens come from (sender.postmaster.credentials)."""

    account: str  # whom Google sees, as messages name it
    fix_refused: str  # what a person does when Google refuses the credentials

    def token(self, refused: str | None = None) -> str:
        """A fresh access token; `refused`: Google refused that one, renew it."""
        raise NotImplementedError


class PostmasterApi:
    """The two list calls the sync needs, against `base_url` (Google's, or a local stand-in in tests)."""

    def __init__(self, base_url: str, credentials: Credentials, *, session: requests.Session | None = None,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.time,
                 attempts: int = ATTEMPTS, max_wait_s: float = MAX_WAIT_S, page_size: int | None = None,
                 timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self._base = base_url.rstrip("/")
        self._credentials = credentials
        self._session = session or requests.Session()
        self._sleep = sleep
        self._clock = clock
        self._attempts = attempts
        self._max_wait_s = max_wait_s
        self._page_size = page_size
        self._timeout_s = timeout_s

    @property
    def account(self) -> str:
        return self._credentials.account

    def domains(self) -> list[str]:
        """The domains the account sees in Postmaster Tools (lower case)."""
        names = []
        for page in self._pages("/v1/domains", {}, "the list of domains", None):
            for entry in _list(page, "domains"):
                name = str(entry.get("name", "")) if isinstance(entry, dict) else ""
                if name.startswith("domains/"):
                    names.append(name.removeprefix("domains/").lower())
        return names

    def traffic_stats(self, domain: str, start: date, end: date) -> list[DayStats]:
        """`domain`'s days from `start` (inclusive) to `end` (exclusive) that Google reports, oldest first; a day
        it reports nothing for is not in the list."""
        params = {"startDate.year": start.year, "startDate.month": start.month, "startDate.day": start.day,
                  "endDate.year": end.year, "endDate.month": end.month, "endDate.day": end.day}
        days: dict[date, DayStats] = {}
        path = f"/v1/domains/{quote(domain, safe='')}/trafficStats"
        for page in self._pages(path, params, f"the traffic statistics of {domain}", domain):
            for entry in _list(page, "trafficStats"):
                stats = _day_stats(entry, domain)
                if stats is not None and start <= stats.day < end:
                    days[stats.day] = stats
        return [days[day] for day in sorted(days)]

    def _pages(self, path: str, params: Mapping[str, Any], what: str, domain: str | None) -> Iterator[dict[str, Any]]:
        page_token: str | None = None
        seen: set[str] = set()
        while True:
            query = dict(params)
            if self._page_size:
                query["pageSize"] = self._page_size
            if page_token:
                query["pageToken"] = page_token
            body = self._get(path, query, what, domain)
            yield body
            next_token = body.get("nextPageToken")
            if not next_token:
                return
            if not isinstance(next_token, str) or next_token in seen:
                raise PostmasterUnavailable(f"Postmaster Tools: reading {what}, the page token {next_token!r} came "
                                            "back a second time; run the sync again later")
            seen.add(next_token)
            page_token = next_token

    def _get(self, path: str, query: Mapping[str, Any], what: str, domain: str | None) -> dict[str, Any]:
        url = self._base + path
        access = self._credentials.token()
        renewed = False
        backoff = FIRST_BACKOFF_S
        attempt = 0
        while True:
            attempt += 1
            try:
                reply = self._session.get(url, params=query, headers={"Authorization": f"Bearer {access}"},
                                          timeout=self._timeout_s)
            except requests.RequestException as exc:
                problem = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                backoff = self._wait_or_fail(attempt, backoff, None, what, f"unreachable ({problem})")
                continue
            status = reply.status_code
            if status == 200:
                return _json_object(reply, what)
            if status == 401 and not renewed:
                access, renewed = self._credentials.token(refused=access), True
                continue
            if status == 401:
                raise PostmasterRefused(f"Postmaster Tools refused the credentials of {self._credentials.account} "
                                        f"reading {what} (401 {_google_error(reply)}); "
                                        f"{self._credentials.fix_refused}")
            if status == 403:
                target = domain or "Postmaster Tools"
                raise PostmasterRefused(f"Postmaster Tools denied {self._credentials.account} access to {target} "
                                        f"(403 {_google_error(reply)}); add {self._credentials.account} as a user of "
                                        f"{target} at {POSTMASTER_UI} and enable the Gmail Postmaster Tools API in "
                                        "its Google Cloud project")
            if status == 404 and domain is not None:
                raise PostmasterRefused(f"Postmaster Tools has no domain {domain} for {self._credentials.account} "
                                        f"(404 {_google_error(reply)}); add and verify {domain} at {POSTMASTER_UI}")
            if status == 429 or status >= 500:
                retry_after = _retry_after(reply, self._clock())
                backoff = self._wait_or_fail(attempt, backoff, retry_after, what,
                                             "rate limited (429)" if status == 429 else f"server error {status}")
                continue
            raise PostmasterUnavailable(f"Postmaster Tools answered {status} reading {what}: {_google_error(reply)}")

    def _wait_or_fail(self, attempt: int, backoff: float, retry_after: float | None, what: str, why: str) -> float:
        """Sleep before the next ask (Google's Retry-After, else `backoff`) and return the next backoff; fail when
        the asks are spent or Google asks for a longer wait than we allow."""
        wait = retry_after if retry_after is not None else backoff
        if wait > self._max_wait_s:
            raise PostmasterUnavailable(f"Postmaster Tools: reading {what}: {why}, and it asks to wait {wait:.0f} s, "
                                        f"more than the {self._max_wait_s:.0f} s a sync waits; run it again later")
        if attempt >= self._attempts:
            raise PostmasterUnavailable(f"Postmaster Tools: reading {what}: {why} after {attempt} tries; run the "
                                        "sync again later")
        log.warning("postmaster: reading %s: %s; asking again in %.1f s", what, why, wait)
        self._sleep(wait)
        return min(backoff * 2, self._max_wait_s)


def _json_object(reply: requests.Response, what: str) -> dict[str, Any]:
    try:
        body = reply.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise PostmasterUnavailable(f"Postmaster Tools: reading {what}, the answer is not a JSON object "
                                    f"({reply.headers.get('Content-Type', 'no content type')})")
    return body


def _list(page: Mapping[str, Any], key: str) -> list[Any]:
    value = page.get(key, [])
    return value if isinstance(value, list) else []


def _day_stats(entry: object, domain: str) -> DayStats | None:
    """A TrafficStats resource (`domains/{domain}/trafficStats/{yyyymmdd}`) as a day; None when it names no day.
    proto3 JSON leaves a zero out as it leaves out a missing value: a day without userReportedSpamRatio is no data
    (the gates do nothing on it either way)."""
    if not isinstance(entry, dict):
        return None
    name = str(entry.get("name", ""))
    try:
        day = datetime.strptime(name.rpartition("/")[2], "%Y%m%d").date()
    except ValueError:
        log.warning("postmaster: %s: a traffic statistics entry without a day in its name (%r) was skipped",
                    domain, name[:80])
        return None
    ratio = entry.get("userReportedSpamRatio")
    spam_ratio = float(ratio) if isinstance(ratio, int | float) and not isinstance(ratio, bool) else None
    if spam_ratio is not None and not 0 <= spam_ratio <= 1:
        log.warning("postmaster: %s on %s: userReportedSpamRatio %r is not a fraction; taken as no data", domain,
                    day, ratio)
        spam_ratio = None
    reputation = entry.get("domainReputation")
    return DayStats(day, spam_ratio, reputation if reputation in REPUTATIONS else None)


def _google_error(reply: requests.Response) -> str:
    """Google's error (`{"error": {"code", "message", "status"}}`) in one line, else the reply's reason."""
    try:
        body = reply.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        text = " ".join(str(error[k]) for k in ("status", "message") if error.get(k))
        if text:
            return " ".join(text.split())[:300]
    return reply.reason or "no reason given"


def _retry_after(reply: requests.Response, now: float) -> float | None:
    """Retry-After in seconds (RFC 9110: delay-seconds or an HTTP-date); None when absent or unreadable."""
    value = reply.headers.get("Retry-After", "").strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        at = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return max(at.timestamp() - now, 0.0)
