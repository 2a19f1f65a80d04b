"""The run's side of the live CLI: carry out ``starling nodes kill|restart`` requests and
read the journal of ``starling links`` changes into the account.

The file protocol between the two (run record, request and answer files, journal) is
:mod:`starling.orchestrator.execution.live`; this module acts on it through the node supervisor.
"""

from __future__ import annotations

from pathlib import Path

from starling.orchestrator.core.errors import BackendError
from starling.orchestrator.execution import live
from starling.orchestrator.execution.kernel_faults import KernelFaultPlan
from starling.orchestrator.execution.node_actions import RESTART_ERRORS
from starling.orchestrator.execution.supervisor import Supervisor
from starling.orchestrator.results.account import Account

__all__ = ["Journal", "serve_requests"]


def serve_requests(supervisor: Supervisor, kernel: KernelFaultPlan | None = None) -> bool:
    """Carry out kill/restart, node kernel-fault and ``links --kernel`` requests from the
    live CLI; True if any process changed."""
    changed = False
    for answer_path, body in live.take_requests(Path(supervisor.record.out_dir)):
        node, action = body.get("node"), body.get("action")
        who = body.get("who", "someone")
        if action == "refused":
            _answer(answer_path, {"ok": False, "error": body.get("error", "refused")})
            continue
        if node not in supervisor.clients:
            live.answer(answer_path, {"ok": False, "error": f"node {node!r} is not in this run"})
            continue
        if action == "kill":
            if supervisor.backend.alive(node) is False:
                live.answer(answer_path, {"ok": False, "error": f"node {node} is not running"})
                continue
            try:
                supervisor.kill(node, f"on request by {who}")
            except BackendError as exc:
                live.answer(answer_path, {"ok": False, "error": str(exc)})
                continue
            address = supervisor.backend.addresses().get(node, "")
            live.answer(answer_path, {"ok": True, "address": address})
            changed = True
        elif action == "restart":
            supervisor.plan.drop_restart(node)  # a manual restart replaces a scheduled one
            try:
                address = supervisor.restart(node, f"on request by {who}")
            except RESTART_ERRORS as exc:
                live.answer(answer_path, {"ok": False, "error": str(exc)})
            else:
                live.answer(answer_path, {"ok": True, "address": address})
            changed = True
        elif action in KERNEL_ACTIONS:
            changed = _kernel_request(supervisor, answer_path, node, action, who) or changed
        elif action == KERNEL_LINK:
            _kernel_link_request(supervisor, kernel, answer_path, body, who)
        else:
            live.answer(answer_path, {"ok": False, "error": f"unknown action {action!r}"})
    return changed


def _answer(path, body: dict) -> None:
    """An answer the run may be unable to write (the requests folder is not its own): the
    asker then times out with its own line; the run goes on."""
    try:
        live.answer(path, body)
    except OSError:
        pass


KERNEL_ACTIONS = ("pause", "unpause", "disconnect", "reconnect")
"""Live node faults in the kernel: methods of a backend whose capabilities say
``kernel_faults`` (docker)."""


def _kernel_request(supervisor: Supervisor, answer_path, node: str, action: str, who: str) -> bool:
    """``starling nodes pause|unpause|disconnect|reconnect ID``, on the node's container."""
    backend = supervisor.backend
    if not backend.capabilities.kernel_faults:
        error = f"the {backend.kind} backend cannot {action} a node (docker can)"
        live.answer(answer_path, {"ok": False, "error": error})
        return False
    round_now = supervisor.rounds().get(node)
    try:
        getattr(backend, action)(node)
    except Exception as exc:  # noqa: BLE001 - the engine's refusal goes back to the CLI
        live.answer(answer_path, {"ok": False, "error": f"node {node}: {exc}".splitlines()[0]})
        return False
    supervisor.account.kernel(
        {"kind": action, "node": node, "peer": None, "live": True, "who": who, "round": round_now},
        f"node {node} {action} (live, by {who}) at round {round_now}",
    )
    if action in ("unpause", "reconnect"):
        supervisor.poll([node], pull=False)
    live.answer(answer_path, {"ok": True, "address": supervisor.backend.addresses().get(node)})
    return True


KERNEL_LINK = "kernel-link"
"""``starling links cut|set|restore A B --kernel``: a packet filter in A's namespace."""


def _kernel_link_request(
    supervisor: Supervisor, kernel: KernelFaultPlan | None, answer_path, body: dict, who: str
) -> None:
    sender, receiver, kind = str(body.get("node")), str(body.get("peer")), body.get("kind")
    amount = body.get("amount")
    if receiver not in supervisor.clients or receiver == sender:
        live.answer(answer_path, {"ok": False, "error": f"no receiving node {receiver!r}"})
        return
    if kind not in ("cut", "loss", "delay", "reset", "restore"):
        live.answer(answer_path, {"ok": False, "error": f"unknown kernel link fault {kind!r}"})
        return
    if kernel is None:
        error = f"the {supervisor.backend.kind} backend cannot fault a link in the kernel"
        live.answer(answer_path, {"ok": False, "error": error})
        return
    try:
        kernel.live_link(
            supervisor,
            sender,
            receiver,
            kind,
            None if amount is None else float(amount),
            who,
            float(body.get("jitter") or 0.0),
        )
    except BackendError as exc:
        live.answer(answer_path, {"ok": False, "error": str(exc).splitlines()[0]})
        return
    live.answer(answer_path, {"ok": True, "round": supervisor.rounds().get(sender)})


class Journal:
    """Reads the live link changes appended to the run's journal since the last read."""

    def __init__(self, out_dir: str, account: Account):
        self.out_dir = out_dir
        self.account = account
        self.offset = 0

    def read(self) -> None:
        events, self.offset = live.read_events(self.out_dir, self.offset)
        for event in events:
            if event.get("kind") == "link":
                self.account.live_link(event)
