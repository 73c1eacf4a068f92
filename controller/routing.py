"""Routing policies (ZCUBE.md section 3): which switch paths every ordered GPU pair uses, and
the :class:`RouteTable` that holds them, around failed elements too (pure).  A path is a
tuple of node names from host to host: ``("g0", "a0", "b1", "g5")``."""
from __future__ import annotations

import zlib
from typing import Callable, Iterator, Sequence

from controller.failures import Damage, Failures
from controller.relay import inside_server, need_nvlink, nvlink_detours, rank_relay, through
from controller.shortest import ShortestPaths, shortest_candidates
from controller.user_policy import load_function, module_folder
from topologies.fabric import Fabric, FabricError
from topologies.nvlink import network_part

Path = tuple
PolicyFn = Callable[[Fabric, str, str], Sequence[Sequence[str]]]


def _zcube_planes(fabric: Fabric, host: str) -> tuple[str, str]:
    """(A switch, B switch) that ``host`` plugs into."""
    a = b = None
    for sw, _ in fabric.attachments(host):
        group = fabric.switch(sw).group
        if group == "A":
            a = sw
        elif group == "B":
            b = sw
    if a is None or b is None:
        raise FabricError(f"{host} is not on an A and a B switch: the zcube policies need a "
                          f"zcube fabric")
    return a, b


class Policy:
    """A routing policy bound to one fabric.  ``paths(src, dst)`` returns host-to-host
    paths; ``claims(src, dst)`` returns the NIC port pairings the policy promises (or None)."""

    name = "policy"
    lanes = 1            # sub-flows (connections) per NIC port pairing a transfer uses

    def __init__(self, fabric: Fabric):
        self.fabric = fabric

    def paths(self, src: str, dst: str) -> list[Path]:
        raise NotImplementedError

    def claims(self, src: str, dst: str):
        return None

    def fallback(self, src: str, dst: str, damage: Damage, sp: ShortestPaths) -> list[Path]:
        """Paths for a pair all of whose :meth:`paths` are dead: by default every shortest
        path that survives (``sp`` is over the surviving cables), else the detours through a
        sibling's NIC over NVLink, none if cut off."""
        return (shortest_candidates(self.fabric, sp, src, dst, damage)
                or nvlink_detours(self.fabric, sp, damage, src, dst))


