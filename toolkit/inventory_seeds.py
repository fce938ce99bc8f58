"""The inventory's placement seeds (`sendhost_seeds`) and placement policy (`sendhost_placement`), parsed like the
mailboxes: each failure names file:line and key; secrets only by a 0600 file, a SENDHOST_SECRET_ variable or the
OAuth grant of `sendhost mailbox authorize`, never in the inventory."""

from __future__ import annotations

from sendhost.model import (
    IMAP_PORT,
    IMAP_SECURITY,
    SEED_PROVIDERS,
    Credential,
    ImapSettings,
    Mailbox,
    PlacementPolicy,
    Seed,
)
from sendhost.providers import PROVIDER_PRESETS
from toolkit.inventory_mailboxes import authserv_id, oauth_settings
from toolkit.inventory_schema import Checker
from toolkit.yaml_lines import LineDict

SEED_KEYS = {"address", "provider", "imap"}
SEED_IMAP_KEYS = {"host", "port", "security", "username", "password_file", "password_env", "ca_file", "folder",
                  "authserv_id", "auth", "oauth"}
PLACEMENT_KEYS = {"rest_below", "pause", "tests"}
# A seed's IMAP server by provider, when its imap settings name none.
SEED_IMAP_HOSTS = {"yahoo": "imap.mail.yahoo.com",
                   **{name: preset.imap_host for name, preset in PROVIDER_PRESETS.items()}}




def seeds(check: Checker, global_vars: LineDict, mailboxes: tuple[Mailbox, ...]) -> tuple[Seed, ...]:
    """`sendhost_seeds`: each one's address, provider and IMAP settings; no seed twice, none a mailbox."""
    found: list[Seed] = []
    mailbox_addresses = {m.address for m in mailboxes}
    for index, entry in check.entries(global_vars, "sendhost_seeds", "sendhost_seeds"):
        seed = _seed(check, index, entry)
        if seed.address in mailbox_addresses:
            check.fail(entry, "address", f"sendhost_seeds[{index}].address", f"{seed.address} is a mailbox in "
                       "sendhost_mailboxes; a seed only receives placement tests, and a mailbox only sends")
        if any(other.address == seed.address for other in found):
            check.fail(entry, "address", f"sendhost_seeds[{index}].address", f"seed {seed.address} is listed "
                       "twice; keep one")
        found.append(seed)
    return tuple(found)


def _seed(check: Checker, index: int, entry: LineDict) -> Seed:
    where = f"sendhost_seeds[{index}]"
    check.known_keys(entry, SEED_KEYS, where)
    address = check.email(entry, "address", f"{where}.address")
    provider = check.choice(entry, "provider", f"{where}.provider", SEED_PROVIDERS)
    node = check.mapping(entry, "imap", f"{where}.imap")
    where = f"{where}.imap"
    if "password" in node:
        check.fail(node, "password", f"{where}.password", "never put a password in the inventory; use "
                   "password_file (a 0600 file) or password_env")
    check.known_keys(node, SEED_IMAP_KEYS, where)
    auth = check.choice(node, "auth", f"{where}.auth", ("password", "oauth2"), default="password")
    password_file = check.string(node, "password_file", f"{where}.password_file", default="") or None
    password_env = check.secret_env(node, "password_env", f"{where}.password_env")
    if auth == "oauth2":
        if password_file is not None or password_env is not None:
            check.fail(node, "auth", f"{where}.auth", "auth: oauth2 takes no password; remove password_file and "
                       "password_env")
        preset = PROVIDER_PRESETS.get(provider)
        credential = Credential(address, "imap", "oauth2", oauth=oauth_settings(check, where, node, address, preset))
    else:
        if "oauth" in node:
            check.fail(node, "oauth", f"{where}.oauth", "an oauth block needs auth: oauth2 beside it")
        if (password_file is None) == (password_env is None):
            check.fail(node, "auth", where, "name exactly one of password_file or password_env")
        credential = Credential(address, "imap", password_file=password_file, password_env=password_env)
    security = check.choice(node, "security", f"{where}.security", IMAP_SECURITY, default="tls")
    host = check.string(node, "host", f"{where}.host", **(
        {"default": SEED_IMAP_HOSTS[provider]} if provider in SEED_IMAP_HOSTS else {}))
    imap = ImapSettings(
        host=host, security=security,
        port=check.integer(node, "port", f"{where}.port", default=IMAP_PORT[security], minimum=1, maximum=65535),
        username=check.string(node, "username", f"{where}.username", default="") or address,
        credential=credential, ca_file=check.string(node, "ca_file", f"{where}.ca_file", default="") or None,
        folder=check.string(node, "folder", f"{where}.folder", default="INBOX"),
        authserv_id=authserv_id(check, node, f"{where}.authserv_id", host))
    return Seed(address=address, provider=provider, imap=imap)


def placement_policy(check: Checker, global_vars: LineDict) -> PlacementPolicy:
    """`sendhost_placement`: the inbox share below which a mailbox is rested, how, and over how many tests."""
    if "sendhost_placement" not in global_vars:
        return PlacementPolicy()
    node = check.mapping(global_vars, "sendhost_placement", "sendhost_placement")
    check.known_keys(node, PLACEMENT_KEYS, "sendhost_placement")
    rest_below = None
    if "rest_below" in node:
        rest_below = check.number(node, "rest_below", "sendhost_placement.rest_below", minimum=0.0)
        if rest_below > 1.0:
            check.fail(node, "rest_below", "sendhost_placement.rest_below",
                       f"{rest_below} is an inbox share above 1; write a fraction like 0.7")
    return PlacementPolicy(
        rest_below=rest_below, pause=check.boolean(node, "pause", "sendhost_placement.pause", default=False),
        tests=check.integer(node, "tests", "sendhost_placement.tests", default=PlacementPolicy.tests, minimum=1,
                            maximum=100))
