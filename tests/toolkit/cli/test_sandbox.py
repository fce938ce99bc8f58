"""`sendhost sandbox up|status|deliver|down`: a rehearsal world that stays up between commands, and leaves nothing
running after `down` or after Ctrl-C during `up`. Each command runs in a fresh interpreter, as a user's shell would."""

from __future__ import annotations

import email
import imaplib
import json
import os
import re
import shlex
import shutil
import signal
import smtplib
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from rehearsal.dovecot import find_dovecot
from sender.embedded_place import ID_FILE, ROOT_HOME
from tests.support.cli import cli_env, run_cli_process
from tests.support.dovecot import dovecot_or_skip

pytestmark = pytest.mark.slow  # moto's server, initdb and a submission server start: ~10-20 s per world

SLOT_IPS = {"127.0.1.11", "127.0.1.12"}
# The parts `up` starts here, in the order `down` names them: an IMAP server only where dovecot-imapd is installed.
HAS_IMAP = find_dovecot() is not None
PARTS = ["aws", "smtp", *(["imap"] if HAS_IMAP else []), "redis", "postgres"]


def exported(stdout: str) -> dict[str, str]:
    """The variables of `export KEY=VALUE` lines, as a shell's eval would set them."""
    env = {}
    for line in stdout.splitlines():
        words = shlex.split(line)
        assert words[0] == "export", line
        key, _, value = words[1].partition("=")
        env[key] = value
    return env


