"""A writer of the ledger in a process of its own, for the counters' test under concurrency: a random mix of
enqueues (several rows per transaction), claims of several rows at once, sends, settles, give-backs, feedback and
sweeps, each committed as the agent commits them.

    python -m tests.sender.counters_child DATABASE_URL SEED OPERATIONS

Exits 0 when every operation answered; a deadlock or any other database error ends it with a traceback.
"""

from __future__ import annotations

import random
import sys
import uuid

from sender import Ledger, Settle
from sender.ledger.events import Event, Feedback

FEEDBACK = (Event.DELIVERED, Event.REPLIED, Event.BOUNCED, Event.COMPLAINED)


def main() -> None:
    url, seed, operations = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    with Ledger.from_url(url) as ledger:
        feedback = Feedback(ledger)
        sent: list[int] = []
        for n in range(operations):
            move = rng.random()
            if move < 0.2:
                ledger.enqueue_many([{"lead": f"p{seed}-{n}-{k}", "step": 1, "address": f"p{seed}-{n}-{k}@rcpt.example",
                                      "group": "sales", "subject": "s", "text": "t", "not_before": None}
                                     for k in range(rng.randint(1, 4))])
                continue
            if move < 0.3 and sent:
                feedback.apply(rng.choice(sent), rng.choice(FEEDBACK), source="inbox", ref=f"r{seed}-{n}")
                continue
            if move < 0.33:
                ledger.sweep(0)
                continue
            for row in ledger.claim(f"w{seed}", rng.randint(1, 4), ["sales"]):
                if rng.random() < 0.15:
                    ledger.unclaim(row.id, 0.0, "no mailbox free")
                    continue
                outcome, _ = ledger.begin_attempt(row.id, uuid.uuid4(), "box@sender.example", None,
                                                  f"<{uuid.uuid4()}@sender.example>", "s")
                if outcome != "ok":
                    continue
                if rng.random() < 0.7:
                    ledger.record_sent(row.id, "250 OK")
                    sent.append(row.id)
                else:
                    ledger.settle(row.id, rng.choice([Settle.RETRY, Settle.FAILED, Settle.UNCONFIRMED]), "test")


if __name__ == "__main__":
    main()