class ZCubePolicy(Policy):
    """P1 and P2 for every pair (ZCUBE.md section 3), with ``short`` the 1-switch shortcut
    for pairs that share a switch, and with ``pxn`` each of them handed over NVLink to a
    sibling on the destination's switch of that plane where the source's server has one."""

    def __init__(self, fabric: Fabric, short: bool = False, pxn: bool = False):
        super().__init__(fabric)
        self.name = "zcube-pxn" if pxn else ("zcube-short" if short else "zcube")
        if fabric.kind not in ("zcube", "custom") or set(fabric.groups()) != {"A", "B"}:
            raise FabricError(f"policy {self.name} needs a zcube fabric, not {fabric.kind}")
        if pxn:
            need_nvlink(fabric, self.name)
        self.short, self.pxn = short, pxn
        self._planes = {h.name: _zcube_planes(fabric, h.name) for h in fabric.hosts}
        self._group = {g: [s.name for s in sws] for g, sws in fabric.groups().items()}
        self._servers = fabric.servers()

    def paths(self, src: str, dst: str) -> list[Path]:
        sa, sb = self._planes[src]
        da, db = self._planes[dst]
        if self.short:
            if sa == da:
                return [(src, sa, dst)]
            if sb == db:
                return [(src, sb, dst)]
        if self.pxn:
            return [self._handed(src, dst, first, last) for first, last in ((sa, db), (sb, da))]
        return [(src, sa, db, dst), (src, sb, da, dst)]

    def _handed(self, src: str, dst: str, first: str, last: str) -> Path:
        """``src -> first -> last -> dst``, or, where a sibling of ``src`` plugs into
        ``last``, through that sibling's NIC straight to ``last``."""
        for sib in self._servers[self.fabric.host(src).server]:
            if sib.name != src and last in self._planes[sib.name]:
                return through(self.fabric, src, dst, (sib.name, last, dst))
        return (src, first, last, dst)

    def claims(self, src: str, dst: str):
        if self.pxn:
            return None
        sa, sb = self._planes[src]
        da, db = self._planes[dst]
        port = self.fabric.host_port_toward
        if self.short and sa == da:
            return {(port(src, sa), port(dst, da))}
        if self.short and sb == db:
            return {(port(src, sb), port(dst, db))}
        return {(port(src, sa), port(dst, db)), (port(src, sb), port(dst, da))}

    def fallback(self, src: str, dst: str, damage: Damage, sp: ShortestPaths) -> list[Path]:
        """ZCUBE.md section 3, Failures: the first of these that leaves a live path, in order:
        P1/P2 (``zcube-short`` whose shortcut died); the 1-switch shortcut; the 3-switch
        detours ``s.A -> A[i] -> B[x] -> A[i'] -> d.A`` and ``s.B -> B[j] -> A[x] -> B[j'] ->
        d.B`` (each stays on one address plane, so it ends at the destination's address on
        the plane it started on); any shortest surviving path."""
        sa, sb = self._planes[src]
        da, db = self._planes[dst]
        tiers = []
        if self.short:
            tiers.append([(src, sa, db, dst), (src, sb, da, dst)])
        tiers.append([(src, sw, dst) for sw, dw in ((sa, da), (sb, db)) if sw == dw])
        detours = []
        for first, last, other in ((sa, da, "B"), (sb, db, "A")):
            if first != last:
                detours += [(src, first, x, last, dst) for x in self._group[other]]
        tiers.append(detours)
        for tier in tiers:
            alive = [p for p in tier if damage.path_ok(p)]
            if alive:
                return alive
        return super().fallback(src, dst, damage, sp)


class EcmpPolicy(Policy):
    name = "ecmp"

    def __init__(self, fabric: Fabric):
        super().__init__(fabric)
        self.sp = ShortestPaths(fabric)

    def paths(self, src: str, dst: str) -> list[Path]:
        return shortest_candidates(self.fabric, self.sp, src, dst)


class ShortestPolicy(EcmpPolicy):
    """One shortest path per pair, picked among the equal ones by a hash that never changes."""
    name = "shortest"

    def paths(self, src: str, dst: str) -> list[Path]:
        cands = super().paths(src, dst)
        if not cands:
            return cands
        return [cands[zlib.crc32(f"{src}>{dst}".encode()) % len(cands)]]

    def fallback(self, src: str, dst: str, damage: Damage, sp: ShortestPaths) -> list[Path]:
        """One surviving shortest path, picked by the same fixed hash."""
        cands = super().fallback(src, dst, damage, sp)
        if not cands:
            return cands
        return [cands[zlib.crc32(f"{src}>{dst}".encode()) % len(cands)]]


class PxnPolicy(EcmpPolicy):
    """Rail matching (NCCL's PXN): a transfer between GPUs of different ranks crosses NVLink
    to its server's GPU of the destination's rank and takes ``ecmp``'s paths from that GPU's
    NIC, so on a rail-optimised Clos it stays in one rail (:mod:`controller.relay`)."""
    name = "pxn"

    def __init__(self, fabric: Fabric):
        need_nvlink(fabric, self.name)
        super().__init__(fabric)

    def paths(self, src: str, dst: str) -> list[Path]:
        relay = rank_relay(self.fabric, src, dst)
        return [through(self.fabric, src, dst, p) for p in super().paths(relay, dst)]


class SprayPolicy(EcmpPolicy):
    """``ecmp``'s paths; each transfer spread over ``lanes`` connections per pairing, or
    with ``even`` (``spray:all``) split evenly over every path of its pairing."""

    def __init__(self, fabric: Fabric, lanes: int = 0, even: bool = False):
        super().__init__(fabric)
        self.even = even
        self.lanes = 1 if even else (lanes or SPRAY_ENTROPY)
        self.name = "spray:all" if even else ("spray" if not lanes else f"spray:{lanes}")


