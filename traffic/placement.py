"""Where prefill and decode instances sit on a fabric (:data:`PLACEMENTS`), and so which GPU
pairs send the KV cache and whether it stays on one rail."""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from fractions import Fraction

from topologies.fabric import Fabric
from traffic.models import get_model

PLACEMENTS = ("aligned", "cross-rail", "random", "packed")   # the default first
ROLES = ("prefill", "decode")


@dataclass(frozen=True)
class Instance:
    """One prefill or decode instance: its GPUs (host names) in TP-rank order.
    ``tp`` is ``len(gpus)``; it may be left out, and if given must agree."""
    role: str
    index: int
    gpus: tuple[str, ...]
    tp: int | None = None

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"instance role must be one of {', '.join(ROLES)}, got {self.role!r}")
        gpus = tuple(self.gpus)
        if not gpus or len(set(gpus)) != len(gpus):
            raise ValueError(f"instance gpus must be distinct and non-empty, got {gpus!r}")
        if self.tp is not None and self.tp != len(gpus):
            raise ValueError(f"instance tp={self.tp} does not match its {len(gpus)} gpus")
        object.__setattr__(self, "gpus", gpus)
        object.__setattr__(self, "tp", len(gpus))


@dataclass
class Deployment:
    """The instances :func:`deploy` placed, and the placement policy that placed them."""
    prefill: list[Instance]
    decode: list[Instance]
    placement: str

    def to_dict(self) -> dict:
        """Plain JSON-ready data (gpus as lists)."""
        def one(i: Instance) -> dict:
            return {**asdict(i), "gpus": list(i.gpus)}
        return {"placement": self.placement, "prefill": [one(i) for i in self.prefill],
                "decode": [one(i) for i in self.decode]}


