"""Mininet's network built with one ``ip -batch`` and ``tc -batch`` per namespace instead of
a shell round trip per command, so a large fabric's bring-up is not thousands of round
trips (root).  While :func:`staged` is active the cable and interface classes record their
commands; :func:`flush` runs them."""
from __future__ import annotations

import os
import shutil
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass, field

_current: "Staging | None" = None

# what Mininet's ethtool -K sets on every TCIntf, and what a new veth already has
VETH_OFFLOADS = {"gro": False, "tx": True, "rx": True}


class BatchError(RuntimeError):
    """A batched command failed: the namespace's name and the tool's first error line."""


@dataclass
class NodeBatch:
    """The commands staged for one namespace: ``ip -batch`` and ``tc -batch`` lines and
    shell lines (run after them, in order)."""
    pid: int | None                  # None: the root namespace
    ip: list[str] = field(default_factory=list)
    tc: list[str] = field(default_factory=list)
    sh: list[str] = field(default_factory=list)

    def script(self) -> str:
        """One ``sh`` script running all of it; it stops at the first failure."""
        return "\n".join(["set -e", batch_script("ip", self.ip), batch_script("tc", self.tc)]
                         + self.sh) + "\n"


def batch_script(tool: str, lines: list[str], force: bool = False) -> str:
    """A shell line feeding ``lines`` to ``tool -batch -`` ("" for none); ``force``: go on
    past a failed line (the exit status still says one failed)."""
    if not lines:
        return ""
    return (f"{tool} {'-force ' if force else ''}-batch - <<'ZCUBE_EOF'\n"
            + "".join(ln if ln.endswith("\n") else ln + "\n" for ln in lines) + "ZCUBE_EOF")


class Staging:
    """What a build has staged: veth pairs to create, then each namespace's commands."""

    def __init__(self):
        self.veths: list[str] = []
        self.nodes: dict[str, NodeBatch] = {}

    def node(self, node) -> NodeBatch:
        """The batch of a Mininet node (switches share the root namespace's)."""
        key = node.name if node.inNamespace else ""
        if key not in self.nodes:
            self.nodes[key] = NodeBatch(node.pid if node.inNamespace else None)
        return self.nodes[key]

    def veth(self, name1, name2, mac1, mac2, node1, node2) -> None:
        """A veth pair, each end created in its node's namespace (Mininet's makeIntfPair)."""
        def end(name, mac, node):
            return f"name {name}" + (f" address {mac}" if mac else "") + \
                (f" netns {node.pid}" if node is not None and node.inNamespace else "")
        self.veths.append(f"link add {end(name1, mac1, node1)} type veth peer "
                          f"{end(name2, mac2, node2)}")


def current() -> Staging | None:
    """The staging in progress (None: run commands as Mininet does)."""
    return _current


@contextmanager
def staged():
    """Stage Mininet's interface commands while the block builds the network."""
    global _current
    _current = Staging()
    try:
        yield _current
    finally:
        _current = None


def stage_intf(intf, mac=None, ip=None, up=True, tc=(), **offloads) -> dict:
    """Stage what Mininet's ``Intf.config`` and ``TCIntf.config`` run for ``intf``: its
    MAC, its address, up, offloads that differ from a veth's defaults, and ``tc``
    (Mininet's ``%s qdisc add dev %s ...`` templates; the root qdisc is replaced, so a
    kernel whose default root qdisc is not noqueue needs no delete first)."""
    batch = _current.node(intf.node)
    if mac:
        intf.mac = mac
        batch.ip.append(f"link set dev {intf.name} address {mac}")
    if ip:
        intf.ip, intf.prefixLen = ip.split("/")
        batch.ip.append(f"addr replace {ip} dev {intf.name}")
    if up:
        batch.ip.append(f"link set dev {intf.name} up")
    want = {**VETH_OFFLOADS, **offloads}
    if want != VETH_OFFLOADS:
        batch.sh.append(f"ethtool -K {intf.name} " + " ".join(
            f"{k} {'on' if v else 'off'}" for k, v in want.items()))
    for cmd in tc:
        line = (cmd % ("", intf.name)).strip()
        if line.startswith("qdisc add ") and " root " in line:
            line = "qdisc replace " + line[len("qdisc add "):]
        batch.tc.append(line)
    return {}


def stage_host(host) -> None:
    """Stage what Mininet's ``Node.config`` runs for a host built from a topology: its
    default interface's MAC and address, and loopback up."""
    batch = _current.node(host)
    batch.ip.append("link set dev lo up")
    intf = host.defaultIntf()
    if intf:
        stage_intf(intf, mac=host.params.get("mac"), ip=host.params.get("ip"), up=False)


def flush(staging: Staging) -> None:
    """Create the staged veth pairs, then run every namespace's batch at once."""
    run_scripts({"root": (None, NodeBatch(None, ip=staging.veths).script())})
    run_scripts({name or "root": (b.pid, b.script()) for name, b in staging.nodes.items()})


def run_scripts(scripts: dict[str, tuple[int | None, str]], realtime: bool = False,
                ignore=()) -> None:
    """Run each ``name: (pid, sh script)`` in the network namespace of ``pid`` (None: the
    root namespace), all at once; ``realtime``: at a real-time priority just above the
    agents' timers, where allowed.  A line of output containing one of ``ignore`` is not an
    error; any other output, or a failed script, raises :class:`BatchError`."""
    prio = ["chrt", "-f", "2"] if realtime and shutil.which("chrt") and os.geteuid() == 0 \
        else []
    procs = {}
    for name, (pid, script) in scripts.items():
        enter = ["nsenter", f"--net=/proc/{pid}/ns/net"] if pid is not None else []
        procs[name] = subprocess.Popen(prio + enter + ["sh", "-s"], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True, errors="replace")
    failed = []
    for name, proc in procs.items():
        out, _ = proc.communicate(scripts[name][1], timeout=60)
        errors = [ln for ln in out.splitlines()
                  if ln.strip() and not any(k in ln for k in ignore)]
        if errors or (proc.returncode and not ignore):
            failed.append(f"{name}: {errors[0] if errors else f'exit {proc.returncode}'}")
    if failed:
        raise BatchError(failed[0] + (f" (and {len(failed) - 1} more)" if len(failed) > 1
                                      else ""))