SPRAY_ENTROPY = 16       # sub-flows per pairing under plain ``spray``
MAX_ENTROPY = 256        # MRC's largest entropy set; more connections than any host keeps
EVEN_SPRAY = "spray:all"  # the even split over every path (the model backend only)
MODEL_ONLY = (EVEN_SPRAY,)


def spray_lanes(name: str) -> int | None:
    """``K`` of ``spray:K``; None for any other name (plain ``spray`` and ``spray:all`` are
    in BUILTIN)."""
    head, sep, k = name.partition(":")
    if head != "spray" or not sep or name == EVEN_SPRAY:
        return None
    if not k.isdigit() or not 1 <= int(k) <= MAX_ENTROPY:
        raise FabricError(f"policy {name!r}: spray's entropy must be a whole number from 1 to "
                          f"{MAX_ENTROPY}, or all")
    return int(k)


class FunctionPolicy(Policy):
    """A user's ``module:function`` taking ``(fabric, src, dst)``."""

    def __init__(self, fabric: Fabric, fn: PolicyFn, name: str):
        super().__init__(fabric)
        self.fn = fn
        self.name = name

    @property
    def folder(self) -> str | None:
        """The folder the function's module was imported from: another process (the
        emulation's controller) is given it to import the same module."""
        return module_folder(getattr(self.fn, "__module__", None) or "")

    def paths(self, src: str, dst: str) -> list[Path]:
        return [tuple(p) for p in self.fn(self.fabric, src, dst)]


BUILTIN = {
    "zcube": lambda f: ZCubePolicy(f, short=False),
    "zcube-short": lambda f: ZCubePolicy(f, short=True),
    "zcube-pxn": lambda f: ZCubePolicy(f, pxn=True),
    "ecmp": EcmpPolicy,
    "shortest": ShortestPolicy,
    "pxn": PxnPolicy,
    "spray": SprayPolicy,
    EVEN_SPRAY: lambda f: SprayPolicy(f, even=True),
}


def make_policy(name: str, fabric: Fabric, near: Sequence[str] = ()) -> Policy:
    """A built-in policy by name, or ``package.module:function`` for a user's own
    (``policy(fabric, src, dst) -> list of paths``; a pair's traffic is split equally over
    them), its module looked for in the folders ``near`` (a scenario's), then the working
    folder, then the Python path (:func:`controller.user_policy.load_function`).  Built in:
    ``zcube`` (P1 and P2, striped, for every pair), ``zcube-short`` (the 1-switch shortcut
    where a pair shares a switch), ``zcube-pxn`` (P1 and P2, each handed over NVLink to a
    sibling on the destination's switch where there is one), ``pxn`` (rail matching: over
    NVLink to the source server's GPU of the destination's rank, then ``ecmp`` from its
    NIC), ``ecmp`` (every shortest path over every NIC port
    pairing), ``shortest`` (one of those by a fixed hash), ``spray`` / ``spray:K``
    (``ecmp``'s paths, each transfer on K connections per pairing, default
    :data:`SPRAY_ENTROPY`) and ``spray:all`` (every pairing's bytes split evenly over its
    paths; the flow-level model only)."""
    lanes = spray_lanes(name)
    if lanes:
        return SprayPolicy(fabric, lanes)
    if name in BUILTIN:
        return BUILTIN[name](fabric)
    if ":" not in name:
        raise FabricError(f"unknown policy {name!r}; choose one of {', '.join(BUILTIN)} "
                          f"(spray:K for K sub-flows per pairing) or give module:function")
    return FunctionPolicy(fabric, load_function(name, near), name)


def default_policy(fabric: Fabric) -> str:
    return "zcube" if fabric.kind == "zcube" else "ecmp"


