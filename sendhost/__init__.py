"""Shared kernel of the sendhost toolkit: the error base, Redis connections and the line-aware YAML loader.

The packages `ippool`, `warmup` and `dns_audit` import from here, never from `toolkit` (the CLI).
"""
