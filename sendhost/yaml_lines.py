"""YAML loading that remembers where every mapping key and list item stood, for errors that name a line."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from sendhost.errors import ConfigError


class LineDict(dict[str, Any]):
    """A mapping that knows its own line and each key's line (1-based)."""

    def __init__(self, *args: Any, line: int = 0, key_lines: dict[str, int] | None = None) -> None:
        super().__init__(*args)
        self.line = line
        self.key_lines: dict[str, int] = dict(key_lines or {})


class LineList(list[Any]):
    """A list that knows its own line and each item's line (1-based)."""

    def __init__(self, *args: Any, line: int = 0, item_lines: list[int] | None = None) -> None:
        super().__init__(*args)
        self.line = line
        self.item_lines: list[int] = list(item_lines or [])


class Vaulted:
    """A value encrypted with ansible-vault (`!vault |`): Ansible's to decrypt; sendhost never sees the clear text."""

    def __init__(self, line: int) -> None:
        self.line = line

    def __repr__(self) -> str:
        return "<ansible-vault encrypted value>"


# What any file of ours may cost to read, whoever wrote it. The largest real inventory or campaign file is well
# under a megabyte; nesting deeper than a few levels is no format of ours; and anchors with aliases, which Ansible
# inventories use for shared settings, may repeat values but not multiply them ("billion laughs": a 412-byte file
# of nested aliases stands for billions of values, and whatever walks the result pays for each).
MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_NESTING = 64
MAX_ALIASED_VALUES = 100_000


class _BoundedComposer(yaml.SafeLoader):
    """Composes the node graph while counting what the aliases stand for, and refuses a file past the bounds."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._values: dict[yaml.Node, int] = {}  # each node's size with its aliases written out
        self._aliased = 0
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        line = self.peek_event().start_mark.line + 1
        if self.check_event(yaml.AliasEvent):
            node = super().compose_node(parent, index)
            if node is None or node not in self._values:
                raise ConfigError(f"{self.name}:{line}: an alias refers to a value that contains it; write the "
                                  "value out instead")
            self._aliased += self._values[node]
            if self._aliased > MAX_ALIASED_VALUES:
                raise ConfigError(
                    f"{self.name}:{line}: the aliases in this file stand for more than {MAX_ALIASED_VALUES:,} "
                    "values; write the repeated settings out, or alias whole blocks fewer times"
                )
            return node
        self._depth += 1
        if self._depth > MAX_NESTING:
            raise ConfigError(f"{self.name}:{line}: values nested more than {MAX_NESTING} levels deep; no file "
                              "of sendhost's needs that, so flatten it")
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if node is not None:
            self._values[node] = 1 + sum(self._values[child] for child in _children(node))
        return node


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


class _LineLoader(_BoundedComposer):
    # C0 controls, DEL, C1 controls and the Unicode line and paragraph separators. Inventory values are rendered
    # into files on the sender hosts (the agent's env file, systemd units, netplan), where a newline starts a new
    # setting.
    control_re = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
    control_reason = ("inventory values are written into files on the sender hosts, where a newline would start a "
                      "new setting")


class _TextLoader(_LineLoader):
    # A document of prose (a campaign's message bodies): newlines and tabs belong in it; every other control
    # character (a carriage return, NUL, an escape sequence) is refused.
    control_re = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
    control_reason = "text here ends up in messages and on terminals, where it would break a header or the screen"


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> LineDict:
    result = LineDict(line=node.start_mark.line + 1)
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str):
            key = str(key)
        if key in result:
            raise ConfigError(f"{loader.name}:{key_node.start_mark.line + 1}: key {key!r} appears twice; keep one")
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = key_node.start_mark.line + 1
    return result


def _construct_sequence(loader: _LineLoader, node: yaml.SequenceNode) -> LineList:
    return LineList(
        (loader.construct_object(child, deep=True) for child in node.value),
        line=node.start_mark.line + 1,
        item_lines=[child.start_mark.line + 1 for child in node.value],
    )


def _checked_scalar(kind: str, construct: Any) -> Any:
    # YAML reads an unquoted 2026-02-30 as a timestamp (and `!!int x` as a number); PyYAML then raises a bare
    # ValueError with no line. Every other mistake in the file names its line, so these do too.
    def construct_or_name_the_line(loader: _LineLoader, node: yaml.ScalarNode) -> Any:
        try:
            return construct(loader, node)
        except (ValueError, TypeError, OverflowError) as exc:
            raise ConfigError(
                f"{loader.name}:{node.start_mark.line + 1}: {node.value!r} is not a real {kind} ({exc}); "
                f'fix it, or quote it ("{node.value}") if it is meant as text'
            ) from None

    return construct_or_name_the_line


def _construct_text(loader: _LineLoader, node: yaml.ScalarNode) -> str:
    value = yaml.SafeLoader.construct_yaml_str(loader, node)
    if bad := loader.control_re.search(value):
        # The value itself is not quoted: it may be a password.
        raise ConfigError(
            f"{loader.name}:{node.start_mark.line + 1}: a value holds the control character {bad.group()!r} at "
            f"character {bad.start() + 1}; remove it: {loader.control_reason}"
        )
    return value


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_LineLoader.add_constructor("tag:yaml.org,2002:str", _construct_text)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)
_LineLoader.add_constructor("!vault", lambda loader, node: Vaulted(node.start_mark.line + 1))
for _tag, _kind in (("timestamp", "date or time"), ("int", "whole number"), ("float", "number"),
                    ("bool", "true or false"), ("null", "null")):
    _LineLoader.add_constructor(f"tag:yaml.org,2002:{_tag}",
                                _checked_scalar(_kind, yaml.SafeLoader.yaml_constructors[f"tag:yaml.org,2002:{_tag}"]))


def load_yaml_with_lines(path: Path, *, multiline_text: bool = False,
                         missing_hint: str = "pass --inventory PATH or copy inventory.example.yml",
                         text: str | None = None) -> Any:
    """Parse `path` (or `text`, named `path` in messages); a syntax error becomes a ConfigError naming file:line.

    Text values may hold no control character at all, or, with `multiline_text`, newlines and tabs only.
    """
    try:
        if text is None:
            with path.open("rb") as file:  # no more than the bound is read, whatever the file's size
                raw = file.read(MAX_FILE_BYTES + 1)
            if len(raw) <= MAX_FILE_BYTES:
                text = raw.decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file; {missing_hint}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    if text is None or len(text.encode("utf-8")) > MAX_FILE_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_FILE_BYTES:,} bytes, the most sendhost reads of a YAML file; "
                          "split it, or keep bulk data (leads) in a CSV file")
    try:
        # The reader checks the whole text for characters YAML forbids (control characters) as it is built.
        loader = (_TextLoader if multiline_text else _LineLoader)(text)
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise ConfigError(f"{path}:{line}: character {exc.character:#x} is not allowed in YAML; "
                          "remove it (a control character pasted in?)") from None
    loader.name = str(path)
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        problem = exc.problem or exc
        raise ConfigError(f"{path}:{line}: YAML syntax error: {problem}; fix the YAML at that line") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: YAML error: {exc}") from None
    finally:
        loader.dispose()
