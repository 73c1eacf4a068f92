"""Failures injected into a running emulation, and their repair: ports taken down where the
kernel and Open vSwitch see them, the controller's reroute awaited, and the hosts' routes
and agents told, as a NIC driver and a fabric manager would."""
from __future__ import annotations

import threading
import time

from controller.failures import Failures, dead_cables
from controller.flowdiff import diff_host_config
from controller.flows import compile_host_config
from controller.pairings import pairings_down
from testbed.core.fault_records import AT_THE_END, fault_record, schedule_events
from testbed.emulation import batched_build, nvlink_build
from testbed.emulation.network import host_intf, switch_intf


class FaultError(RuntimeError):
    pass


def cables_of(fabric, failures: Failures) -> set:
    """Every cable the failures take down (a dead switch takes all of its cables)."""
    return set(dead_cables(fabric, failures))


def _set_links(emu, links, up: bool) -> dict[str, list]:
    """The switches' ends of every cable in ``links`` up or down, over one netlink socket in
    the root namespace; the hosts' ends are returned as each host's ``ip -batch`` lines,
    for :func:`_apply_hosts` to run with the hosts' route changes (one batch per host)."""
    from pyroute2 import IPRoute
    state = "up" if up else "down"
    hosts: dict[str, list] = {}
    with IPRoute() as ipr:
        for link in sorted(links, key=lambda c: (c.a, c.a_port, c.b, c.b_port)):
            for node, port in ((link.a, link.a_port), (link.b, link.b_port)):
                if emu.fabric.is_host(node):
                    hosts.setdefault(node, []).append(
                        f"link set dev {host_intf(node, port)} {state}\n")
                    continue
                found = ipr.link_lookup(ifname=switch_intf(node, port))
                if not found:
                    raise FaultError(f"{switch_intf(node, port)}: no such interface")
                ipr.link("set", index=found[0], state=state)
    return hosts


def _host_batches(emu, lines: dict[str, list]) -> None:
    """Run each host's ``ip -batch`` lines in its namespace, every host at once, at a
    real-time priority just above the agents' timers (where allowed): on a machine the
    transfers keep busy, a fault's injection then waits for no shell to be scheduled (it
    took up to 240 ms through the hosts' shells).  A route or neighbour the kernel dropped
    with its port is no error (``-force`` goes on past it); anything else is."""
    try:
        scripts = {h: (emu.host_pid(h), batched_build.batch_script("ip", ls, force=True))
                   for h, ls in lines.items() if ls}
        batched_build.run_scripts(scripts, realtime=True,
                                  ignore=("No such process", "No such file or directory",
                                          "Cannot find", "Command failed"))
    except batched_build.BatchError as err:
        raise FaultError(str(err)) from None


def _apply_hosts(emu, old_table, new_table, link_lines=None) -> int:
    """Take the hosts' ends of the cables up or down (``link_lines``, first) and change
    every host's routes and neighbours as the two tables differ, one ``ip -batch`` per host
    (:func:`_host_batches`; netlink opened in each namespace costs tens of ms per host);
    how many hosts' routes changed."""
    diffs = diff_host_config(compile_host_config(old_table), compile_host_config(new_table))
    lines = {h: list(ls) for h, ls in (link_lines or {}).items()}
    for h, d in diffs.items():
        lines.setdefault(h, []).extend(_ip_lines(emu.fabric.host(h), d))
    _host_batches(emu, lines)
    return len(diffs)


def _ip_lines(host, d):
    """The ``ip -batch`` lines of one host's change: deletions before the entries set."""
    for prefix in d.routes_delete:
        yield f"route del {prefix}\n"
    for prefix, port, src in d.routes_set:
        yield f"route replace {prefix} dev {host_intf(host.name, port)} src {src} scope link\n"
    for ip in d.neighbours_delete:
        yield f"neigh flush to {ip}\n"
    for ip, mac, port in d.neighbours_set:
        yield (f"neigh replace {ip} lladdr {mac} dev {host_intf(host.name, port)} "
               "nud permanent\n")
    yield from (nvlink_build.route_delete_line(k) + "\n" for k in d.nv_routes_delete)
    yield from (nvlink_build.route_line(host.name, r) + "\n" for r in d.nv_routes_set)
    yield from (nvlink_build.neigh_delete_line(host.name, k) + "\n"
                for k in d.nv_neighbours_delete)
    yield from (nvlink_build.neigh_line(host.name, n) + "\n" for n in d.nv_neighbours_set)


