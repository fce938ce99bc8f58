"""An agent in a process of its own that SIGKILLs itself right after one named step of the send path.

    python -m tests.sender.agent_child INVENTORY DATABASE_URL REDIS_URL STEP

STEP is one of sender.sending.agent.CHECKPOINTS; the agent sends at most one row before the step comes.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from toolkit.app import App
from toolkit.cli.sender.context import SenderContext
from toolkit.cli.sender.run import build_agent


def main() -> None:
    inventory, database_url, redis_url, step = sys.argv[1:]

    def checkpoint(name: str) -> None:
        if name == step:
            os.kill(os.getpid(), signal.SIGKILL)

    context = SenderContext(App(inventory_flag=inventory, redis_url_flag=redis_url, env={}), database_url)
    agent, factory = build_agent(context, "sender-1", checkpoint, smtp_timeout_s=5.0)
    agent.run(factory, 1, once=True, stop=threading.Event())
    sys.exit(3)  # the step never came: the test must notice


if __name__ == "__main__":
    main()