def processes_working_in(*roots: Path) -> list[str]:
    """Processes whose working directory is under one of `roots` (every part of the sandbox works in its own
    directory: moto and the submission server in the sandbox's, Redis in its --dir, PostgreSQL in its data)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd").removesuffix(" (deleted)")  # its directory removed under it
        except OSError:
            continue
        if any(cwd == str(root) or cwd.startswith(f"{root}/") for root in roots):
            found.append(f"{pid} in {cwd}")
    return found


def postgres_data(sandbox: Path) -> Path:
    """Where the sandbox's PostgreSQL keeps its data: its system user's home as root, else inside the sandbox."""
    if os.geteuid() == 0:
        return ROOT_HOME / (sandbox / "postgres" / ID_FILE).read_text().strip()
    return sandbox / "postgres" / "postgres"


def test_up_runs_the_pool_and_the_sender_against_it_and_down_leaves_nothing(tmp_path: Path) -> None:
    state = {"SENDHOST_STATE_DIR": str(tmp_path / "state")}
    try:
        rehearse_and_stop(tmp_path, state)
    finally:  # a failed assertion must not leave the world running
        run_cli_process("sandbox", "down", env=state, cwd=tmp_path, timeout=60)


def rehearse_and_stop(tmp_path: Path, state: dict[str, str]) -> None:
    sandbox = (tmp_path / "state" / "sandbox").resolve()
    up = run_cli_process("sandbox", "up", env=state, cwd=tmp_path, timeout=120)
    assert up.returncode == 0, up.stderr
    env = {**state, **exported(up.stdout)}
    assert env["AWS_ENDPOINT_URL"].startswith("http://127.0.0.1:")
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "SENDHOST_REDIS_URL", "SENDHOST_DATABASE_URL"} <= set(env)
    assert env["SENDHOST_INVENTORY"] == str(sandbox / "inventory.yml")
    assert (sandbox / "env").read_text() == up.stdout  # `. .sendhost/sandbox/env` sets the same

    again = run_cli_process("sandbox", "up", env=state, cwd=tmp_path, timeout=120)
    assert again.returncode == 0 and "sandbox already up" in again.stderr, again.stderr
    assert exported(again.stdout)["AWS_ENDPOINT_URL"] == env["AWS_ENDPOINT_URL"]

    shown = run_cli_process("sandbox", "status", "--format", "json", env=state, cwd=tmp_path)
    parts = {part["part"]: part for part in json.loads(shown.stdout)}
    assert {name: part["state"] for name, part in parts.items()} == {
        "aws": "up", "smtp": "up", "imap": "up" if HAS_IMAP else "down", "redis": "up", "postgres": "up"}
    assert parts["aws"]["address"] == env["AWS_ENDPOINT_URL"]
    if not HAS_IMAP:  # said, and the rest goes on
        assert "imap: not available (install dovecot-imapd)" in up.stderr.splitlines(), up.stderr
        assert parts["imap"]["address"] == "not available (install dovecot-imapd)"
    data = postgres_data(sandbox)

    def ok(*args: str) -> str:
        ran = run_cli_process(*args, env=env, cwd=tmp_path, timeout=120)
        assert ran.returncode == 0, f"{args}: {ran.stdout[-2000:]}{ran.stderr[-2000:]}"
        return ran.stdout

    assert "2 ok, 0 failed" in ok("pool", "doctor")  # routed to an internet gateway, a public primary address
    assert "sandbox-1: 2 slots, 2 created" in ok("pool", "create", "sandbox-1")
    assert "2 of 2 slots leasable" in ok("pool", "status")
    # The host has ptr: true: each new address got its reverse DNS through the API moto lacks (rehearsal.aws_server)
    import boto3

    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=env["AWS_ENDPOINT_URL"],
                       aws_access_key_id="sandbox", aws_secret_access_key="sandbox")
    slots = [a for a in ec2.describe_addresses()["Addresses"]
             if any(tag["Key"] == "sendhost:slot" for tag in a.get("Tags", []))]
    ptrs = ec2.describe_addresses_attribute(AllocationIds=[a["AllocationId"] for a in slots],
                                            Attribute="domain-name")["Addresses"]
    assert len(slots) == 2 and len(ptrs) == 2
    assert all(p["PtrRecord"].endswith(".sandbox.test.") for p in ptrs), ptrs
    assert "ledger schema at version" in ok("sender", "migrate")
    (tmp_path / "q.csv").write_text("lead,step,address,group,subject,text\nL-1,1,eve@rcpt.example,default,Hi,Hello\n")
    assert "1 queued" in ok("sender", "enqueue", str(tmp_path / "q.csv"))
    assert "1 sent" in ok("sender", "run", "--once", "--host", "sandbox-1")
    [received] = [json.loads(line) for line in (sandbox / "messages.jsonl").read_text().splitlines()]
    # The submission server saw the message come from a leased slot's address, authenticated as the mailbox.
    assert received["peer"] in SLOT_IPS and received["login"] == "alice@sandbox.test"
    assert received["rcpt"] == "eve@rcpt.example"
    assert "│ sent         │ 1    │" in ok("sender", "status")

    down = run_cli_process("sandbox", "down", env=state, cwd=tmp_path, timeout=60)
    assert down.returncode == 0 and down.stdout == \
        f"sandbox down: stopped {', '.join(PARTS)} in {sandbox} (SENDHOST_STATE_DIR)\n", down.stdout
    assert processes_working_in(sandbox, data) == []
    assert not sandbox.exists() and not data.exists()
    shown = run_cli_process("sandbox", "status", "--format", "json", env=state, cwd=tmp_path)
    assert {part["state"] for part in json.loads(shown.stdout)} == {"down"}
    twice = run_cli_process("sandbox", "down", env=state, cwd=tmp_path)
    assert twice.returncode == 0
    assert twice.stdout == f"sandbox down: nothing was running in {sandbox} (SENDHOST_STATE_DIR)\n"


def test_the_sandbox_is_found_by_its_environment_from_any_directory_and_up_warns_of_another(tmp_path: Path) -> None:
    first, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    first.mkdir()
    elsewhere.mkdir()
    sandbox, second = (first / ".sendhost" / "sandbox").resolve(), (elsewhere / ".sendhost" / "sandbox").resolve()
    try:
        up = run_cli_process("sandbox", "up", cwd=first, timeout=120)  # no SENDHOST_STATE_DIR: the directory's
        assert up.returncode == 0, up.stderr
        assert f"sandbox up in {sandbox} (the current directory's .sendhost: no SENDHOST_STATE_DIR);" in up.stderr
        env = exported(up.stdout)
        assert env["SENDHOST_STATE_DIR"] == str(sandbox.parent)  # what finds it from anywhere

        shown = run_cli_process("sandbox", "status", env=env, cwd=elsewhere)
        assert shown.stdout.splitlines()[0] == f"sandbox in {sandbox} (SENDHOST_STATE_DIR)"
        assert "│ aws      │ up    │" in shown.stdout
        again = run_cli_process("sandbox", "up", env=env, cwd=elsewhere, timeout=120)
        assert again.returncode == 0 and f"sandbox already up in {sandbox} (SENDHOST_STATE_DIR);" in again.stderr
        assert "warning" not in again.stderr and not second.exists(), again.stderr  # no second sandbox
        reply = elsewhere / "reply.eml"
        reply.write_text("From: Eve <eve@rcpt.example>\nTo: alice@sandbox.test\nSubject: Re: Hi\n\nNo thanks.\n")
        if HAS_IMAP:
            delivered = run_cli_process("sandbox", "deliver", "reply.eml", env=env, cwd=elsewhere, timeout=60)
            assert delivered.stdout == f"delivered reply.eml to the INBOX of alice@sandbox.test, in {sandbox} " \
                "(SENDHOST_STATE_DIR)\n", delivered.stderr

        # An environment without SENDHOST_STATE_DIR (a shell set up before it was exported) names what it holds.
        older = {key: value for key, value in env.items() if key != "SENDHOST_STATE_DIR"}
        fix = f"this shell's environment is the sandbox in {sandbox} (SENDHOST_INVENTORY); to use that one, " \
              f"`export SENDHOST_STATE_DIR={sandbox.parent}`"
        refused = run_cli_process("sandbox", "deliver", "reply.eml", env=older, cwd=elsewhere, timeout=60)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
        assert refused.stderr.endswith(f"; looked in {second} (the current directory's .sendhost: no "
                                       f"SENDHOST_STATE_DIR); {fix}\n"), refused.stderr
        other = run_cli_process("sandbox", "up", env=older, cwd=elsewhere, timeout=120)
        assert other.returncode == 0, other.stderr
        assert other.stderr.splitlines()[0] == f"warning: starting a second sandbox, in {second} (the current " \
            f"directory's .sendhost: no SENDHOST_STATE_DIR): {fix}"
    finally:
        run_cli_process("sandbox", "down", cwd=elsewhere, timeout=60)
        run_cli_process("sandbox", "down", cwd=first, timeout=60)
    assert not sandbox.exists() and not second.exists()


def folder_messages(imap_settings: dict[str, object], password: str, folder: str) -> list[email.message.Message]:
    """Every message in the sandbox mailbox's `folder`, read over IMAPS the way the inventory says to reach it."""
    context = ssl.create_default_context(cafile=str(imap_settings["ca_file"]))
    with imaplib.IMAP4_SSL(str(imap_settings["host"]), int(str(imap_settings["port"])), ssl_context=context,
                           timeout=10) as imap:
        imap.login("alice@sandbox.test", password)
        status, detail = imap.select(f'"{folder}"', readonly=True)
        assert status == "OK", detail
        if int(detail[0] or 0) == 0:
            return []
        status, fetched = imap.fetch("1:*", "(BODY.PEEK[])")
        assert status == "OK", fetched
        return [email.message_from_bytes(item[1]) for item in fetched if isinstance(item, tuple)]