def tell_agents(emu) -> dict:
    """Tell every agent whose list changed which of its pairings ``emu.table`` routes no path
    over (:func:`controller.pairings.pairings_down`); how many connections they moved off
    a pairing that went down, and when they had all been told."""
    told, agents = emu.pairings_told, emu.agents
    news = ({h: p for h, p in pairings_down(emu.table).items()
             if h in agents and told.get(h) != p} if agents else {})
    replies = (emu.tell_agents({h: {"op": "down", "pairings": p} for h, p in news.items()})
               if news else {})
    told.update(news)
    return {"moved": sum(r.get("moved") or 0 for r in replies.values()), "at": time.time()}


def _change(emu, plan, up: bool, timeout_s: float) -> dict:
    """``plan()`` gives ``(failed, cables)``: the cables to take up or down and the failures
    to route around afterwards; it is evaluated, and the ports and tables changed, under
    the emulation's fault lock (one fault's injection at a time), and then the controller's
    reroute is waited for outside it, so a slow confirmation holds up no other fault.  With
    no cable to change (the element's cables are all down already, or stay down for another
    fault) no port moves and no reroute comes, so the tables change and nothing is waited
    for (``reroutes`` 0, ``unchanged``)."""
    with emu.fault_lock:
        failed, cables = plan()
        before = emu.status()["reroutes"] if cables else None
        t0 = time.time()
        link_lines = _set_links(emu, cables, up) if cables else {}
        old_table = emu.use_failures(failed)
        # the agents first, as a NIC driver learns of its dead port at once: their next
        # pairings' routes are already in place (a detour's host routes follow in ms);
        # with NVLink, after the reroute: a detour through a sibling has no switch flows
        # before it, and a connection opened too early waits out TCP's 1 s SYN timeout
        early = (not up or not cables) and not (cables and emu.fabric.nvlinks)
        told = tell_agents(emu) if early else None
        hosts = _apply_hosts(emu, old_table, emu.table, link_lines)
    if not cables:
        return {"elements": failed.describe(emu.fabric), "cables": 0, "reroutes": 0,
                "hosts_reconfigured": hosts, "injected_at": t0, "installed_at": None,
                "since_injection_s": None, "unchanged": True,
                "agents_told_s": told["at"] - t0, "connections_moved": told["moved"]}
    deadline = t0 + timeout_s
    while True:
        st = emu.status()
        last = st.get("last_reroute") or {}
        if st["reroutes"] > before and last.get("installed") and not st["pending_events"]:
            break
        if time.time() > deadline:
            raise FaultError(f"the controller did not reroute within {timeout_s:g} s "
                             f"(reroutes {st['reroutes']}, last {last})")
        time.sleep(0.05)
    if told is None:                  # back (or over NVLink) once its routes are in place
        with emu.fault_lock:
            told = tell_agents(emu)
    return {"elements": failed.describe(emu.fabric), "cables": len(cables),
            "reroutes": st["reroutes"] - before,
            "hosts_reconfigured": hosts, "reroute_s": last.get("reroute_s"),
            "compute_s": last.get("compute_s"), "flow_mods": last.get("flow_mods"),
            "group_mods": last.get("group_mods"), "injected_at": t0,
            "installed_at": last.get("installed"),
            "since_injection_s": (last["installed"] - t0) if last.get("installed") else None,
            "disconnected_pairs": st.get("disconnected", 0),
            "agents_told_s": told["at"] - t0, "connections_moved": told["moved"]}


def fail(emu, items, timeout_s: float = 15.0) -> dict:
    """Take ``items`` down (both ends of each cable administratively down, the hosts' routes
    moved and their agents told) and wait for the controller's reroute (barriers); a
    cable an earlier fault took down stays as it is (recorded; its restore is that
    fault's)."""
    new = Failures.parse(emu.fabric, items)

    def plan():
        down = cables_of(emu.fabric, emu.failed) if emu.failed else set()
        emu.holds.update(list(new.links) + list(new.switches))
        return emu.failed | new, cables_of(emu.fabric, new) - down
    return _change(emu, plan, False, timeout_s)


