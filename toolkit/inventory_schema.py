"""Typed field checks for the inventory; each failure names file:line, the key path and what is expected."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any, NoReturn
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sendhost.errors import ConfigError
from sendhost.model import SECRET_ENV_PATTERN, SECRET_ENV_PREFIX
from sendhost.redis_url import validate_redis_url
from toolkit.yaml_lines import LineDict, LineList, Vaulted

_MISSING: Any = object()
DOMAIN_RE = re.compile(r"(?=.{1,253}$)(?!-)([a-z0-9-]{1,63}(?<!-)\.)+[a-z]{2,63}$")
EMAIL_RE = re.compile(r"[^@\s]+@[^@\s]+$")


def yaml_kind(value: object) -> str:
    """What a YAML value is, in the inventory author's words (not Python's class names)."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, Vaulted):
        return "an ansible-vault value"
    return f"a YAML {type(value).__name__}"


class Checker:
    """Reads fields out of LineDicts, raising ConfigError with `file:line: key: problem` on the first bad one."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.require_refresh_tokens = True  # an oauth2 mailbox's refresh-token file must exist (toolkit.inventory)

    def line_of(self, node: LineDict, key: str) -> int:
        return getattr(node, "key_lines", {}).get(key, getattr(node, "line", 0))

    def fail(self, node: LineDict, key: str, where: str, problem: str) -> NoReturn:
        raise ConfigError(f"{self.path}:{self.line_of(node, key)}: {where}: {problem}")

    def _get(self, node: LineDict, key: str, where: str, default: Any) -> Any:
        if isinstance(node.get(key), Vaulted) and key != "sendhost_redis_url":
            self.fail(node, key, where, "is encrypted with ansible-vault, which sendhost does not decrypt; "
                      "keep it in clear (only sendhost_redis_url may be vaulted)")
        if key in node and node[key] is not None:
            return node[key]
        if default is _MISSING:
            self.fail(node, key, where, "required key is missing")
        return default

    def known_keys(self, node: LineDict, allowed: set[str], where: str) -> None:
        for key in node:
            if key not in allowed:
                self.fail(node, key, f"{where}.{key}", f"unknown key; expected one of {', '.join(sorted(allowed))}")

    def entry(self, node: object, where: str) -> LineDict:
        if not isinstance(node, LineDict):
            raise ConfigError(f"{self.path}: {where}: expected a mapping")
        return node

    def mapping(self, node: LineDict, key: str, where: str, default: Any = _MISSING) -> LineDict:
        value = self._get(node, key, where, default)
        if not isinstance(value, LineDict):
            self.fail(node, key, where, f"expected a mapping, got {yaml_kind(value)}")
        return value

    def items(self, node: LineDict, key: str, where: str) -> Iterator[tuple[int, object]]:
        value = self._get(node, key, where, LineList())
        if not isinstance(value, list):
            self.fail(node, key, where, f"expected a list, got {yaml_kind(value)}")
        yield from enumerate(value)

    def entries(self, node: LineDict, key: str, where: str) -> Iterator[tuple[int, LineDict]]:
        """The items of a list of mappings (domains, mailboxes); an item that is not a mapping fails at its line."""
        items = self._get(node, key, where, LineList())
        for index, item in self.items(node, key, where):
            if not isinstance(item, LineDict):
                lines = getattr(items, "item_lines", [])
                line = lines[index] if index < len(lines) else self.line_of(node, key)
                raise ConfigError(f"{self.path}:{line}: {where}[{index}]: expected a mapping of keys "
                                  f"(like `- name: ...`), got {yaml_kind(item)} {item!r}")
            yield index, item

    def string(self, node: LineDict, key: str, where: str, default: Any = _MISSING, pattern: str | None = None,
               expected: str = "a string") -> str:
        value = self._get(node, key, where, default)
        if not isinstance(value, str):
            self.fail(node, key, where, f"expected {expected}, got {yaml_kind(value)} {value!r}")
        if pattern and not re.fullmatch(pattern, value):
            self.fail(node, key, where, f"{value!r} is not {expected}")
        return value

    def secret_env(self, node: LineDict, key: str, where: str) -> str | None:
        """The name of a secret's environment variable (`password_env`), or None; one of our names only
        (model.SECRET_ENV_PATTERN), never one the agent, Python or the dynamic loader reads."""
        name = self.string(node, key, where, default="") or None
        if name is not None and not re.fullmatch(SECRET_ENV_PATTERN, name):
            username = node.get("username")
            word = re.sub(r"[^A-Z0-9]+", "_", username.upper()).strip("_") if isinstance(username, str) else ""
            self.fail(node, key, where,
                      f"{name!r} is not a secret's variable name: it must match ^{SECRET_ENV_PATTERN}$, which names "
                      "nothing the agent, Python or the dynamic loader reads (SENDHOST_REDIS_URL, LD_PRELOAD, "
                      f"HTTPS_PROXY... would change how the agent runs); rename it, e.g. "
                      f"{SECRET_ENV_PREFIX}{word or 'MAILBOX'}_PASSWORD")
        return name

    def choice(self, node: LineDict, key: str, where: str, choices: tuple[str, ...], default: Any = _MISSING) -> str:
        value = self.string(node, key, where, default)
        if value not in choices:
            self.fail(node, key, where, f"{value!r} is not one of {', '.join(choices)}")
        return value

    def integer(self, node: LineDict, key: str, where: str, default: Any = _MISSING, minimum: int | None = None,
                maximum: int | None = None) -> int:
        value = self._get(node, key, where, default)
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(node, key, where, f"expected a whole number, got {yaml_kind(value)} {value!r}")
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            self.fail(node, key, where, f"{value} is out of range {minimum}..{maximum}")
        return value

    def boolean(self, node: LineDict, key: str, where: str, default: Any = _MISSING) -> bool:
        value = self._get(node, key, where, default)
        if not isinstance(value, bool):
            self.fail(node, key, where, f"expected true or false, got {value!r}")
        return value

    def _list(self, node: LineDict, key: str, where: str, default: Any) -> list[Any]:
        value = self._get(node, key, where, default)
        if not isinstance(value, list):
            self.fail(node, key, where, f"expected a list, got {yaml_kind(value)} {value!r}")
        return value

    def str_list(self, node: LineDict, key: str, where: str, default: Any = _MISSING) -> list[str]:
        value = self._list(node, key, where, default)
        for item in value:
            if not isinstance(item, str) or not item:
                self.fail(node, key, where, f"expected a list of names, found {item!r}")
        return value

    def int_list(self, node: LineDict, key: str, where: str, default: Any = _MISSING) -> list[int]:
        value = self._list(node, key, where, default)
        for item in value:
            if isinstance(item, bool) or not isinstance(item, int):
                self.fail(node, key, where, f"expected whole numbers, found {item!r}")
        return value

    def _ip_text(self, node: LineDict, key: str, where: str, value: object) -> str:
        try:
            return str(ipaddress.IPv4Address(str(value)))
        except ValueError:
            self.fail(node, key, where, f"{value!r} is not an IPv4 address")

    def ip(self, node: LineDict, key: str, where: str, default: Any = _MISSING) -> str:
        return self._ip_text(node, key, where, self._get(node, key, where, default))

    def ip_list(self, node: LineDict, key: str, where: str, default: Any = _MISSING) -> list[str]:
        addresses = [self._ip_text(node, key, where, item) for item in self._list(node, key, where, default)]
        duplicates = {a for a in addresses if addresses.count(a) > 1}
        if duplicates:
            self.fail(node, key, where, f"address {sorted(duplicates)[0]} is listed twice; every slot needs its own")
        return addresses

    def optional_network(self, node: LineDict, key: str, where: str) -> str | None:
        value = self._get(node, key, where, None)
        if value is None:
            return None
        try:
            return str(ipaddress.IPv4Network(str(value), strict=False))
        except ValueError:
            self.fail(node, key, where, f"{value!r} is not a network like 10.0.1.0/24")

    def ips_in_network(self, node: LineDict, key: str, where: str, addresses: tuple[str, ...], network: str) -> None:
        net = ipaddress.IPv4Network(network)
        for address in addresses:
            if ipaddress.IPv4Address(address) not in net:
                self.fail(node, key, where, f"{address} is outside the host's subnet {network}")

    def domain(self, node: LineDict, key: str, where: str, default: Any = _MISSING) -> str:
        value = self.string(node, key, where, default)
        if value == "" and default == "":
            return value
        try:
            ascii_name = value.rstrip(".").encode("idna").decode("ascii").lower()
        except UnicodeError:
            self.fail(node, key, where, f"{value!r} is not a valid domain name")
        if not DOMAIN_RE.match(ascii_name):
            self.fail(node, key, where, f"{value!r} is not a valid domain name like example.com")
        return ascii_name

    def email(self, node: LineDict, key: str, where: str) -> str:
        value = self.string(node, key, where)
        if not EMAIL_RE.match(value):
            self.fail(node, key, where, f"{value!r} is not an email address like alice@example.com")
        return value.lower()

    def iso_date(self, node: LineDict, key: str, where: str) -> date:
        value = self._get(node, key, where, _MISSING)
        if isinstance(value, date) and not isinstance(value, datetime):
            return value
        try:
            return date.fromisoformat(str(value))
        except ValueError:
            self.fail(node, key, where, f"{value!r} is not a date like \"2026-11-30\"")

    def timezone(self, node: LineDict, key: str, where: str, default: Any = _MISSING) -> str:
        value = self.string(node, key, where, default)
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            self.fail(node, key, where, f"{value!r} is not an IANA time zone like Europe/Berlin")
        return value

    def optional_redis_url(self, node: LineDict, key: str) -> str | None:
        value = self._get(node, key, key, None)
        if value in (None, "") or isinstance(value, Vaulted):
            return None  # a vaulted URL is Ansible's; sendhost takes its own from the environment
        if not isinstance(value, str):
            self.fail(node, key, key, f"expected a Redis URL, got {value!r}")
        try:
            return validate_redis_url(value)
        except ValueError as exc:
            self.fail(node, key, key, str(exc))

    # --- the sender agent's fields ------------------------------------------------------------------------------

    def number(self, node: LineDict, key: str, where: str, default: Any = _MISSING,
               minimum: float | None = None) -> float:
        value = self._get(node, key, where, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(node, key, where, f"expected a number of seconds, got {value!r}")
        if minimum is not None and value < minimum:
            self.fail(node, key, where, f"{value} is below {minimum}")
        return float(value)

    def number_pair(self, node: LineDict, key: str, where: str,
                    default: Any = _MISSING) -> tuple[float, float]:
        value = self._get(node, key, where, default)
        pair = list(value) if isinstance(value, list | tuple) else None
        if (pair is None or len(pair) != 2 or any(isinstance(v, bool) or not isinstance(v, int | float) for v in pair)
                or not 0 <= pair[0] <= pair[1]):
            self.fail(node, key, where, f"expected [low, high] seconds with 0 <= low <= high, e.g. [0, 90], "
                      f"got {value!r}")
        return float(pair[0]), float(pair[1])
