"""An agent in a process of its own, sending for a while with its worker threads, then saying what it did.

    python -m tests.sender.oauth_agent_child INVENTORY DATABASE_URL REDIS_URL WORKERS SECONDS

Prints one JSON object: {"kinds": {report kind: count}, "details": [the detail of every report but sent]}.
"""

from __future__ import annotations

import json
import sys
import threading
from collections import Counter

from tests.sender.clocked import HOST
from toolkit.app import App
from toolkit.cli.sender.context import SenderContext
from toolkit.cli.sender.run import build_agent


def main() -> None:
    inventory, database_url, redis_url, workers, seconds = sys.argv[1:]
    context = SenderContext(App(inventory_flag=inventory, redis_url_flag=redis_url, env={}), database_url)
    agent, factory = build_agent(context, HOST, smtp_timeout_s=10.0)
    stop = threading.Event()
    threading.Timer(float(seconds), stop.set).start()
    reports = agent.run(factory, int(workers), stop=stop)
    print(json.dumps({"kinds": Counter(r.kind for r in reports),
                      "details": [r.detail for r in reports if r.kind != "sent"]}))


if __name__ == "__main__":
    main()
