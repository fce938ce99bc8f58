"""Start, describe and stop the sandbox's parts. Everything it makes lives under one directory (the sandbox
directory; as root, the embedded PostgreSQL's data lives in its system user's home and is removed with it; the
IMAP server's sockets and Maildirs live in a directory under /tmp, removed with it: rehearsal.imap_part).

Each detached process is recorded in parts.json the moment it starts (rehearsal.parts), so `down` (or `up`'s own
clean-up after Ctrl-C) stops what was started however far `up` got.
"""

from __future__ import annotations

import enum
import json
import os
import secrets
import shutil
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from rehearsal import imap_part, mailstore
from rehearsal.errors import SandboxConfigError
from rehearsal.parts import (
    PARTS_FILE,
    free_port,
    port_answers,
    read_parts,
    record,
    running_pid,
    spawn,
    stop_process,
    wait_until,
    workdir,
)
from sendhost.private_paths import private_dir, private_file

REGION = "us-east-1"
MAILBOX = "alice@sandbox.test"
DOMAIN = "sandbox.test"
PRIMARY_IP = "127.0.1.10"
SLOT_IPS = ("127.0.1.11", "127.0.1.12")
FAKE_KEYS = {"AWS_ACCESS_KEY_ID": "sandbox", "AWS_SECRET_ACCESS_KEY": "sandbox"}
INSTALL_FIX = "pip install 'sendhost[sandbox]'"


class PartState(enum.Enum):
    UP = "up"
    DOWN = "down"


@dataclass(frozen=True)
class Part:
    name: str
    state: PartState
    pid: int | None
    address: str


class SandboxInterrupted(Exception):
    """`up` was interrupted and cleaned up after itself."""


def sandbox_dir(state_dir: Path) -> Path:
    """Absolute: the parts work in it, so every path handed to them must not depend on the caller's directory."""
    return (state_dir / "sandbox").absolute()


def require_server_extra() -> None:
    """moto's server mode needs flask, which a plain install leaves out."""
    try:
        import flask  # noqa: F401
        import flask_cors  # noqa: F401
    except ImportError:
        raise SandboxConfigError(f"the sandbox's AWS stand-in needs moto's server mode (flask), which a plain install "
                          f"leaves out; run: {INSTALL_FIX}") from None


def _http_answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/moto-api/", timeout=1):
            return True
    except OSError:
        return False


def is_up(state_dir: Path) -> bool:
    return any(part.state is PartState.UP for part in status(state_dir))


def up(state_dir: Path) -> dict[str, str]:
    """Start every part (nothing when all run already); the environment that points the CLI at them."""
    require_server_extra()
    root = sandbox_dir(state_dir)
    private_dir(state_dir, "state directory")
    private_dir(root, "sandbox directory")
    if running_pid(root, "aws") is None and (root / PARTS_FILE).exists():
        # moto keeps its account in memory: once it has stopped, the pools Redis and the ledger remember name
        # addresses that no longer exist anywhere. Start the whole world afresh rather than half of it.
        down(state_dir)
        private_dir(root, "sandbox directory")
    try:
        return _start(root)
    except BaseException:
        down(state_dir)
        raise


def _start(root: Path) -> dict[str, str]:
    if running_pid(root, "aws") is None:
        aws_url = f"http://127.0.0.1:{free_port()}"
        port = aws_url.rsplit(":", 1)[1]
        process = spawn(root, "aws", [sys.executable, "-m", "rehearsal.aws_server", port], aws_url)
        wait_until(lambda: _http_answers(aws_url), "AWS stand-in (moto)", process, root / "aws.log")
        record(root, "aws", instance_id=_build_account(aws_url))
    users = _passwords(root)
    if running_pid(root, "smtp") is None:
        _submission(root)
    if running_pid(root, imap_part.NAME) is None:
        imap_part.start(root, users)
    from sendhost.embedded import ensure_embedded_redis

    redis_url = ensure_embedded_redis(root / "redis")
    from sender.embedded import embedded_url

    database_url = embedded_url(root / "postgres")
    parts = read_parts(root)
    inventory = _write_inventory(root, str(parts["aws"]["instance_id"]), int(str(parts["smtp"]["port"])),
                                 mailstore.read_address(root))
    env = {"AWS_ENDPOINT_URL": str(parts["aws"]["address"]), **FAKE_KEYS, "AWS_DEFAULT_REGION": REGION,
           "SENDHOST_REDIS_URL": redis_url, "SENDHOST_DATABASE_URL": database_url,
           "SENDHOST_INVENTORY": str(inventory),
           # finds the sandbox from any directory: every sandbox command looks under SENDHOST_STATE_DIR when set
           "SENDHOST_STATE_DIR": str(root.parent)}
    with private_file(root / "env") as fd:
        os.ftruncate(fd, 0)
        os.write(fd, "".join(f"export {key}={shell_quote(value)}\n" for key, value in env.items()).encode())
    return env