def test_a_reply_delivered_in_the_sandbox_stops_the_sequence_and_down_leaves_no_dovecot(tmp_path: Path) -> None:
    dovecot_or_skip()
    state = {"SENDHOST_STATE_DIR": str(tmp_path / "state")}
    sandbox = (tmp_path / "state" / "sandbox").resolve()
    try:
        up = run_cli_process("sandbox", "up", env=state, cwd=tmp_path, timeout=120)
        assert up.returncode == 0, up.stderr
        env = {**state, **exported(up.stdout)}
        part = json.loads((sandbox / "parts.json").read_text())["imap"]
        dovecot_pid, shared = part["pid"], Path(part["shared"])
        assert f"imap: {part['address']} (IMAPS; the inventory's mailboxes read their inboxes there)" \
            in up.stderr.splitlines(), up.stderr
        shown = run_cli_process("sandbox", "status", "--format", "json", env=state, cwd=tmp_path)
        [imap_part] = [p for p in json.loads(shown.stdout) if p["part"] == "imap"]
        assert imap_part == {"part": "imap", "state": "up", "pid": dovecot_pid, "address": part["address"]}
        [mailbox] = yaml.safe_load(Path(env["SENDHOST_INVENTORY"]).read_text())["all"]["vars"]["sendhost_mailboxes"]
        assert f"{mailbox['imap']['host']}:{mailbox['imap']['port']}" == part["address"]
        password = (sandbox / "alice.pw").read_text()

        def ran(*args: str) -> subprocess.CompletedProcess[str]:
            return run_cli_process(*args, env=env, cwd=tmp_path, timeout=120)

        def ok(*args: str) -> str:
            done = ran(*args)
            assert done.returncode == 0, f"{args}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
            return done.stdout

        ok("pool", "create", "sandbox-1")
        ok("sender", "migrate")
        (tmp_path / "q.csv").write_text("lead,step,address,group,subject,text\n"
                                        "L-1,1,eve@rcpt.example,default,Hi,Hello\n"
                                        "L-1,2,eve@rcpt.example,default,Again,Hello again\n")
        ok("sender", "enqueue", str(tmp_path / "q.csv"))
        assert "1 sent" in ok("sender", "run", "--once", "--host", "sandbox-1")
        [sent] = [json.loads(line) for line in (sandbox / "messages.jsonl").read_text().splitlines()]
        # The provider's copy of what it accepted, where the sender's Sent-folder look-up searches.
        assert [m["Message-ID"] for m in folder_messages(mailbox["imap"], password, "Sent")] == [sent["message_id"]]

        reply = tmp_path / "reply.eml"
        reply.write_text(f"From: Eve <eve@rcpt.example>\nTo: Alice <alice@sandbox.test>\nSubject: Re: Hi\n"
                         f"Message-ID: <reply-1@rcpt.example>\nIn-Reply-To: {sent['message_id']}\n\nNo thanks.\n")
        assert ok("sandbox", "deliver", str(reply)) == \
            f"delivered {reply} to the INBOX of alice@sandbox.test, in {sandbox} (SENDHOST_STATE_DIR)\n"
        assert ok("sender", "inbox", "--once") == "alice@sandbox.test: 1 applied, 1 replied\n"
        [lead] = json.loads(ok("lead", "show", "L-1", "--format", "json"))["leads"]
        assert lead["ended"] == "replied"
        assert [(s["step"], s["status"]) for s in lead["steps"]] == [(1, "replied"), (2, "cancelled")]

        # Bad input: one line naming it, exit 2, nothing delivered.
        missing = ran("sandbox", "deliver", str(tmp_path / "nope.eml"))
        assert missing.returncode == 2 and missing.stderr == \
            f"error: {tmp_path / 'nope.eml'}: cannot read it (No such file or directory)\n", missing.stderr
        (tmp_path / "stray.eml").write_text("From: x@y.example\nTo: bob@elsewhere.example\n\nhi\n")
        stray = ran("sandbox", "deliver", str(tmp_path / "stray.eml"))
        assert stray.returncode == 2 and stray.stderr.count("\n") == 1, stray.stderr
        assert "no recipient is a sandbox mailbox (alice@sandbox.test)" in stray.stderr
        # Mail submitted to a sandbox mailbox arrives in its INBOX, as a colleague's mail to it would.
        smtp_port = mailbox["smtp"]["port"]
        with smtplib.SMTP("127.0.0.1", smtp_port, timeout=10) as client:
            client.login("alice@sandbox.test", password)
            client.sendmail("alice@sandbox.test", ["alice@sandbox.test"],
                            b"From: alice@sandbox.test\r\nTo: alice@sandbox.test\r\nSubject: note\r\n"
                            b"Message-ID: <note-1@sandbox.test>\r\n\r\nto self\r\n")
        assert [m["Message-ID"] for m in folder_messages(mailbox["imap"], password, "INBOX")] == [
            "<reply-1@rcpt.example>", "<note-1@sandbox.test>"]
    finally:
        down = run_cli_process("sandbox", "down", env=state, cwd=tmp_path, timeout=60)
    assert down.returncode == 0 and "imap" in down.stdout, down.stdout
    assert not Path(f"/proc/{dovecot_pid}").exists()  # dovecot's master, and with it every process it ran:
    assert processes_working_in(shared) == []
    assert not shared.exists() and not sandbox.exists()


