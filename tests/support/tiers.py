"""The test tiers: `unit` is applied here, at collection, to every test that needs no service; and checked as it runs.

A test is `unit` when every fixture it uses — those it names and those they use in turn, autouse ones included —
is in `PURE_FIXTURES` (pytest's own plus a few of ours that only make values or files), and it is marked neither
`slow` nor `service`. So a test that asks for a Redis, PostgreSQL, moto, NSD, SSH host, SMTP or IMAP fixture is
never `unit`, and neither is a test asking for a fixture this list does not know yet.

The check: while a `unit` test and its fixtures are set up and run, starting a process or opening a network or Unix
socket (connect, bind, sendto) fails it, naming what it did. (Teardown is not checked: it is where pytest also ends
the module and session fixtures earlier tests used, servers among them.) A test that starts a server or a program
in its own body, without a fixture, says so with `@pytest.mark.service` (or a module's `pytestmark`). With
SENDHOST_TEST_CLI=process (tests/support/cli.py) every `run_cli` is a process, so nothing is checked.

    make test-unit   pytest -m unit          no services, under a minute
    make test-fast   pytest -m "not slow"    all but the long scenarios
    make test        pytest                  everything (CI)

Each target runs on pytest-xdist workers (Makefile's PYTEST_XDIST; 0 runs serially). The marks that say where a test
runs are applied here (`unit`) and in tests/support/ippool_backends.py (`redis_matrix`: a test of the `backend`
fixture, once on a single Redis and once on a Redis Cluster); a `redis_matrix` test is never `unit`, as `backend`
starts servers.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

# Fixtures that start nothing and connect to nothing. A new one joins this list only if that stays true; anything
# else (a server, a client of one, moto) keeps the tests using it out of the unit tier, which is the safe default.
PURE_FIXTURES = frozenset({
    # pytest's own
    "request", "pytestconfig", "tmp_path", "tmp_path_factory", "tmpdir", "tmpdir_factory", "monkeypatch", "capsys",
    "capsysbinary", "capfd", "capfdbinary", "caplog", "recwarn", "record_property", "record_xml_attribute",
    "record_testsuite_property", "cache", "doctest_namespace", "subtests",
    # tests/conftest.py and tests/support: values, files, fakes
    "clock", "example_inventory", "aws_env", "sleeper", "aws_calls", "stubbed_aws", "cli",
    # a package's conftest or a module's own
    "dkim_keys", "repo_root", "inventory_path", "inventory_with_redis",
})

UNIT_KEY = pytest.StashKey[list[str]]()


def _direct_parameters(item: pytest.Item) -> set[str]:
    """Names `@pytest.mark.parametrize` gives values to directly: arguments, not fixtures."""
    names: set[str] = set()
    for mark in item.iter_markers("parametrize"):
        argnames = mark.args[0] if mark.args else mark.kwargs.get("argnames", ())
        if isinstance(argnames, str):
            argnames = [n.strip() for n in argnames.split(",") if n.strip()]
        indirect = mark.kwargs.get("indirect", False)
        names.update(n for n in argnames
                     if indirect is not True and not (isinstance(indirect, (list, tuple)) and n in indirect))
    return names


def is_unit(item: pytest.Item) -> bool:
    if item.get_closest_marker("slow") or item.get_closest_marker("service"):
        return False
    fixtures = set(getattr(item, "fixturenames", ())) - _direct_parameters(item)
    return fixtures <= PURE_FIXTURES


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if is_unit(item):
            item.add_marker(pytest.mark.unit)
            item.stash[UNIT_KEY] = []


class NotAUnitTest(Exception):
    """A test in the unit tier started a process or opened a socket."""


_NETWORK_FAMILIES = {socket.AF_INET, socket.AF_INET6, socket.AF_UNIX}


@contextlib.contextmanager
def _guarded(violations: list[str], before: set[int]) -> Iterator[None]:
    """Patch the ways out of the process for the duration: a call from the test's thread, or a thread it started,
    is refused and recorded; one from a thread alive before (another test's server, say) passes."""
    def refuse(what: str) -> None:
        if threading.get_ident() in before and threading.current_thread() is not threading.main_thread():
            return
        if sys._getframe(2).f_globals.get("__name__") == "ctypes.util":
            return  # find_library runs ldconfig: a library looked up (ansible does it on import), not a service
        violations.append(what)
        raise NotAUnitTest(f"{what}: a unit test starts no process and opens no socket; give the test the fixture "
                           "of the service it uses, or mark it @pytest.mark.service (tests/support/tiers.py)")

    def socket_method(name: str) -> Callable[..., Any]:
        original = getattr(socket.socket, name)

        def method(self: socket.socket, *args: Any, **kwargs: Any) -> Any:
            if self.family in _NETWORK_FAMILIES:
                refuse(f"socket.{name}({(args[-1] if name == 'sendto' else args[0])!r})")
            return original(self, *args, **kwargs)
        return method

    def process_call(owner: Any, name: str, what: str) -> Callable[..., Any]:
        original = getattr(owner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            command = args[1:2] if owner is subprocess.Popen else args[:1]  # Popen's args[0] is self
            refuse(f"{what}({command[0]!r})" if command else what)
            return original(*args, **kwargs)
        return call

    patches: list[tuple[Any, str, Any]] = [(socket.socket, name, socket_method(name))
                                           for name in ("connect", "connect_ex", "bind", "sendto")]
    patches.append((subprocess.Popen, "__init__", process_call(subprocess.Popen, "__init__", "subprocess.Popen")))
    patches.extend((os, name, process_call(os, name, f"os.{name}"))
                   for name in ("fork", "posix_spawn", "posix_spawnp", "system") if hasattr(os, name))
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    for owner, name, replacement in patches:
        setattr(owner, name, replacement)
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


@contextlib.contextmanager
def _unit_guard(item: pytest.Item) -> Iterator[None]:
    violations = item.stash.get(UNIT_KEY, None)
    if violations is None or os.environ.get("SENDHOST_TEST_CLI") == "process":  # every run_cli a process, then
        yield
        return
    with _guarded(violations, {t.ident for t in threading.enumerate() if t.ident is not None}):
        yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _unit_guard(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _unit_guard(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    """A refusal that the code under test caught and carried on from still fails the test."""
    report: pytest.TestReport = yield
    violations = item.stash.get(UNIT_KEY, None)
    if violations and report.when == "call" and report.passed:
        report.outcome = "failed"
        report.longrepr = ("a unit-tier test reached outside the process: " + "; ".join(violations)
                           + "\ngive the test the fixture of the service it uses, or mark it @pytest.mark.service "
                             "(tests/support/tiers.py)")
    return report
