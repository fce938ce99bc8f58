"""Shared kernel of the sendhost toolkit: the error base and Redis connections.

The packages `ippool`, `warmup` and `dns_audit` import from here, never from `toolkit` (the CLI).
"""
