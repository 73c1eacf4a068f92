"""What to send a switch and a host when the route table changes (pure): group and flow mods
in an order that keeps every flow forwarding, host routes and neighbours to set or
delete, and players that apply them to a state, for tests."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from controller.flows import Flow, HostConfig, SwitchFlows


@dataclass
class SwitchState:
    """What one switch holds, in a form two states compare in: flows by their match
    ``(priority, source ip or None, destination ip)`` to an action ``("output", port)`` or
    ``("group", group id)``, and select groups by id to their ports.  The priority-0 drop
    never changes and is left out."""
    flows: dict = field(default_factory=dict)
    groups: dict = field(default_factory=dict)


def flow_action(flow: Flow, groups: dict) -> tuple:
    return ("output", flow.ports[0]) if len(flow.ports) == 1 else ("group", groups[flow.ports])


def switch_state(sf: SwitchFlows | None) -> SwitchState:
    """The state compiled flows put on a switch (None: an empty switch)."""
    if sf is None:
        return SwitchState()
    return SwitchState({(f.priority, f.src, f.dst): flow_action(f, sf.groups) for f in sf.flows},
                       {gid: ports for ports, gid in sf.groups.items()})


@dataclass
class SwitchDiff:
    """Group and flow mods that turn one switch's old state into its new one.

    :meth:`messages` gives them in the order they are sent: new groups first (and, where a
    group id changes meaning, a temporary copy of its old buckets); flows that must stop
    using such a group moved off it (to their final action when that is ready, else to the
    copy); group modifies; flow adds and modifies; flow deletes; group deletes.  So no flow
    ever names a missing group, and while the mods arrive every flow forwards either as it
    did or as it will, never by another flow's buckets."""
    switch: str
    dpid: int
    groups_add: list = field(default_factory=list)       # (group id, ports), temporaries too
    flows_early: list = field(default_factory=list)      # (priority, src, dst, action)
    groups_modify: list = field(default_factory=list)    # (group id, ports): new buckets
    flows_add: list = field(default_factory=list)        # (priority, src, dst, action)
    flows_modify: list = field(default_factory=list)     # (priority, src, dst, action)
    flows_delete: list = field(default_factory=list)     # (priority, src, dst)
    groups_delete: list = field(default_factory=list)    # group id, temporaries too

    def __bool__(self) -> bool:
        return self.flow_mods + self.group_mods > 0

    @property
    def flow_mods(self) -> int:
        return (len(self.flows_early) + len(self.flows_add) + len(self.flows_modify)
                + len(self.flows_delete))

    @property
    def group_mods(self) -> int:
        return len(self.groups_add) + len(self.groups_modify) + len(self.groups_delete)

    def messages(self) -> list[tuple]:
        """``("group", "add" | "modify", gid, ports)``, ``("group", "delete", gid)``,
        ``("flow", "add" | "modify", priority, src, dst, action)``,
        ``("flow", "delete", priority, src, dst)``, in sending order."""
        return ([("group", "add") + g for g in self.groups_add]
                + [("flow", "modify") + f for f in self.flows_early]
                + [("group", "modify") + g for g in self.groups_modify]
                + [("flow", "add") + f for f in self.flows_add]
                + [("flow", "modify") + f for f in self.flows_modify]
                + [("flow", "delete") + f for f in self.flows_delete]
                + [("group", "delete", g) for g in self.groups_delete])


def _key_order(key):
    """Sort key of a flow match (source None sorts first)."""
    prio, src, dst = key
    return (prio, src or "", dst)


