"""With no database configured, the ledger lives in an embedded real PostgreSQL that admits only its owner: no TCP,
a socket in a 0700 directory of the server's account, peer authentication; as root, run by its own system user
without any directory opened to it."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from subprocess import CompletedProcess

import psutil
import psycopg
import pytest

from sender import embedded_place
from sender.embedded import (
    Postmaster,
    embedded_url,
    private_server,
    stop_embedded_postgres,
)
from sender.embedded_place import ROOT_HOME, SERVER_USER, bin_dir, locate
from sender.embedded_status import embedded_postgres_status
from tests.conftest import REPO_ROOT, run_cli

Cli = Callable[..., CompletedProcess[str]]
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="PostgreSQL's account as root, and runuser, need root")


def _discard(state: Path) -> None:
    """Stop the test's server and remove its data, wherever it lives (as root, outside the state directory)."""
    stop_embedded_postgres(state)
    place = locate(state)
    if place is not None and place.run_as is not None:
        shutil.rmtree(place.data_dir, ignore_errors=True)


@pytest.fixture
def state() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="sendhost-embedded-"))  # 0700, and stays so
    try:
        yield base / ".sendhost"
    finally:
        _discard(base / ".sendhost")
        shutil.rmtree(base, ignore_errors=True)


def _modes(path: Path) -> dict[Path, tuple[int, int]]:
    return {directory: (stat.S_IMODE(os.stat(directory).st_mode), os.stat(directory).st_uid)
            for directory in (path, *path.parents)}


def _as_nobody_psql(url: str) -> CompletedProcess[str]:
    return subprocess.run(["runuser", "-u", "nobody", "--", str(bin_dir() / "psql"), url, "-c", "select 1"],
                          capture_output=True, text=True, timeout=30, check=False, cwd="/")


