"""Elastic IP pools: the Redis lease engine, the AWS adapter, rotation, parking and reaping.

Senders use `Pool` and `Lease`:

    from ippool import Pool
    pool = Pool.from_url("redis://localhost:6379/0")
    with pool.lease("sender-1") as lease:
        sock.bind((lease.source_ip, 0))
"""

from ippool.lease import Lease
from ippool.pool import Pool

__all__ = ["Lease", "Pool"]