def diff_switch(old: SwitchFlows | None, new: SwitchFlows) -> SwitchDiff:
    """The mods that take a switch from ``old`` (None: empty) to ``new``.  A select group
    that keeps its id but loses a dead port is one group modify; the flows using it stay
    untouched."""
    a, b = switch_state(old), switch_state(new)
    d = SwitchDiff(new.switch, new.dpid)
    added = sorted(set(b.groups) - set(a.groups))
    changed = {gid for gid in set(a.groups) & set(b.groups) if a.groups[gid] != b.groups[gid]}
    d.groups_add = [(gid, b.groups[gid]) for gid in added]
    d.groups_modify = [(gid, b.groups[gid]) for gid in sorted(changed)]
    d.groups_delete = sorted(set(a.groups) - set(b.groups))
    # flows leaving a group whose buckets change would briefly use the new buckets: move them
    # first, to their final action if it does not depend on a change, else to a copy
    temp: dict = {}
    moved = set()
    next_id = max(list(a.groups) + list(b.groups) + [0]) + 1
    for key in sorted(a.flows, key=_key_order):
        act, final = a.flows[key], b.flows.get(key)
        if act[0] != "group" or act[1] not in changed or final == act:
            continue
        if final is not None and (final[0] == "output" or final[1] not in changed):
            d.flows_early.append(key + (final,))
            moved.add(key)
            continue
        if act[1] not in temp:
            temp[act[1]] = next_id
            d.groups_add.append((next_id, a.groups[act[1]]))
            d.groups_delete.append(next_id)
            next_id += 1
        d.flows_early.append(key + (("group", temp[act[1]]),))
    for key in sorted(b.flows, key=_key_order):
        if key not in a.flows:
            d.flows_add.append(key + (b.flows[key],))
        elif a.flows[key] != b.flows[key] and key not in moved:
            d.flows_modify.append(key + (b.flows[key],))
    d.flows_delete = sorted(set(a.flows) - set(b.flows), key=_key_order)
    return d


def diff_switch_flows(old: dict[str, SwitchFlows],
                      new: dict[str, SwitchFlows]) -> dict[str, SwitchDiff]:
    """Per switch, the mods from ``old`` to ``new`` compiled flows; switches with nothing to
    change are left out."""
    out = {}
    for name, sf in new.items():
        d = diff_switch(old.get(name), sf)
        if d:
            out[name] = d
    return out


def apply_message(state: SwitchState, msg: tuple, switch: str = "switch") -> SwitchState:
    """The state after one of :meth:`SwitchDiff.messages`, with OpenFlow's refusals
    (ValueError): adding an existing group or flow, modifying or deleting a missing one, a
    flow naming a group the switch lacks.  Deleting a group also deletes the flows that
    still use it, as OpenFlow does."""
    flows, groups = dict(state.flows), dict(state.groups)
    kind, command = msg[0], msg[1]
    if kind == "group":
        gid = msg[2]
        if (gid in groups) != (command != "add"):
            known = "existing" if gid in groups else "unknown"
            raise ValueError(f"{switch}: group {command} of {known} group {gid}")
        if command == "delete":
            del groups[gid]
            flows = {k: a for k, a in flows.items() if a != ("group", gid)}
        else:
            groups[gid] = msg[3]
    else:
        key = tuple(msg[2:5])
        if (key in flows) != (command != "add"):
            known = "existing" if key in flows else "missing"
            raise ValueError(f"{switch}: flow {command} of {known} flow {key}")
        if command == "delete":
            del flows[key]
        else:
            action = msg[5]
            if action[0] == "group" and action[1] not in groups:
                raise ValueError(f"{switch}: flow {key} uses missing group {action[1]}")
            flows[key] = action
    return SwitchState(flows, groups)


def apply_switch_diff(state: SwitchState, diff: SwitchDiff) -> SwitchState:
    """What a switch holds after receiving all of ``diff`` (:func:`apply_message`)."""
    for msg in diff.messages():
        state = apply_message(state, msg, diff.switch)
    return state


