"""The sender agent: a PostgreSQL send ledger, and submission through leased source IPs within warm-up caps.

    from sender import Ledger
    Ledger.from_url(url).enqueue(lead="L1", step=1, address="a@b.com", group="sales", subject="Hi", text="...")
"""

from sender.ledger.store import Claimed, Enqueued, Ledger, Settle, Status

__all__ = ["Claimed", "Enqueued", "Ledger", "Settle", "Status"]