def shell_quote(value: str) -> str:
    import shlex

    return shlex.quote(value)


def _passwords(root: Path) -> dict[str, str]:
    """The sandbox mailboxes' passwords, made once per world: submission and IMAP both log in with them, and a
    part restarted alone must not change them under the other."""
    users = mailstore.read_users(root)
    if users:
        return users
    users = {MAILBOX: secrets.token_urlsafe(12)}
    with private_file(root / "alice.pw") as fd:
        os.ftruncate(fd, 0)
        os.write(fd, users[MAILBOX].encode())
    with private_file(root / mailstore.USERS_FILE) as fd:
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(users).encode())
    return users


def _submission(root: Path) -> None:
    with private_file(root / "messages.jsonl"):
        pass
    port = free_port()
    process = spawn(root, "smtp", [sys.executable, "-m", "rehearsal.submission", str(port), str(root)],
                    f"127.0.0.1:{port}")
    record(root, "smtp", port=port)
    wait_until(lambda: port_answers(port), "submission server", process, root / "smtp.log")


def _build_account(aws_url: str) -> str:
    """One VPC, subnet and running instance in moto, its primary interface at PRIMARY_IP with the slots' private
    addresses assigned; the instance's id."""
    import boto3

    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=aws_url, aws_access_key_id="sandbox",
                       aws_secret_access_key="sandbox")
    vpc_id = ec2.create_vpc(CidrBlock="127.0.0.0/16")["Vpc"]["VpcId"]
    subnet_id = ec2.create_subnet(VpcId=vpc_id, CidrBlock="127.0.1.0/24")["Subnet"]["SubnetId"]
    instance = ec2.run_instances(
        ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="c5.large", SubnetId=subnet_id,
        PrivateIpAddress=PRIMARY_IP,
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "sendhost:pool", "Value": "sendhost"}]}],
    )["Instances"][0]
    eni_id = instance["NetworkInterfaces"][0]["NetworkInterfaceId"]
    ec2.assign_private_ip_addresses(NetworkInterfaceId=eni_id, PrivateIpAddresses=list(SLOT_IPS))
    # What first-host.md asks of a real account, so `pool doctor` passes: the subnet routed to an internet
    # gateway and a public address on the primary IP (the fallback when no slot can be leased).
    gateway_id = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=gateway_id, VpcId=vpc_id)
    tables = ec2.describe_route_tables(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])["RouteTables"]
    ec2.create_route(RouteTableId=tables[0]["RouteTableId"], DestinationCidrBlock="0.0.0.0/0", GatewayId=gateway_id)
    allocation_id = ec2.allocate_address(Domain="vpc")["AllocationId"]
    ec2.associate_address(AllocationId=allocation_id, NetworkInterfaceId=eni_id, PrivateIpAddress=PRIMARY_IP)
    # The Route 53 zone the pool writes each new address's forward A record into (the host has ptr: true).
    route53 = boto3.client("route53", region_name=REGION, endpoint_url=aws_url, aws_access_key_id="sandbox",
                           aws_secret_access_key="sandbox")
    route53.create_hosted_zone(Name=DOMAIN + ".", CallerReference="sendhost-sandbox")
    return str(instance["InstanceId"])


