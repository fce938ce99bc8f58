"""The agent's send path keeps the shape issue 44 gave it: `Agent.send_one` reads as its steps, and a claimed row goes
back to the queue through one path. (Its behaviour is tested against real services in test_agent.py and beside it;
each step has its unit tests here.)"""

from __future__ import annotations

import ast
from pathlib import Path

import sender.sending
from sender.sending import agent

SENDING = Path(sender.sending.__file__).parent
STEPS = ("self._claims.next", "self._gate.check", "self._reserver.reserve", "self._lease",
         "self._attempts.start", "attempt.submit", "self._settler.settle")


def _function(tree: ast.AST, name: str) -> ast.FunctionDef:
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


def _calls(node: ast.AST) -> list[str]:
    return [ast.unparse(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)]


def test_send_one_is_at_most_40_lines_calling_its_steps_in_order() -> None:
    tree = ast.parse(Path(agent.__file__).read_text(encoding="utf-8"))
    send_one = _function(tree, "send_one")
    assert send_one.end_lineno is not None and send_one.end_lineno - send_one.lineno + 1 <= 40
    called = [c for c in _calls(send_one) if c in STEPS]
    lines = {c: min(n.lineno for n in ast.walk(send_one) if isinstance(n, ast.Call) and ast.unparse(n.func) == c)
             for c in called}
    assert sorted(lines, key=lines.__getitem__) == list(STEPS)


def test_every_give_back_goes_through_one_path_called_from_at_most_three_places() -> None:
    unclaims, give_backs = [], []
    for path in sorted(SENDING.glob("*.py")):
        for call in _calls(ast.parse(path.read_text(encoding="utf-8"))):
            if call.endswith(".unclaim"):
                unclaims.append((path.name, call))
            if call.endswith("._give_back"):
                give_backs.append((path.name, call))
    assert unclaims == [("agent.py", "ledger.unclaim")]
    assert 1 <= len(give_backs) <= 3
