"""Shared kernel of the sendhost toolkit: the error base, the inventory's records (`sendhost.model`), Redis
connections and the line-aware YAML loader.

Every business package (`ippool`, `warmup`, `dns_audit`, `sender`, `provisioning`, `simulation`) imports from here,
never from `toolkit` (the CLI).
"""