class RouteTable:
    """The routes of one policy on one fabric, computed per ordered host pair on demand.
    Around ``failed`` elements a pair keeps the policy's paths that cross nothing dead, else
    gets the policy's ``fallback`` (ZCube: the 1-switch shortcut, else 3-switch detours;
    every policy at last: the shortest surviving paths); a pair left with none is in
    :meth:`disconnected`.  With no failures the table is the policy's, unchanged."""

    def __init__(self, fabric: Fabric, policy: str | Policy | None = None,
                 failed: Failures | None = None):
        self.fabric = fabric
        if policy is None:
            policy = default_policy(fabric)
        self.policy = policy if isinstance(policy, Policy) else make_policy(policy, fabric)
        self.failed = failed if failed is not None else Failures()
        self.damage = Damage(fabric, self.failed) if self.failed else None
        self._live_sp: ShortestPaths | None = None

    @property
    def policy_name(self) -> str:
        return self.policy.name

    def with_failures(self, failed: Failures | None) -> "RouteTable":
        """The same policy on the same fabric around ``failed`` (None or empty: none)."""
        return RouteTable(self.fabric, self.policy, failed)

    def paths(self, src: str, dst: str) -> list[Path]:
        """The pair's paths; empty only when failures cut the pair off (or a user's policy
        gives none).  GPUs of one server with NVLink use it and nothing else."""
        inside = inside_server(self.fabric, src, dst)
        if inside is not None:
            return [inside]
        paths = self.policy.paths(src, dst)
        damage = self.damage
        if damage is None:
            return paths
        alive = [p for p in paths if damage.path_ok(p)]
        if alive:
            return alive
        if self._live_sp is None:
            self._live_sp = ShortestPaths(self.fabric, damage)
        return [tuple(p) for p in self.policy.fallback(src, dst, damage, self._live_sp)]

    def claims(self, src: str, dst: str):
        """NIC port pairings the policy promises; none are promised around failures or
        inside a server (NVLink)."""
        if self.damage is not None or inside_server(self.fabric, src, dst) is not None:
            return None
        return self.policy.claims(src, dst)

    def live_ports(self, u: str, v: str) -> list[tuple[int, int]]:
        """``(port on u, port on v)`` of the live cables between ``u`` and ``v``."""
        if self.damage is None:
            return self.fabric.ports_between(u, v)
        return self.damage.live_ports(u, v)

    def disconnected(self) -> list[tuple[str, str]]:
        """Ordered pairs left with no path (failures cut them off), in :meth:`pairs` order."""
        if self.damage is None:
            return []
        return [(s, d) for s, d in self.pairs() if not self.paths(s, d)]

    def port_pairing(self, path: Path) -> tuple[int, int]:
        """(source NIC port, destination NIC port) of a host-to-host path: of the GPUs whose
        NICs it crosses the fabric between, where it hands over NVLink; ``(-1, -1)`` for a
        path inside one server."""
        net = network_part(self.fabric, path)
        if not net:
            return (-1, -1)
        return (self.fabric.host_port_toward(net[0], net[1]),
                self.fabric.host_port_toward(net[-1], net[-2]))

    def pairs(self) -> Iterator[tuple[str, str]]:
        names = [h.name for h in self.fabric.hosts]
        for s in names:
            for d in names:
                if s != d:
                    yield s, d

    def to_json_dict(self) -> dict:
        return {"policy": self.policy_name,
                "pairs": [{"src": s, "dst": d, "paths": [list(p) for p in self.paths(s, d)]}
                          for s, d in self.pairs()]}

    def write_json(self, out) -> None:
        """Stream the ``{"policy": P, "pairs": [...]}`` document to a text file."""
        import json
        out.write('{"policy": %s, "pairs": [' % json.dumps(self.policy_name))
        first = True
        for s, d in self.pairs():
            out.write(("" if first else ",") + "\n " + json.dumps(
                {"src": s, "dst": d, "paths": [list(p) for p in self.paths(s, d)]}))
            first = False
        out.write("\n]}\n")
