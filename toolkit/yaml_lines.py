"""The line-aware YAML loader now lives in `sendhost.yaml_lines` (the sender's campaign files use it too)."""

from sendhost.yaml_lines import LineDict, LineList, Vaulted, load_yaml_with_lines

__all__ = ["LineDict", "LineList", "Vaulted", "load_yaml_with_lines"]
