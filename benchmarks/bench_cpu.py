"""Where the CPU goes while the emulation carries a burst (root).

    sudo .venv/bin/python benchmarks/bench_cpu.py [--fabrics zcube,roft] [--link-mbps 100]
        [--size-scale 2] [--bursts 10]

Brings each fabric up, opens the kept-open connections, then carries bench_fidelity.py's
bursts (``--bursts`` requests 0.5 s apart, each sending its four cross-rail transfers at
once) and reads CPU time before and after from /proc: the machine's by kind (user, system,
softirq, steal, idle) and every task the emulation runs, grouped: each thread of
ovs-vswitchd by name (its main thread forwards every packet of the userspace datapath),
the host agents, the controller, ovsdb-server, the kernel's ksoftirqd threads, and this
process (the workload's driver).  The same length of time idle right after is subtracted,
and each line is also given as a share of one core over the time transfers were in flight
(what a burst costs while it lasts).  Busiest first; asserts nothing.
"""
import argparse
import os
import re
import sys
import time

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from bench_fidelity import BYTES, burst_workload  # noqa: E402
from mininet.log import setLogLevel  # noqa: E402

from testbed.emulation.emulation import Emulation  # noqa: E402
from testbed.emulation.ovs import Ovs  # noqa: E402
from testbed.emulation.transfers import open_connections, run_transfers  # noqa: E402
from topologies import roft, zcube  # noqa: E402


def _threads(pid: int, label: str, out: dict) -> None:
    """Add each thread's CPU seconds of ``pid`` to ``out`` under ``label: thread name``
    (digits dropped, so handler12 and handler13 are one line)."""
    try:
        for t in psutil.Process(pid).threads():
            try:
                with open(f"/proc/{pid}/task/{t.id}/comm") as f:
                    name = re.sub(r"\d+$", "", f.read().strip()) or "?"
            except OSError:
                name = "?"
            key = f"{label}: {name}" if label != "agents" else label
            out[key] = out.get(key, 0.0) + t.user_time + t.system_time
    except psutil.Error:
        pass


def tasks(emu, ovs) -> dict:
    """CPU seconds so far of every task the emulation runs, grouped."""
    out: dict = {}
    _threads(emu.vswitchd_pid(), "ovs-vswitchd", out)
    for agent in emu.each_agent():
        _threads(agent.proc.pid, "agents", out)
    me = psutil.Process()
    cpu = me.cpu_times()
    out["driver (this process)"] = cpu.user + cpu.system
    for p in psutil.process_iter(["name", "cmdline"]):
        name, cmd = p.info["name"] or "", " ".join(p.info["cmdline"] or [])
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        if name.startswith("ksoftirqd"):
            key = "kernel: ksoftirqd"
        elif "controller.launch" in cmd:
            key = "controller (ryu)"
        elif name == "ovsdb-server":
            key = "ovsdb-server"
        else:
            continue
        out[key] = out.get(key, 0.0) + t.user + t.system
    return out


def machine() -> dict:
    t = psutil.cpu_times()
    return {k: getattr(t, k, 0.0) for k in ("user", "system", "softirq", "irq", "steal",
                                             "idle", "iowait")}


def busy_s(rows) -> float:
    """Seconds during which at least one transfer was in flight."""
    spans = sorted((r["start_s"], r["end_s"]) for r in rows if r.get("end_s") is not None)
    total, end = 0.0, None
    for a, b in spans:
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def one_fabric(fab, ovs, args) -> None:
    size = int(BYTES * args.size_scale * args.link_mbps / 100)
    work = burst_workload(fab, size, args.bursts)
    with Emulation(fab, ovs=ovs, link_mbps=args.link_mbps, log=lambda m: None) as emu:
        open_connections(emu, work)
        time.sleep(1.0)
        idle_t, idle_m, t0 = tasks(emu, ovs), machine(), time.monotonic()
        rows = run_transfers(emu, work, start_delay_s=0.2)
        wall = time.monotonic() - t0
        after_t, after_m = tasks(emu, ovs), machine()
        time.sleep(wall)                                # as long again with nothing to carry
        still_t, still_m = tasks(emu, ovs), machine()
    busy = busy_s(rows)
    print(f"\n{fab.label}: {len(rows)} transfers of {size:,} bytes in {args.bursts} bursts, "
          f"{sum(r['verified'] for r in rows)} verified; {wall:.2f} s wall, transfers in "
          f"flight {busy:.2f} s of it; CPU s used carrying them, less the same time idle:")
    m = {k: (after_m[k] - idle_m[k]) - (still_m[k] - after_m[k]) for k in after_m}
    print("  machine (/proc/stat):  " + "  ".join(
        f"{k} {m[k]:+.2f}" for k in ("user", "system", "softirq", "idle", "steal")))
    used = {k: (after_t[k] - idle_t.get(k, 0.0)) - (still_t.get(k, 0.0) - after_t[k])
            for k in after_t}
    for k, v in sorted(used.items(), key=lambda kv: -kv[1]):
        if abs(v) >= 0.005:
            print(f"  {k:<34} {v:6.2f} CPU s  = {100 * v / busy:5.1f}% of a core while "
                  f"transfers were in flight")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--link-mbps", type=float, default=100.0)
    p.add_argument("--size-scale", type=float, default=2.0,
                   help="multiply the demo's transfer sizes (default 2: the demo's dilation)")
    p.add_argument("--bursts", type=int, default=10)
    p.add_argument("--fabrics", default="zcube,roft")
    args = p.parse_args()
    setLogLevel("warning")
    ovs = Ovs().ensure()
    ovs.export_env()
    try:
        for name in args.fabrics.split(","):
            one_fabric(zcube(4, 4) if name == "zcube" else roft(4, 4), ovs, args)
    finally:
        ovs.stop()


if __name__ == "__main__":
    main()