def _write_inventory(root: Path, instance_id: str, smtp_port: int, imap: mailstore.ImapAddress | None) -> Path:
    # The inbox reader's settings: the sandbox's dovecot, trusted through its own CA; username and password are
    # the smtp ones (the inventory's default). No authserv_id: nothing in the sandbox checks DMARC on arrival.
    imap_line = "" if imap is None else (
        f"        imap: {{host: {imap.host}, port: {imap.port}, security: tls, ca_file: {imap.ca_file},\n"
        f"               sent_folder: {next(iter(imap_part.SENT))}}}\n")
    text = f"""\
# The sandbox's inventory (written by `sendhost sandbox up`; removed by `sendhost sandbox down`).
all:
  vars:
    # Links in the mail only: nothing serves it in the sandbox (`sender web` does, behind TLS, on a real host).
    sendhost_unsubscribe_base_url: https://unsubscribe.{DOMAIN}
    sendhost_domains:
      - name: {DOMAIN}
        dkim_selectors: [s1]
    sendhost_mailboxes:
      - address: {MAILBOX}
        domain: {DOMAIN}
        start: "2026-11-16"
        timezone: UTC
        group: default
        smtp: {{host: 127.0.0.1, port: {smtp_port}, security: none, username: {MAILBOX},
                password_file: {root.resolve() / "alice.pw"}}}
{imap_line}  children:
    senders:
      hosts:
        sandbox-1:
          ansible_host: 127.0.0.1
          sendhost_instance_id: {instance_id}
          sendhost_region: {REGION}
          sendhost_primary_ip: {PRIMARY_IP}
          sendhost_subnet: 127.0.1.0/24
          sendhost_pool:
            slots: {len(SLOT_IPS)}
            budget: [8, 15]
            park_minutes: 15
            ptr: true                          # reverse DNS: rehearsal.aws_server answers moto lacks
            ptr_zone: {DOMAIN}
            private_ips: [{", ".join(SLOT_IPS)}]
"""
    path = root / "inventory.yml"
    with private_file(path) as fd:
        os.ftruncate(fd, 0)
        os.write(fd, text.encode())
    return path


def status(state_dir: Path) -> list[Part]:
    """What runs now; starts nothing."""
    from sender.embedded_status import embedded_postgres_status
    from sendhost.embedded import embedded_status

    root = sandbox_dir(state_dir)
    parts = read_parts(root)
    shown = []
    for name in ("aws", "smtp", imap_part.NAME):
        pid = running_pid(root, name)
        shown.append(Part(name, PartState.DOWN if pid is None else PartState.UP, pid,
                          str(parts.get(name, {}).get("address", "-"))))
    if not imap_part.available():
        shown[-1] = Part(imap_part.NAME, PartState.DOWN, None, imap_part.NOT_AVAILABLE)
    if not root.is_dir():
        return [*shown, Part("redis", PartState.DOWN, None, "-"), Part("postgres", PartState.DOWN, None, "-")]
    redis = embedded_status(root / "redis")
    shown.append(Part("redis", PartState.UP if redis.running else PartState.DOWN, redis.pid,
                      f"unix://{redis.socket}" if redis.running else "-"))
    postgres = embedded_postgres_status(root / "postgres")
    shown.append(Part("postgres", PartState.UP if postgres.running else PartState.DOWN, postgres.pid,
                      postgres.url or "-"))
    return shown


def down(state_dir: Path) -> list[str]:
    """Stop every part and remove the sandbox directory; the names of the parts that were running."""
    from sender.embedded import stop_embedded_postgres
    from sender.embedded_place import discard, locate
    from sendhost.embedded import stop_embedded

    root = sandbox_dir(state_dir)
    if not root.is_dir():
        return []
    stopped = []
    for name, entry in read_parts(root).items():
        pid = entry.get("pid")
        if isinstance(pid, int) and stop_process(pid, workdir(root, entry)):
            stopped.append(name)
    imap_part.remove_shared(root)
    if (root / "redis").is_dir() and stop_embedded(root / "redis") is not None:
        stopped.append("redis")
    if (root / "postgres").is_dir():
        if stop_embedded_postgres(root / "postgres") is not None:
            stopped.append("postgres")
        place = locate(root / "postgres")
        if place is not None:
            discard(place)
    shutil.rmtree(root)
    return stopped



def deliver(state_dir: Path, raw: bytes, source: str) -> list[str]:
    """Put the message `raw` (from `source`, for messages) in the INBOX of each sandbox mailbox it is addressed to,
    as the mailbox's provider would on its arrival; those mailboxes."""
    import email

    root = sandbox_dir(state_dir)
    if running_pid(root, imap_part.NAME) is None:
        why = "is not running; start it with `sendhost sandbox up`" if imap_part.available() \
            else f"is {imap_part.NOT_AVAILABLE}"
        raise SandboxConfigError(f"cannot deliver {source}: the sandbox's IMAP server {why}")
    address = mailstore.read_address(root)
    users = mailstore.read_users(root)
    recipients = mailstore.sandbox_recipients(email.message_from_bytes(raw), users)
    if address is None or not recipients:
        raise SandboxConfigError(f"{source}: no recipient is a sandbox mailbox ({', '.join(sorted(users))}); "
                                 "address it To: one of them")
    for user in recipients:
        mailstore.append(address, users, user, "INBOX", raw)
    return recipients