@dataclass
class HostDiff:
    """Route and neighbour changes of one host: set means add, or replace the entry for
    that prefix (address)."""
    host: str
    routes_set: list = field(default_factory=list)          # (prefix, port, source ip)
    routes_delete: list = field(default_factory=list)       # prefix
    neighbours_set: list = field(default_factory=list)      # (ip, mac, port)
    neighbours_delete: list = field(default_factory=list)   # ip
    # NVLink fabrics (controller.nvlink_hosts): routes (table, prefix, port, via, src) by
    # (table, prefix), neighbours (ip, mac, port) by (ip, port)
    nv_routes_set: list = field(default_factory=list)
    nv_routes_delete: list = field(default_factory=list)
    nv_neighbours_set: list = field(default_factory=list)
    nv_neighbours_delete: list = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.routes_set or self.routes_delete or self.neighbours_set
                    or self.neighbours_delete or self.nv_routes_set or self.nv_routes_delete
                    or self.nv_neighbours_set or self.nv_neighbours_delete)


def diff_host_config(old: dict[str, HostConfig],
                     new: dict[str, HostConfig]) -> dict[str, HostDiff]:
    """Per host, what changes from ``old`` to ``new`` host configuration (hosts with no
    change left out).  When a NIC port dies, this moves the host's routes and neighbours
    for every destination still reached onto the port the new table uses."""
    out = {}
    for name, hc in new.items():
        was = old.get(name)
        r0 = {p: (port, src) for p, port, src in (was.routes if was else [])}
        r1 = {p: (port, src) for p, port, src in hc.routes}
        n0 = {ip: (mac, port) for ip, mac, port in (was.neighbours if was else [])}
        n1 = {ip: (mac, port) for ip, mac, port in hc.neighbours}
        d = HostDiff(name,
                     [(p,) + r1[p] for p in sorted(r1) if r0.get(p) != r1[p]],
                     sorted(set(r0) - set(r1)),
                     [(ip,) + n1[ip] for ip in sorted(n1) if n0.get(ip) != n1[ip]],
                     sorted(set(n0) - set(n1)))
        if hc.nvlink is not None:
            _diff_nvlink(d, was.nvlink if was else None, hc.nvlink)
        if d:
            out[name] = d
    return out


def _nv_maps(cfg) -> tuple[dict, dict]:
    if cfg is None:
        return {}, {}
    return ({r[:2]: r for r in cfg.routes},
            {(ip, port): mac for ip, mac, port in cfg.neighbours})


def _diff_nvlink(d: HostDiff, old, new) -> None:
    r0, n0 = _nv_maps(old)
    r1, n1 = _nv_maps(new)
    d.nv_routes_set = [r1[k] for k in sorted(r1) if r0.get(k) != r1[k]]
    d.nv_routes_delete = sorted(set(r0) - set(r1))
    d.nv_neighbours_set = [(ip, n1[(ip, port)], port) for ip, port in sorted(n1)
                           if n0.get((ip, port)) != n1[(ip, port)]]
    d.nv_neighbours_delete = sorted(set(n0) - set(n1))


def apply_host_diff(hc: HostConfig, diff: HostDiff) -> HostConfig:
    """The host configuration after ``diff`` (routes and neighbours sorted, as compiled)."""
    routes = {p: (port, src) for p, port, src in hc.routes}
    neigh = {ip: (mac, port) for ip, mac, port in hc.neighbours}
    for p, port, src in diff.routes_set:
        routes[p] = (port, src)
    for p in diff.routes_delete:
        del routes[p]
    for ip, mac, port in diff.neighbours_set:
        neigh[ip] = (mac, port)
    for ip in diff.neighbours_delete:
        del neigh[ip]
    nvlink = hc.nvlink
    if nvlink is not None:
        r, n = _nv_maps(nvlink)
        r.update({route[:2]: route for route in diff.nv_routes_set})
        n.update({(ip, port): mac for ip, mac, port in diff.nv_neighbours_set})
        for k in diff.nv_routes_delete:
            del r[k]
        for k in diff.nv_neighbours_delete:
            del n[k]
        nvlink = replace(nvlink, routes=[r[k] for k in sorted(r)],
                         neighbours=sorted((ip, mac, port) for (ip, port), mac in n.items()))
    return HostConfig(hc.host, list(hc.addresses),
                      sorted((p,) + v for p, v in routes.items()),
                      sorted((ip,) + v for ip, v in neigh.items()), nvlink)
