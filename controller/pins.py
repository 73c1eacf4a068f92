"""Connections pinned to paths (pure): the exact-match flows, above the routing flows, that
make a kept-open connection take the path it is told rather than the bucket its select
group's hash gives it."""
from __future__ import annotations

from dataclasses import dataclass

from controller.flows import PRIO_DST, PRIO_PAIR

PIN_COOKIE = 0x2C0BE00000000002   # marks pinned flows (the routing flows have their own)
PRIO_PIN = 300                    # above every routing flow


@dataclass(frozen=True)
class Pin:
    src: str                      # source address
    dst: str                      # destination address
    sport: int                    # TCP source port
    dport: int                    # TCP destination port
    path: tuple[str, ...]         # hosts and switches, source host first

    @classmethod
    def parse(cls, obj) -> "Pin":
        """A pin from its JSON form (a dict of the fields); ValueError if malformed."""
        try:
            pin = cls(str(obj["src"]), str(obj["dst"]), int(obj["sport"]), int(obj["dport"]),
                      tuple(str(n) for n in obj["path"]))
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"bad pin {obj!r}: {err}") from None
        if len(pin.path) < 3 or not (0 < pin.sport < 65536 and 0 < pin.dport < 65536):
            raise ValueError(f"bad pin {obj!r}: needs a switch on its path and ports 1-65535")
        return pin


@dataclass(frozen=True)
class PinFlow:
    pin: Pin
    port: int                     # the switch port it leaves by

    def describe(self) -> str:
        """Canonical text, the same as ``parse_ofctl_flow`` makes of ovs-ofctl output."""
        p = self.pin
        return (f"priority={PRIO_PIN},tcp,nw_src={p.src},tp_dst={p.dport},tp_src={p.sport},"
                f"nw_dst={p.dst} actions=output:{self.port}")


def pin_flows(table, switch_flows: dict, pins) -> dict[str, list[PinFlow]]:
    """Per switch, the pinned flows of ``pins`` under ``table`` (whose compiled routing flows
    are ``switch_flows``): at each switch of a pin's path where the routing flows offer more
    than one port, the port toward the path's next node (of parallel cables, one chosen by
    the source port).  Pins whose path the table does not route (a failure on it) hold none."""
    out: dict[str, list[PinFlow]] = {}
    routed: dict = {}
    index: dict = {}              # switch -> (priority, source, destination) -> its flow
    for pin in pins:
        ends = (pin.path[0], pin.path[-1])
        if ends not in routed:
            hosts = all(table.fabric.is_host(e) for e in ends)
            routed[ends] = {tuple(p) for p in table.paths(*ends)} if hosts else set()
        if pin.path not in routed[ends]:
            continue
        for here, nxt in zip(pin.path[1:-1], pin.path[2:]):
            if here not in index:
                index[here] = {(f.priority, f.src, f.dst): f
                               for f in getattr(switch_flows.get(here), "flows", ())}
            flows = index[here]
            flow = flows.get((PRIO_PAIR, pin.src, pin.dst)) or flows.get((PRIO_DST, None,
                                                                            pin.dst))
            if flow is None or len(flow.ports) < 2:
                continue
            ports = sorted(a for a, _ in table.live_ports(here, nxt))
            if ports:
                out.setdefault(here, []).append(PinFlow(pin, ports[pin.sport % len(ports)]))
    return out
