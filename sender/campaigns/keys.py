"""Reading the keys of one mapping in a campaign file; every refusal is `file:line: key: problem`."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any, NoReturn

from sender.errors import SenderConfigError
from sendhost.yaml_lines import LineDict, LineList

REQUIRED: Any = object()


class CampaignError(SenderConfigError):
    """A campaign file that cannot be applied as written. Exit 2."""


def kind(value: object) -> str:
    """What a YAML value is, in the file author's words."""
    for types, word in ((bool, "true/false"), (int | float, "a number"), (str, "text"), (dict, "a mapping"),
                        (list, "a list")):
        if isinstance(value, types):
            return word
    return "null" if value is None else f"a YAML {type(value).__name__}"


class Keys:
    """One mapping of the file, with where it stands (`steps[2]`) for the messages."""

    def __init__(self, path: Path, node: object, where: str, line: int) -> None:
        if not isinstance(node, LineDict):
            raise CampaignError(f"{path}:{line}: {where or 'the file'}: expected a mapping of keys, got {kind(node)}")
        self.path, self.node, self.where = path, node, where

    def line(self, key: str | None = None) -> int:
        return self.node.key_lines.get(key, self.node.line) if key else self.node.line

    def name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def fail(self, key: str | None, problem: str, line: int | None = None) -> NoReturn:
        label = self.name(key) if key else (self.where or "the file")
        raise CampaignError(f"{self.path}:{line or self.line(key)}: {label}: {problem}")

    def only(self, allowed: Collection[str]) -> None:
        for key in self.node:
            if key not in allowed:
                self.fail(key, f"unknown key; the keys here are {', '.join(allowed)}")

    def get(self, key: str, default: Any = REQUIRED) -> Any:
        value = self.node.get(key)
        if value is None:
            if default is REQUIRED:
                self.fail(key, "required key is missing")
            return default
        return value

    def text(self, key: str, default: Any = REQUIRED) -> Any:
        value = self.get(key, default)
        if value is not default and not isinstance(value, str):
            self.fail(key, f"expected text, got {kind(value)} {value!r}")
        return value

    def whole(self, key: str, minimum: int, maximum: int, default: Any = REQUIRED) -> Any:
        value = self.get(key, default)
        if value is default:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, f"expected a whole number, got {kind(value)} {value!r}")
        if not minimum <= value <= maximum:
            self.fail(key, f"{value} is outside {minimum}..{maximum}")
        return value

    def fraction(self, key: str, default: float) -> float:
        value = self.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            self.fail(key, f"expected a share from 0 to 1, like 0.8, got {value!r}")
        return float(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            self.fail(key, f"expected true or false, got {kind(value)} {value!r}")
        return value

    def items(self, key: str, default: Any = REQUIRED) -> list[tuple[int, Any]]:
        """(line, item) for each item of the list under `key`."""
        value = self.get(key, default)
        if value is default:
            return []
        if not isinstance(value, LineList):
            self.fail(key, f"expected a list, got {kind(value)}")
        return list(zip(value.item_lines, value, strict=True))

    def child(self, key: str, node: object, line: int) -> Keys:
        return Keys(self.path, node, self.name(key), line)