def _whole(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return value


def deploy(fabric: Fabric, prefill_tp: int, decode_tp: int, prefill_instances: int | None = None,
           decode_instances: int | None = None, placement: str = "aligned",
           seed: int = 0) -> Deployment:
    """Place prefill and decode instances, each tensor-parallel over ``tp`` GPUs, on
    ``fabric``: ``packed`` takes consecutive GPUs, prefill first; ``aligned`` puts prefill on
    the first servers and decode on the last, TP rank ``i`` on local rank ``i``, so rank i ->
    rank i stays on one rail; ``cross-rail`` is aligned with decode rank ``i`` on local rank
    ``i + 1``, so every transfer changes rail; ``random`` is a seeded choice.  Under aligned
    and cross-rail an instance smaller than a server owns that server.

    A count left as None is as many instances as fit: in half the fabric when both are None
    (a 1:1 ratio of prefill to decode GPUs; halves are whole servers under aligned and
    cross-rail), in what the other role leaves when only one is given.  Refuses, naming the
    parameter, what does not fit or a tp the placement cannot lay out.
    """
    ptp, dtp = _whole("prefill_tp", prefill_tp), _whole("decode_tp", decode_tp)
    if placement not in PLACEMENTS:
        raise ValueError(f"placement must be one of {', '.join(PLACEMENTS)}, got {placement!r}")
    _whole("seed", seed, 0)
    if not fabric.hosts:
        raise ValueError(f"fabric {fabric.name} has no GPUs to place instances on")
    hosts = sorted(fabric.hosts, key=lambda h: h.index)
    by_rail = placement in ("aligned", "cross-rail")
    if by_rail:
        servers = _servers_by_rank(fabric, placement, ptp, dtp)
        gps = len(servers[0])
        units, total = (lambda tp: _servers_for(tp, gps)), len(servers)   # whole servers
    else:
        units, total = (lambda tp: tp), len(hosts)                       # single GPUs
    need = {"prefill": (ptp, units(ptp)), "decode": (dtp, units(dtp))}
    count = {"prefill": prefill_instances, "decode": decode_instances}
    np_, nd = _instance_counts(need, count, total, "servers" if by_rail else "GPUs", placement)
    if by_rail:
        prefill, decode = _lay_by_rail(servers, np_, ptp, nd, dtp,
                                       shift=int(placement == "cross-rail"))
    else:
        names = [h.name for h in hosts]
        if placement == "random":
            names = random.Random(seed).sample(names, np_ * ptp + nd * dtp)
        prefill, decode = _lay_in_order(names, np_, ptp, nd, dtp)
    return Deployment(prefill, decode, placement)


def _servers_for(tp: int, gps: int) -> int:
    """Whole servers an instance of ``tp`` GPUs takes under aligned and cross-rail."""
    return -(-tp // gps)


def _servers_by_rank(fabric: Fabric, placement: str, ptp: int, dtp: int) -> list[list]:
    """Every server's GPUs in local-rank order, servers in order; refuses a fabric or a tp
    that aligned and cross-rail cannot lay out."""
    servers = [sorted(hs, key=lambda h: h.rank) for _, hs in sorted(fabric.servers().items())]
    gps = len(servers[0])
    if any([h.rank for h in hs] != list(range(gps)) for hs in servers):
        raise ValueError(f"placement={placement} needs every server to hold local ranks "
                         f"0..{gps - 1}; this {fabric.kind} fabric does not")
    if placement == "cross-rail" and gps < 2:
        raise ValueError("placement=cross-rail needs at least 2 GPUs per server")
    for name, tp in (("prefill_tp", ptp), ("decode_tp", dtp)):
        if tp > gps and tp % gps:
            raise ValueError(f"{name}={tp} must be at most gpus_per_server={gps} or a "
                             f"multiple of it for placement={placement}")
    return servers


def _instance_counts(need: dict, count: dict, total: int, what: str,
                     placement: str) -> tuple[int, int]:
    """``(prefill, decode)`` instance counts.  ``need`` is per role ``(tp, units one
    instance takes)``, ``count`` per role the count asked for or None (as many as fit),
    ``total`` the units (``what``: servers or GPUs) the fabric has."""
    count = dict(count)
    given = {r: _whole(f"{r}_instances", c) for r, c in count.items() if c is not None}
    used = sum(c * need[r][1] for r, c in given.items())
    if used > total:
        asked = " and ".join(f"{r}_instances={c} x {r}_tp={need[r][0]}" for r, c in given.items())
        raise ValueError(f"{asked} need {used} {what}; the fabric has {total} "
                         f"(placement={placement})")
    for r in ROLES:
        if r not in given:   # as many as fit: in half the fabric, or in what the other leaves
            room = total // 2 if not given else total - used
            count[r] = room // need[r][1]
            if count[r] < 1:
                raise ValueError(f"{r}_tp={need[r][0]} leaves no room for a {r} instance in "
                                 f"{room} of {total} {what} (placement={placement})")
    return count["prefill"], count["decode"]


def _lay_by_rail(servers: list[list], np_: int, ptp: int, nd: int, dtp: int,
                 shift: int) -> tuple[list[Instance], list[Instance]]:
    """Prefill instances from the first server on, decode instances on the last servers,
    each on whole servers; TP rank i on local rank i (prefill) or (i + shift) mod
    gpus_per_server (decode)."""
    gps = len(servers[0])

    def lay(role, n, tp, first_server, shift):
        """n instances from first_server on; TP rank i on local rank (i + shift) mod gps."""
        units = _servers_for(tp, gps)
        return [Instance(role, k, tuple(
            servers[first_server + k * units + i // gps][(i + shift) % gps].name
            for i in range(tp))) for k in range(n)]
    return (lay("prefill", np_, ptp, 0, 0),
            lay("decode", nd, dtp, len(servers) - nd * _servers_for(dtp, gps), shift))


def _lay_in_order(names: list[str], np_: int, ptp: int, nd: int,
                  dtp: int) -> tuple[list[Instance], list[Instance]]:
    """Instances on consecutive GPUs of ``names``, prefill first."""
    prefill = [Instance("prefill", k, names[k * ptp:(k + 1) * ptp]) for k in range(np_)]
    off = np_ * ptp
    decode = [Instance("decode", k, names[off + k * dtp:off + (k + 1) * dtp])
              for k in range(nd)]
    return prefill, decode


def _heads(rank: int, tp: int, heads: int) -> range:
    """KV heads held by TP rank ``rank``: an even share when tp <= heads, else one head,
    replicated on tp / heads consecutive ranks (the usual tensor-parallel rule)."""
    if tp <= heads:
        share = heads // tp
        return range(rank * share, (rank + 1) * share)
    h = rank * heads // tp
    return range(h, h + 1)


def kv_layout(model, p: Instance, d: Instance,
              mla_senders: int = 1) -> list[tuple[str, str, float]]:
    """``(src GPU, dst GPU, fraction)`` for one request's KV moving from ``p`` to ``d``.

    A fraction is of one full copy of the request's KV bytes (``models.kv_bytes``).

    * GQA: KV heads are split evenly over the TP ranks on both sides (tp must divide
      kv_heads, or kv_heads divide tp, in which case each head is replicated on tp/kv_heads
      ranks).  Decode rank j receives exactly the heads of its shard, each from a prefill rank
      holding it (among replicas, the one with index j mod replicas, so equal TP maps rank j
      to rank j).  When both tp <= kv_heads one full copy moves: fractions sum to 1; with
      replicated decode heads they sum to decode_tp / kv_heads.
    * MLA: the latent is identical on every rank and every decode rank needs a full copy;
      the first ``mla_senders`` prefill ranks send it, each an equal share of every decode
      rank's copy.  Fractions sum to decode tp.
    """
    m = get_model(model)
    if p.role != "prefill" or d.role != "decode":
        raise ValueError(f"kv_layout goes from a prefill to a decode instance, got "
                         f"{p.role} -> {d.role}")
    shared = set(p.gpus) & set(d.gpus)
    if shared:
        raise ValueError(f"GPU {sorted(shared)[0]} is in both instances; a GPU cannot be both")
    out: dict = {}
    if m.attention == "mla":
        s = _whole("mla_senders", mla_senders)
        if s > p.tp:
            raise ValueError(f"mla_senders={s} exceeds the prefill tp={p.tp}")
        for dst in d.gpus:
            for src in p.gpus[:s]:
                out[(src, dst)] = Fraction(1, s)
    else:
        h = m.kv_heads
        for name, tp in (("prefill tp", p.tp), ("decode tp", d.tp)):
            if (h % tp if tp <= h else tp % h):
                raise ValueError(f"{name}={tp} and kv_heads={h} of {m.name}: one must divide "
                                 f"the other to shard the KV heads")
        for j, dst in enumerate(d.gpus):
            for head in _heads(j, d.tp, h):
                holders = [i for i in range(p.tp) if head in _heads(i, p.tp, h)]
                key = (p.gpus[holders[j % len(holders)]], dst)
                out[key] = out.get(key, 0) + Fraction(1, h)
    return [(src, dst, float(f)) for (src, dst), f in out.items()]
