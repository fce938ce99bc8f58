"""Agent processes that SIGKILL themselves at a named step of the send path (sender.sending.agent.CHECKPOINTS), for
the crash tests of sequences (tests/sender/campaigns/test_sequence_crashes.py).

    python -m tests.sender.sequence_agent_child INVENTORY DATABASE_URL REDIS_URL WORKERS

Started once, it imports the sender and then forks the agents of each round, so that a round of four agents costs
four forks, not four interpreters importing everything (seconds each on a busy machine). A round is a line on
stdin, `{"offset_s": OFFSET, "kills": [[STEP, SENDS], ...]}`: one agent process of WORKERS workers per entry, on
the real time moved by OFFSET (tests.support.clock.ShiftedClock), each killing itself at STEP once it has recorded
SENDS sends; the answer is a line on stdout, each process's exit: -9 when it died at its step, 0 when it ran out
of due rows first (a pass of `sender run --once`).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import traceback

from tests.sender.clocked import clocked_agent
from tests.support.clock import ShiftedClock
from toolkit.app import App
from toolkit.cli.sender.context import SenderContext


def agent_process(inventory: str, database_url: str, redis_url: str, workers: int, offset_s: float, step: str,
                  sends: int) -> None:
    """The body of one forked agent process; it never returns."""
    recorded = 0
    lock = threading.Lock()

    def checkpoint(name: str) -> None:
        nonlocal recorded
        with lock:
            if name == step and recorded >= sends:
                os.kill(os.getpid(), signal.SIGKILL)
            if name == "recorded":
                recorded += 1

    code = 0
    try:
        context = SenderContext(App(inventory_flag=inventory, redis_url_flag=redis_url, env={}), database_url)
        agent, factory = clocked_agent(context, ShiftedClock(offset_s), checkpoint, smtp_timeout_s=5.0)
        agent.run(factory, workers, once=True, stop=threading.Event())
    except BaseException:
        traceback.print_exc()  # to the test's stderr, which the test shows when it fails
        code = 1
    sys.stderr.flush()
    os._exit(code)  # never the parent's way out: its stdin, stdout and atexit handlers are the parent's


def main() -> None:
    inventory, database_url, redis_url, workers = sys.argv[1:]
    for line in sys.stdin:
        command = json.loads(line)
        pids = []
        for step, sends in command["kills"]:
            pid = os.fork()
            if pid == 0:
                agent_process(inventory, database_url, redis_url, int(workers), float(command["offset_s"]), step,
                              int(sends))
            pids.append(pid)
        codes = []
        for pid in pids:
            _, status = os.waitpid(pid, 0)
            codes.append(-os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))
        print(json.dumps(codes), flush=True)


if __name__ == "__main__":
    main()