@pytest.mark.service
def test_embedded_postgres_serves_every_process(cli: Cli, tmp_path: Path, state: Path) -> None:
    env = {"SENDHOST_STATE_DIR": str(state)}
    csv = tmp_path / "leads.csv"
    csv.write_text("lead,step,address,group,subject,text\nL1,1,a@example.com,sales,Hi,x\n")
    first = cli("sender", "enqueue", str(csv), cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stderr
    second = cli("sender", "status", "--format", "json", cwd=tmp_path, env=env)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["counts"]["queued"] == 1
    place = locate(state)
    assert place is not None and (place.data_dir / "PG_VERSION").exists()


@as_root
@pytest.mark.service
def test_migrate_as_root_opens_no_directory(tmp_path: Path) -> None:
    parent = Path(tempfile.mkdtemp(prefix="sendhost-closed-"))  # 0700, root's
    work = parent / "campaign"
    work.mkdir(mode=0o700)
    leads = work / "leads.csv"
    leads.write_text("lead,step,address,group,subject,text\n")
    before = _modes(work)
    try:
        result = run_cli("sender", "migrate", cwd=work)
        assert result.returncode == 0, result.stderr
        assert _modes(work) == before  # the parent is still 0700, and nothing above it changed either
        assert stat.S_IMODE(os.stat(work / ".sendhost").st_mode) == 0o700
        assert stat.S_IMODE(os.stat(parent).st_mode) == 0o700
        read = subprocess.run(["runuser", "-u", "nobody", "--", "cat", str(leads)], capture_output=True, text=True,
                              check=False)
        assert read.returncode != 0 and "Permission denied" in read.stderr
        place = locate(work / ".sendhost")
        assert place is not None and place.run_as == SERVER_USER and place.data_dir.parent == ROOT_HOME
        data = os.stat(place.data_dir)
        assert (stat.S_IMODE(data.st_mode), data.st_uid) == (0o700, place.uid)
    finally:
        _discard(work / ".sendhost")
        shutil.rmtree(parent, ignore_errors=True)


@as_root
@pytest.mark.service
def test_another_user_cannot_connect_by_socket_or_tcp(state: Path) -> None:
    url = embedded_url(state)
    place = locate(state)
    assert place is not None
    server = Postmaster.read(place.data_dir)
    assert server is not None and server.socket_dir is not None
    # No TCP: the server holds no internet socket at all, whatever address anyone tries.
    assert server.listens_on == ""
    assert psutil.Process(server.pid).net_connections(kind="inet") == []
    with psycopg.connect(url) as conn:
        assert conn.execute("SHOW listen_addresses").fetchone() == ("",)
    refused = _as_nobody_psql(url)
    assert refused.returncode != 0 and f'socket "{server.socket_dir}' in refused.stderr, refused.stderr
    assert "Permission denied" in refused.stderr
    # With the socket opened to everyone (by this test, as a mistake would), authentication still refuses them.
    sock = server.socket_dir / ".s.PGSQL.5432"
    os.chmod(server.socket_dir, 0o755)
    os.chmod(sock, 0o777)
    try:
        refused = _as_nobody_psql(url)
        assert refused.returncode != 0 and "Peer authentication failed" in refused.stderr, refused.stderr
    finally:
        os.chmod(sock, 0o700)
        os.chmod(server.socket_dir, 0o700)


@pytest.mark.service
def test_a_state_path_too_long_for_a_socket_still_gets_a_private_one(state: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    deep = state.parent / ("d" * 60) / ("e" * 60) / ".sendhost"
    if os.geteuid() == 0:  # root's data lives under ROOT_HOME, short: make that deep too
        home = Path(tempfile.mkdtemp(prefix="sendhost-home-"))
        os.chmod(home, 0o711)  # the test's own directory, passable as /var/lib is
        (home / ("f" * 60)).mkdir(mode=0o711)
        monkeypatch.setattr(embedded_place, "ROOT_HOME", home / ("f" * 60) / ("g" * 30))
    try:
        url = embedded_url(deep)
        place = locate(deep)
        assert place is not None
        server = Postmaster.read(place.data_dir)
        assert server is not None and server.socket_dir is not None
        assert len(str(place.data_dir / ".s.PGSQL.5432")) > 107
        assert server.socket_dir.name.startswith("sendhost-pg-") and len(str(server.socket_dir)) < 60
        assert not str(server.socket_dir).startswith(str(Path(tempfile.gettempdir()) / "python_PostgresServer"))
        info = os.lstat(server.socket_dir)
        assert (stat.S_IMODE(info.st_mode), info.st_uid) == (0o700, place.uid)
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        if os.geteuid() == 0:
            assert "Permission denied" in _as_nobody_psql(url).stderr
        socket_dir = server.socket_dir
        assert stop_embedded_postgres(deep) == server.pid
        assert socket_dir == place.data_dir or not socket_dir.exists()  # the directory it made goes with it
    finally:
        _discard(deep)
        if os.geteuid() == 0:
            shutil.rmtree(home, ignore_errors=True)


@pytest.mark.service
def test_a_server_an_earlier_sendhost_left_open_is_restarted_private(state: Path) -> None:
    embedded_url(state)
    place = locate(state)
    assert place is not None
    stop_embedded_postgres(state)
    # As the wheel left it: trust for every local user, the socket in a directory anyone can enter.
    (place.data_dir / "pg_hba.conf").write_text("local all all trust\n")
    shared = Path(tempfile.mkdtemp(prefix="sendhost-shared-"))
    os.chmod(shared, 0o777)
    user = {} if place.run_as is None else {"user": place.run_as}
    try:
        subprocess.run([str(bin_dir() / "pg_ctl"), "-D", str(place.data_dir), "-w", "-l", str(place.data_dir / "log"),
                        "-o", f"-h '' -k {shared}", "start"], check=True, capture_output=True, cwd="/", timeout=60,
                       **user)  # type: ignore[call-overload]
        shown = embedded_postgres_status(state)
        assert shown.running and not shown.to_json()["private"]
        assert any("socket directory" in why for why in shown.exposures)
        assert any("pg_hba.conf is not sendhost's" in why for why in shown.exposures)
        url = embedded_url(state)
        restarted = Postmaster.read(place.data_dir)
        assert restarted is not None and restarted.pid != shown.pid and restarted.socket_dir == place.data_dir
        assert "trust" not in (place.data_dir / "pg_hba.conf").read_text().split("\n", 3)[-1]
        assert embedded_postgres_status(state).exposures == ()
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


@as_root
@pytest.mark.service
def test_data_an_earlier_root_sendhost_kept_in_the_state_dir_is_moved_out(state: Path) -> None:
    old = state / "postgres"
    state.mkdir(mode=0o700)
    os.chmod(state.parent, 0o755)  # what the wheel did, so that its user could reach the data
    os.chmod(state, 0o755)
    old.mkdir(mode=0o700)
    shutil.chown(old, SERVER_USER, SERVER_USER)
    subprocess.run([str(bin_dir() / "initdb"), "-D", str(old), "-U", "postgres", "--auth=trust"], check=True,
                   capture_output=True, user=SERVER_USER, cwd="/", timeout=120)
    with (old / "postgresql.conf").open("a") as conf:
        conf.write("# the earlier server's own setting\n")
    os.chmod(state.parent, 0o700)
    url = embedded_url(state)
    place = locate(state)
    assert place is not None and not old.exists()
    assert "# the earlier server's own setting" in (place.data_dir / "postgresql.conf").read_text()
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o700
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.service
def test_embedded_status_shows_postgres_beside_redis_and_stop_stops_both(state: Path) -> None:
    env = {"SENDHOST_STATE_DIR": str(state)}
    before = json.loads(run_cli("embedded", "status", "--format", "json", env=env).stdout)
    assert before["running"] is False and before["postgres"]["running"] is False
    assert run_cli("sender", "migrate", env=env).returncode == 0
    assert run_cli("warmup", "status", env=env).returncode == 0  # starts the embedded Redis
    shown = json.loads(run_cli("embedded", "status", "--format", "json", env=env).stdout)
    postgres = shown["postgres"]
    assert shown["running"] is True and postgres["running"] is True and postgres["private"] is True
    assert postgres["version"].startswith("18") and postgres["pid"] > 0
    table = run_cli("embedded", "status", env=env).stdout
    assert "embedded Redis" in table and "embedded PostgreSQL" in table and "no TCP" in table
    stopped = run_cli("embedded", "stop", env=env)
    assert stopped.returncode == 0, stopped.stderr
    assert f"pid {shown['pid']}" in stopped.stdout and f"pid {postgres['pid']}" in stopped.stdout
    assert not psutil.pid_exists(postgres["pid"]) or psutil.Process(postgres["pid"]).status() == "zombie"
    after = json.loads(run_cli("embedded", "status", "--format", "json", env=env).stdout)
    assert after["running"] is False and after["postgres"]["running"] is False
    again = run_cli("embedded", "stop", env=env)
    assert again.returncode == 0 and "no embedded PostgreSQL running" in again.stdout


@pytest.mark.service
def test_a_private_server_leaves_nothing_behind(state: Path) -> None:
    with private_server(state) as url:
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        server_dirs = {Path(part.removeprefix("host=")) for part in url.split("?")[1].split("&")
                       if part.startswith("host=")}
        assert locate(state) is None or not (locate(state).data_dir / "PG_VERSION").exists()  # type: ignore[union-attr]
    assert all(not directory.exists() for directory in server_dirs)


START_ONE = """
import sys
from pathlib import Path
from sender.embedded import embedded_url
print(embedded_url(Path(sys.argv[1])))
"""


@pytest.mark.service
def test_processes_starting_it_at_once_make_one_server(state: Path) -> None:
    env = {"PYTHONPATH": str(REPO_ROOT), "PATH": os.environ.get("PATH", os.defpath)}
    starters = [subprocess.Popen([sys.executable, "-c", START_ONE, str(state)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=env) for _ in range(4)]
    outputs = [starter.communicate(timeout=120) for starter in starters]
    assert all(starter.returncode == 0 for starter in starters), [err for _, err in outputs]
    assert len({out.strip() for out, _ in outputs}) == 1  # one URL: one server
    place = locate(state)
    assert place is not None
    server = Postmaster.read(place.data_dir)
    assert server is not None
    # Every process of a server works in its data directory; the postmaster is the one whose parent is not one.
    of_this_data = {p.pid: p.info["ppid"] for p in psutil.process_iter(["name", "ppid", "cwd"])
                    if p.info["name"] == "postgres" and p.info["cwd"] == str(place.data_dir)}
    assert [pid for pid, parent in of_this_data.items() if parent not in of_this_data] == [server.pid]
