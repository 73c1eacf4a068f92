"""The datapath probe beside a workload: a bridge of the fabric's datapath type that nothing
else uses, two namespaces, and :mod:`traffic.delay_probe` sending across it, to see the
datapath's stalls and the machine's late wake-ups (root)."""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time

import psutil

from testbed.emulation.agents import REPO
from testbed.emulation.machine_state import PREFIX

EVERY_MS = 5.0
BRIDGE = f"{PREFIX}dprobe"
NS_FROM, NS_TO = f"{PREFIX}dprobe-s", f"{PREFIX}dprobe-r"
VETH = {NS_FROM: (f"{PREFIX}dps0", f"{PREFIX}dps1", "10.254.0.1", "02:7a:63:00:00:01"),
        NS_TO: (f"{PREFIX}dpr0", f"{PREFIX}dpr1", "10.254.0.2", "02:7a:63:00:00:02")}


def _ip(*args: str) -> None:
    got = subprocess.run(["ip", *args], capture_output=True, text=True)
    if got.returncode:
        raise RuntimeError(f"datapath probe: ip {' '.join(args)}: {got.stderr.strip()}")


class ProbePath:
    """The probe's bridge, namespaces and veth pairs: :meth:`ensure` builds them if they are
    not built, :meth:`close` removes them.  A session keeps one across its repetitions
    (built and removed around each, they cost a quarter of a second a repetition); idle,
    its two ports are idle."""

    def __init__(self, emu):
        self.emu, self.built = emu, False

    def ensure(self) -> None:
        if not self.built:
            try:
                self._build()
            except Exception:
                self._teardown()
                raise
            self.built = True

    def close(self) -> None:
        if self.built:
            self._teardown()
            self.built = False

    def _build(self) -> None:
        self._teardown()           # left by a run that was killed: ours by name (the prefix)
        rec, ovs = self.emu.record, self.emu.ovs
        rec.add_bridges([BRIDGE])
        rec.add_netns([NS_FROM, NS_TO])
        rec.add_links([v[0] for v in VETH.values()])
        kind = "netdev" if self.emu.datapath == "user" else "system"
        ovs.vsctl("--may-exist", "add-br", BRIDGE, "--", "set", "bridge", BRIDGE,
                  f"datapath_type={kind}", "fail-mode=secure")
        for ns, (outer, inner, ip, mac) in VETH.items():
            _ip("netns", "add", ns)
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner, "netns", ns)
            _ip("-n", ns, "link", "set", inner, "address", mac, "up")
            _ip("-n", ns, "addr", "add", f"{ip}/24", "dev", inner)
            _ip("link", "set", outer, "up")
            ovs.vsctl("add-port", BRIDGE, outer)
        (s0, s1, s_ip, s_mac), (r0, r1, r_ip, r_mac) = VETH[NS_FROM], VETH[NS_TO]
        _ip("-n", NS_FROM, "neigh", "replace", r_ip, "lladdr", r_mac, "dev", s1)
        _ip("-n", NS_TO, "neigh", "replace", s_ip, "lladdr", s_mac, "dev", r1)
        port = {n: ovs.vsctl("get", "Interface", n, "ofport").strip() for n in (s0, r0)}
        ovs.ofctl("add-flow", BRIDGE, f"in_port={port[s0]},actions=output:{port[r0]}")
        ovs.ofctl("add-flow", BRIDGE, f"in_port={port[r0]},actions=output:{port[s0]}")

    def _teardown(self) -> None:
        self.emu.ovs.vsctl("--if-exists", "del-br", BRIDGE, check=False)
        for ns, (outer, *_rest) in VETH.items():
            subprocess.run(["ip", "link", "del", outer], capture_output=True)
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)


class DatapathProbe:
    """``with DatapathProbe(emu) as probe: ...`` then ``probe.records()``: the probe's
    datagrams across a bridge of ``emu``'s datapath while the block ran; on ``path`` (a
    :class:`ProbePath` the caller keeps), or on a path of its own, removed at the end."""

    def __init__(self, emu, every_ms: float = EVERY_MS, path: ProbePath | None = None):
        self.emu, self.every_ms = emu, every_ms
        self.path, self.own = path or ProbePath(emu), path is None
        self.proc = None
        self.share = self.began = None      # the probe's own CPU share of a core, its start
        self.out = tempfile.TemporaryFile(mode="w+")

    def _teardown(self) -> None:
        if self.own:
            self.path.close()

    def __enter__(self):
        try:
            self.path.ensure()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "traffic.delay_probe", NS_FROM, NS_TO, VETH[NS_TO][2],
                 "--every-ms", str(self.every_ms)], stdout=self.out, cwd=REPO)
            self.emu.record.add_pid(self.proc.pid, "datapath probe")
            self.began = time.monotonic()
        except Exception:
            self._teardown()
            raise
        return self

    def __exit__(self, *exc):
        if self.proc:
            try:
                cpu = psutil.Process(self.proc.pid).cpu_times()
                self.share = (cpu.user + cpu.system) / max(time.monotonic() - self.began, 1e-3)
            except psutil.Error:
                pass
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._teardown()
        return False

    def _lines(self, kind: str) -> list[tuple[str, str]]:
        self.out.seek(0)
        return [tuple(line.split()[1:]) for line in self.out if line.startswith(kind + " ")]

    def records(self) -> list[tuple[float, float | None]]:
        """``(sent, received)`` Unix times of every datagram stamped as sent (received
        None: it did not arrive), in the order sent."""
        sent = {int(q): float(at) for q, at in self._lines("t")}
        got = {int(q): float(at) for q, at in self._lines("r")}
        return [(sent[q], got.get(q)) for q in sorted(sent)]

    def wakes(self) -> list[tuple[float, float]]:
        """``(Unix time, ms late)`` of each of the probe's timed wake-ups, in order: how
        late the machine woke a thread of the agents' timer priority."""
        return [(float(at), float(late)) for at, late in self._lines("w")]
