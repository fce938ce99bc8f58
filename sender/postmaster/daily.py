"""The agent's daily Postmaster Tools sync: `sendhost postmaster sync` once a day, beside the sending, never in
its way (any failure is logged and tried again the next day)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime

from sender.ledger.store import Ledger
from sender.postmaster.api import PostmasterApi
from sender.postmaster.credentials import credentials_for
from sender.postmaster.errors import PostmasterRefused
from sender.postmaster.sync import sync
from sendhost.errors import SendhostError
from sendhost.model import PostmasterSettings
from warmup import Guard

log = logging.getLogger("sendhost.sender.postmaster")

EVERY_S = 86400.0


class DailySync:
    """One sync of `domains`, called by the agent's first worker once a day (sender.sending.agent)."""

    def __init__(self, settings: PostmasterSettings, domains: Sequence[str], open_ledger: Callable[[], Ledger],
                 guard: Guard, *, env: Mapping[str, str] | None = None, clock: Callable[[], float] = time.time,
                 api: PostmasterApi | None = None) -> None:
        self._settings = settings
        self._domains = tuple(domains)
        self._open_ledger = open_ledger
        self._guard = guard
        self._env = env
        self._clock = clock
        self._api = api

    def __call__(self) -> None:
        try:
            if self._api is None:
                self._api = PostmasterApi(self._settings.api_url,
                                          credentials_for(self._settings, env=self._env, clock=self._clock))
            today = datetime.fromtimestamp(self._clock(), UTC).date()
            with self._open_ledger() as ledger:
                result = sync(self._api, ledger, self._guard, self._domains, today, self._settings.days)
        except PostmasterRefused as exc:
            log.error("postmaster: %s", exc)
            return
        except SendhostError as exc:
            log.warning("postmaster: the daily sync failed, tried again tomorrow: %s", exc)
            return
        except Exception:
            log.exception("postmaster: the daily sync failed, tried again tomorrow")
            return
        for domain in result.domains:
            if domain.problem:
                log.warning("postmaster: %s: %s", domain.domain, domain.problem)
        log.info("postmaster: synced %d domain(s): %s", len(result.domains),
                 ", ".join(d.domain for d in result.domains) or "none")