def restore(emu, items=None, timeout_s: float = 15.0) -> dict:
    """Bring ``items`` (default: everything failed) back up and wait for the reroute; a
    cable stays down while another fault still holds it down (the same element failed
    twice, a switch whose cable also failed on its own, ...)."""
    back = None if items is None else Failures.parse(emu.fabric, items)

    def plan():
        held = emu.holds
        if back is None:
            held.clear()
        else:
            held.subtract(list(back.links) + list(back.switches))
        left = Failures({x for x in emu.failed.links if held[x] > 0},
                        {x for x in emu.failed.switches if held[x] > 0})
        gone = Failures(emu.failed.links - left.links, emu.failed.switches - left.switches)
        return left, cables_of(emu.fabric, gone) - cables_of(emu.fabric, left)
    return _change(emu, plan, True, timeout_s)


# --- faults during a run (scenario ``faults``) ---------------------------------------------
class FaultRun:
    """Injects faults at their times (workload time 0 = wall clock ``t0``) while the
    transfers run: a dispatcher thread starts each event at its time in a thread of its own,
    so an event whose reroute is slow to confirm, or that fails, holds up none after it
    (their injections take turns under the emulation's fault lock; each waits at most its
    15 s timeout).  Leaving the ``with`` block stops the schedule, waits for the events
    under way, restores whatever is still down, and sorts the records by time."""

    def __init__(self, emu, faults: list[dict], t0: float, log=None):
        self.emu, self.t0, self.log = emu, t0, log or (lambda m: None)
        self.events = schedule_events(faults)
        self.records: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._workers: list[threading.Thread] = []

    def __enter__(self):
        if self.events:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        for w in self._workers:
            w.join()
        if self.emu.failed:
            out = self.emu.restore()
            self.records.append(self._record("up", AT_THE_END, out))
        self.records.sort(key=lambda r: r["t_s"])
        return False

    def _record(self, action, element, out, **when) -> dict:
        """The record of an event applied (``out``: what :func:`fail` or :func:`restore`
        gave back; ``when``: its ``at_s`` and ``late_s``)."""
        return fault_record(out["injected_at"] - self.t0, action, element,
                            since_injection_s=out.get("since_injection_s"),
                            reroute_s=out.get("reroute_s"), reroutes=out.get("reroutes"),
                            disconnected_pairs=out.get("disconnected_pairs"),
                            agents_told_s=out.get("agents_told_s"),
                            connections_moved=out.get("connections_moved"),
                            unchanged=bool(out.get("unchanged")), **when)

    def _run(self):
        for at, _, action, elem in self.events:
            if self._stop.wait(max(0.0, self.t0 + at - time.time())):
                return                             # the transfers ended first
            w = threading.Thread(target=self._event, args=(at, action, elem), daemon=True)
            self._workers.append(w)
            w.start()

    def _event(self, at: float, action: str, elem: str) -> None:
        late = time.time() - (self.t0 + at)
        try:
            out = (self.emu.fail(elem) if action == "down" else self.emu.restore(elem))
        except Exception as err:  # noqa: BLE001 - recorded and said, the run goes on
            rec = fault_record(time.time() - self.t0, action, elem, at_s=at, late_s=late,
                               error=f"{type(err).__name__}: {err}")
            self.records.append(rec)
            self.log(f"fault: {elem} {action} due at {at:.2f} s FAILED at "
                     f"{rec['t_s']:.2f} s: {rec['error']}")
            return
        rec = self._record(action, elem, out, at_s=at, late_s=late)
        self.records.append(rec)
        self.log(f"fault: {elem} {action} at {rec['t_s']:.2f} s"
                 + (" (its cables were already down or stay down: nothing to reroute)"
                    if out.get("unchanged") else
                    f", rerouted in {(out.get('since_injection_s') or 0) * 1000:.0f} ms"))

