"""Running `sendhost ARGS` for a test: in this process by default (fast), or in a fresh interpreter (as a user does).

`run_cli_in_process` calls `toolkit.cli:main` — the console script's own function, so every exit code is mapped
exactly as a user sees it — inside Click's `CliRunner` isolation, with stdout and stderr captured apart and the
environment, working directory, logging, warnings filters and signal handlers of this process set for the call
only and restored after it. The result has the shape of `subprocess.run`'s (`returncode`, `stdout`, `stderr`), so a
test reads the same either way.

`run_cli_process` spawns `python -m toolkit`. Use it where the process itself is what is tested: the entry point,
exit statuses, import cost, signals, daemons. `SENDHOST_TEST_CLI=process` sends every `run_cli` there, to check
that the two agree.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import traceback
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

REPO_ROOT = Path(__file__).resolve().parent.parent.parent

# Signals a command (or a library it runs, such as ansible-runner) may take over; restored after each call.
_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2",
                                                    "SIGALRM", "SIGCHLD", "SIGPIPE") if hasattr(signal, name))


def cli_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """The environment of one CLI call: this process's, without sendhost's, AWS's and Redis's own settings (a
    test names the ones it means), this checkout first on the path, then `env`."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("SENDHOST_", "AWS_")) and k != "REDIS_URL"}
    full_env["PYTHONPATH"] = str(REPO_ROOT)
    full_env.update(env or {})
    return full_env


def run_cli_process(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
                    timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run `sendhost ARGS` in a fresh interpreter, as a user would, with this checkout first on the path."""
    return subprocess.run(
        [sys.executable, "-m", "toolkit", *args],
        capture_output=True, text=True, env=cli_env(env), cwd=cwd, timeout=timeout, check=False,
    )


def run_cli_on_terminal(*args: str, columns: int, env: dict[str, str] | None = None, cwd: Path | None = None,
                        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`sendhost ARGS` in a fresh interpreter whose stdout is a terminal (a pty) `columns` wide, as a person at a
    terminal runs it; stdout as shown there, without its styles (colour, bold) and with its line ends as written."""
    import pty
    import time

    primary, secondary = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "toolkit", *args], stdin=subprocess.DEVNULL, stdout=secondary,
                               stderr=subprocess.PIPE, env=cli_env({**(env or {}), "COLUMNS": str(columns)}),
                               cwd=cwd, close_fds=True)
    os.close(secondary)
    deadline = time.monotonic() + timeout
    shown = read_terminal(primary, deadline)
    if time.monotonic() >= deadline:
        process.kill()
        raise subprocess.TimeoutExpired(process.args, timeout)
    stderr = process.stderr.read().decode() if process.stderr else ""
    returncode = process.wait(timeout=30)
    if process.stderr:
        process.stderr.close()
    text = re.sub(r"\x1b\[[0-9;]*m", "", shown.decode()).replace("\r\n", "\n")
    return subprocess.CompletedProcess(process.args, returncode, text, stderr)


def read_terminal(primary: int, deadline: float) -> bytes:
    """What a child wrote to the pty whose primary side is `primary` until it closed the terminal or the monotonic
    `deadline` passed; closes `primary`."""
    import select
    import time

    shown = b""
    try:
        while select.select([primary], [], [], max(0.0, deadline - time.monotonic()))[0]:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(primary)
    return shown


def words_cut(shown: str, whole: str) -> list[str]:
    """The words in the tables of `whole` (a command's output in a pipe, each row on one line) that no line of
    `shown` (the same output on a terminal) holds whole: words a table broke across lines to fit the terminal."""
    lines = shown.splitlines()
    cells = "\n".join(line for line in whole.splitlines() if line.startswith(("│", "┃")))
    words = dict.fromkeys(word for word in re.split(r"[\s│┃]+", cells) if word)
    return [word for word in words if not any(word in line for line in lines)]


