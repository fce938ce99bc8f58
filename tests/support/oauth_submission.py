"""A test submission server that takes OAuth bearer tokens: the submission server of tests/support/submission.py
(aiosmtpd, STARTTLS) whose XOAUTH2 and OAUTHBEARER (RFC 7628) ask the test authorization server's introspection
endpoint (RFC 7662) whether a token is live and whose it is, as Dovecot's oauth2 passdb does for Postfix."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from aiosmtpd.smtp import AuthResult, LoginPassword

from tests.support.submission import Recorder, SubmissionServer, submission_server


@dataclass(frozen=True)
class AuthAttempt:
    mechanism: str
    user: str
    token: str
    success: bool


@dataclass
class OAuthRecorder(Recorder):
    introspection_url: str = ""
    attempts: list[AuthAttempt] = field(default_factory=list)
    _attempts_lock: threading.Lock = field(default_factory=threading.Lock)

    async def auth_XOAUTH2(self, server: Any, args: list[str]) -> AuthResult:
        """Google's and Microsoft's mechanism: `user=USER^Aauth=Bearer TOKEN^A^A`; a failure is a 334 with a JSON
        status, answered with an empty line, then 535."""
        fields = self._fields(args)
        user = fields[0].removeprefix("user=") if fields else ""
        return await self._check(server, "XOAUTH2", user, self._bearer(fields[1:]))

    async def auth_OAUTHBEARER(self, server: Any, args: list[str]) -> AuthResult:
        """RFC 7628: `n,a=USER,^Aauth=Bearer TOKEN^A^A`; a failure is a 334 with a JSON status, answered with ^A."""
        fields = self._fields(args)
        header = fields[0].split(",") if fields else []
        user = next((part[2:].replace("=2C", ",").replace("=3D", "=") for part in header if part.startswith("a=")),
                    "")
        return await self._check(server, "OAUTHBEARER", user, self._bearer(fields[1:]))

    @staticmethod
    def _fields(args: list[str]) -> list[str]:
        try:
            return base64.b64decode(args[1], validate=True).decode().split("\x01")
        except (IndexError, ValueError):
            return []

    @staticmethod
    def _bearer(fields: list[str]) -> str:
        return next((f.removeprefix("auth=Bearer ") for f in fields if f.startswith("auth=Bearer ")), "")

    async def _check(self, server: Any, mechanism: str, user: str, token: str) -> AuthResult:
        async with httpx.AsyncClient(timeout=10) as client:
            reply = (await client.post(self.introspection_url, data={"token": token})).json()
        success = bool(reply.get("active")) and reply.get("username") == user
        with self._attempts_lock:
            self.attempts.append(AuthAttempt(mechanism, user, token, success))
        if not success:
            status = json.dumps({"status": "401", "schemes": "bearer", "scope": "smtp"}).encode()
            # The client's answer (XOAUTH2's empty line, OAUTHBEARER's ^A) only asks for the final reply: 535.
            await server.challenge_auth(base64.b64encode(status).decode(), encode_to_b64=False)
            return AuthResult(success=False, handled=False)
        return AuthResult(success=True, handled=False, auth_data=LoginPassword(user.encode(), b""))

    def attempts_snapshot(self) -> list[AuthAttempt]:
        with self._attempts_lock:
            return list(self.attempts)


@contextmanager
def oauth_submission_server(tmp_path: Path, introspection_url: str) -> Iterator[SubmissionServer]:
    recorder = OAuthRecorder({}, introspection_url=introspection_url)
    with submission_server(tmp_path, {}, recorder=recorder) as server:
        yield server