# PostgreSQL's first file: as root the id of its data directory (kept by its system user), else that directory.
POSTGRES_BEGINS = f"postgres/{ID_FILE}" if os.geteuid() == 0 else "postgres/postgres"


@pytest.mark.parametrize("after", ["aws.log", "imap.log", POSTGRES_BEGINS],
                         ids=["while-moto-starts", "while-dovecot-starts", "while-postgres-starts"])
def test_ctrl_c_during_up_leaves_nothing_running(tmp_path: Path, after: str) -> None:
    if after == "imap.log":
        dovecot_or_skip()
    sandbox = (tmp_path / "state" / "sandbox").resolve()
    # SIGINT as a terminal's Ctrl-C delivers it (a test runner may have it ignored; the child must not inherit that)
    up = subprocess.Popen([sys.executable, "-m", "toolkit", "sandbox", "up"], cwd=tmp_path, text=True,
                          env=cli_env({"SENDHOST_STATE_DIR": str(tmp_path / "state")}),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    marker = sandbox / after
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert up.poll() is None and time.monotonic() < deadline, "up ended before the part started"
        time.sleep(0.01)
    roots = [sandbox]
    if after == "imap.log":  # its sockets and Maildirs, outside the sandbox directory (recorded before its log)
        roots.append(Path(json.loads((sandbox / "parts.json").read_text())["imap"]["shared"]))
    if after == POSTGRES_BEGINS and os.geteuid() == 0:
        while not marker.read_text().strip():  # written under a lock, then read: wait for the id itself
            time.sleep(0.01)
        roots.append(ROOT_HOME / marker.read_text().strip())
    up.send_signal(signal.SIGINT)
    _out, err = up.communicate(timeout=60)
    assert up.returncode == 130, err
    assert processes_working_in(*roots) == []
    assert not sandbox.exists()
    assert all(not root.exists() for root in roots)


FIRST_HOST = Path(__file__).resolve().parents[3] / "docs" / "first-host.md"
TABLE_CHARS = tuple("┏┃┡│└")
# What differs between runs: where it ran, ports, AWS ids, the PostgreSQL id, the public addresses moto draws,
# the times a lead's steps were due, sent and ended.
VARYING = [(re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:PORT"),
           (re.compile(r"\b(eipalloc|rtb|vpc|igw|eni|subnet|i)-[0-9a-f]{8,}\b"), r"\1-ID"),
           (re.compile(r"\b[0-9a-f]{32}\b"), "ID"),
           (re.compile(r"<[0-9a-f-]{36}@"), "<UUID@"),
           (re.compile(r"\b127\.(?!0\.)\d+\.\d+\.\d+\b"), "PUBLIC-IP"),
           (re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\+00:00"), "TIME")]


def normalised(line: str, where: str) -> str:
    line = line.rstrip().replace(where, "/tmp/rehearsal")
    for pattern, replacement in VARYING:
        line = pattern.sub(replacement, line)
    return line


def rehearsal_steps() -> list[tuple[str, list[str]]]:
    """The commands of first-host.md's rehearsal (step 0), in order, each with the output lines the page shows."""
    section = FIRST_HOST.read_text().split("## 0. Rehearse in the sandbox", 1)[1].split("\n## 1.", 1)[0]
    steps: list[tuple[str, list[str]]] = []
    fence: str | None = None  # the info string of the block we are in (`sh` for what to type, empty for a run)
    for line in section.splitlines():
        if line.startswith("```"):
            fence = line[3:] if fence is None else None
        elif fence == "" and line.startswith("$ "):
            steps.append((line[2:], []))
        elif fence == "" and steps:
            steps[-1][1].append(line)
    return steps


def test_first_host_rehearsal_prints_what_the_page_shows() -> None:
    dovecot_or_skip()  # the page's reply step reads the sandbox's IMAP server
    steps = rehearsal_steps()
    assert [command for command, _ in steps][:2] == ["sendhost sandbox up", ". .sendhost/sandbox/env"]
    # A short directory, not tmp_path: the sandbox's Redis socket goes under it only while the path fits a Unix
    # socket's 108 bytes (else in /tmp/sendhost-…), and pytest-xdist's tmp_path (…/popen-gw3/test_first_host_…) is
    # too long for the page's path to show.
    tmp_path = Path(tempfile.mkdtemp(prefix="rh-")).resolve()
    where = str(tmp_path)
    env = cli_env({"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    try:
        for command, shown in steps:
            if command.startswith(". "):  # a shell's own: the test carries the exported variables itself
                continue
            ran = subprocess.run(["bash", "-c", f"{command} 2>&1"], cwd=tmp_path, env=env, capture_output=True,
                                 text=True, timeout=120, check=False)
            assert ran.returncode == 0, f"{command}: {ran.stdout[-2000:]}"
            if command == "sendhost sandbox up":
                env.update(exported("\n".join(line for line in ran.stdout.splitlines()
                                              if line.startswith("export "))))
            printed = {normalised(line, where) for line in ran.stdout.splitlines()}
            for line in shown:
                if line.strip() and line != "…" and not line.startswith(TABLE_CHARS):
                    assert normalised(line, where) in printed, f"{command}: the page shows {line!r}; it printed:\n" \
                        + ran.stdout
    finally:
        run_cli_process("sandbox", "down", cwd=tmp_path, timeout=60)
    assert [command for command, _ in steps][-2:] == ["sendhost sandbox down", "sendhost sandbox down"]
    assert not (tmp_path / ".sendhost" / "sandbox").exists()
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_up_after_the_aws_stand_in_died_starts_the_whole_world_afresh(tmp_path: Path) -> None:
    state = {"SENDHOST_STATE_DIR": str(tmp_path / "state")}
    first = run_cli_process("sandbox", "up", env=state, cwd=tmp_path, timeout=120)
    assert first.returncode == 0, first.stderr
    env = {**state, **exported(first.stdout)}
    try:
        assert run_cli_process("pool", "create", "sandbox-1", env=env, cwd=tmp_path, timeout=120).returncode == 0
        parts = json.loads((tmp_path / "state" / "sandbox" / "parts.json").read_text())
        os.kill(parts["aws"]["pid"], signal.SIGKILL)  # moto's account was in its memory: it is gone
        while Path(f"/proc/{parts['aws']['pid']}/cwd").exists():  # gone (or a zombie, which has no cwd)
            time.sleep(0.05)
        again = run_cli_process("sandbox", "up", env=state, cwd=tmp_path, timeout=120)
        assert again.returncode == 0 and "sandbox up afresh" in again.stderr, again.stderr
        env = {**state, **exported(again.stdout)}
        # Redis was started afresh too: it names no pool of the vanished account, and a new pool can be made.
        assert "no hosts registered in Redis" in run_cli_process("pool", "status", env=env, cwd=tmp_path).stdout
        made = run_cli_process("pool", "create", "sandbox-1", env=env, cwd=tmp_path, timeout=120)
        assert made.returncode == 0 and "2 created" in made.stdout, made.stdout + made.stderr
    finally:
        run_cli_process("sandbox", "down", env=state, cwd=tmp_path, timeout=60)