def lines_wider_than(shown: str, columns: int) -> list[str]:
    from rich.cells import cell_len

    return [line for line in shown.splitlines() if cell_len(line) > columns]


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`sendhost ARGS` in this process (see the module's docstring); in a fresh one with SENDHOST_TEST_CLI=process."""
    if os.environ.get("SENDHOST_TEST_CLI") == "process":
        return run_cli_process(*args, env=env, cwd=cwd, timeout=timeout)
    return run_cli_in_process(*args, env=env, cwd=cwd, timeout=timeout)


class _Timeout(BaseException):
    """Raised by the alarm in the CLI's own frames; a BaseException so no `except Exception` there swallows it."""


def run_cli_in_process(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
                       timeout: float = 60) -> subprocess.CompletedProcess[str]:
    from click.testing import CliRunner

    from toolkit.cli import main

    argv = [sys.executable, "-m", "toolkit", *args]
    with (_environment(cli_env(env)), _working_directory(cwd), _logging_restored(), _signals_restored(),
          _default_warnings(), CliRunner().isolation() as (out, err, _mixed)):
        try:
            with _alarm(timeout):
                main(list(args))
            returncode = 0
        except SystemExit as exc:
            returncode = _exit_status(exc.code)
        except _Timeout:
            raise subprocess.TimeoutExpired(argv, timeout) from None
        except BaseException:  # what the interpreter does with an exception that escapes main()
            traceback.print_exc()
            returncode = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
    return subprocess.CompletedProcess(argv, returncode, _text(out.getvalue()), _text(err.getvalue()))


def _exit_status(code: Any) -> int:
    """The status the interpreter would exit with for `sys.exit(code)` (a string is printed on stderr, status 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _text(data: bytes) -> str:
    """What `subprocess.run(text=True)` reads from a pipe: decoded, with universal newlines."""
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="strict", newline=None).read()


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _working_directory(cwd: Path | None) -> Iterator[None]:
    saved = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(saved)


@contextlib.contextmanager
def _logging_restored() -> Iterator[None]:
    """`configure_logging` puts a handler on the root logger (writing to the call's stderr) and sets levels; a
    process ends with them, a call must not leave them behind."""
    loggers = [logging.getLogger(), *(lg for lg in logging.Logger.manager.loggerDict.values()
                                      if isinstance(lg, logging.Logger))]
    saved = [(lg, lg.level, list(lg.handlers), lg.propagate, lg.disabled) for lg in loggers]
    known = {id(lg) for lg in loggers}
    disable = logging.root.manager.disable
    try:
        yield
    finally:
        for lg, level, handlers, propagate, disabled in saved:
            lg.setLevel(level)
            lg.handlers[:] = handlers
            lg.propagate, lg.disabled = propagate, disabled
        for made in list(logging.Logger.manager.loggerDict.values()):  # loggers first made by this call
            if isinstance(made, logging.Logger) and id(made) not in known:
                made.handlers[:] = [h for h in made.handlers if not isinstance(h, logging.StreamHandler)]
        logging.disable(disable)


@contextlib.contextmanager
def _signals_restored() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {signum: signal.getsignal(signum) for signum in _SIGNALS}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            if handler is not None:
                signal.signal(signum, handler)


@contextlib.contextmanager
def _default_warnings() -> Iterator[None]:
    """The warnings filters of a fresh interpreter, printing on the call's stderr, as `python -m toolkit` has:
    this suite's `filterwarnings = error` is for the tests' own code, which a warning a user would merely see
    must not turn into an exit status."""
    with warnings.catch_warnings():
        warnings.resetwarnings()
        filters: tuple[tuple[Literal["default", "ignore"], type[Warning], str], ...] = (
            ("default", DeprecationWarning, "__main__"), ("ignore", DeprecationWarning, ""),
            ("ignore", PendingDeprecationWarning, ""), ("ignore", ImportWarning, ""), ("ignore", ResourceWarning, ""))
        for action, category, module in filters:
            warnings.filterwarnings(action, category=category, module=module)

        def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: Any = None, line: str | None = None) -> None:
            sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

        warnings.showwarning = show
        yield


@contextlib.contextmanager
def _alarm(timeout: float) -> Iterator[None]:
    """`subprocess.run(timeout=...)`'s bound on a call in this process: SIGALRM raises in the main thread."""
    if threading.current_thread() is not threading.main_thread() or not timeout:
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise _Timeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
