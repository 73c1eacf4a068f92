"""The workload's transfers on a simulated network: split into pieces as the emulation splits
them, each on a connection of its own or posted on its pairing's kept-open connection,
moved off dead paths on faults, and returned as transfers.csv rows."""
from __future__ import annotations

from controller.flows import path_addresses
from controller.pairings import flows_for
from controller.relay import inside_server
from testbed.core.ecmp import connection_key, ecmp_choice, ecmp_salt
from testbed.core.records import transfer_row
from testbed.ns3.pool import Pool
from topologies.nvlink import network_part

# a transfer over NVLink alone gets the goodput share one TCP flow gets of a NIC (the
# model's efficiency), so the backends agree on it
NVLINK_GOODPUT = 0.954


def ends(fab, path) -> tuple[str, str]:
    """The GPUs a connection over ``path`` runs between: those whose NICs it crosses the
    fabric between (a sibling of the source or destination, where it hands over NVLink;
    the hand-over itself is not simulated, NVLink being nine times a NIC)."""
    net = network_part(fab, path)
    return net[0], net[-1]


class TransferSender:
    def __init__(self, net, work, transport: str):
        self.net, self.ns, self.work, self.transport = net, net.ns, work, transport
        self.pieces: list[dict] = []
        self.pool = Pool(net) if transport == "pool" else None
        self.to_post: list[dict] = []    # pool pieces not yet posted, by ready time
        self.opening: dict = {}          # (pairing, lane) -> what its connection opens with

    def plan(self) -> None:
        """Every transfer's pieces (on the table the hosts know at its start, when there are
        faults): started at their ready times, or queued to be posted then."""
        salt, tl, net = ecmp_salt(self.work), self.net.timeline, self.net
        for ti, t in enumerate(self.work.transfers):
            epoch = tl.epoch_at(t.ready_s) if tl else 0
            table = tl.tables[epoch] if tl else net.table
            paths = tl.plans[epoch].paths if tl else net.plan.paths
            try:
                flows = flows_for(table, t.src, t.dst, t.bytes)
            except ValueError:               # cut off: on its own paths all the same, as
                epoch, table, paths = 0, net.table, net.plan.paths   # an agent posts it
                flows = flows_for(table, t.src, t.dst, t.bytes)
            avoided = epoch > 0 and ({(f["src"], f["dst"]) for f in flows} != {
                (f["src"], f["dst"]) for f in flows_for(net.table, t.src, t.dst, 1)})
            if inside_server(net.fab, t.src, t.dst) is not None:
                self.pieces.append(self._over_nvlink(ti))
                continue
            for k, f in enumerate(flows):
                if f["bytes"] <= 0:
                    continue
                cands, pairing = paths[(f["src"], f["dst"])], (f["src"], f["dst"])
                key = connection_key(t, k, self.transport, salt)
                if self.pool is None:
                    self.start(ti, f["bytes"], cands[ecmp_choice(key, len(cands))], t.ready_s,
                               key=key, avoided=avoided, moved=False)
                    continue
                lane = f.get("lane", 0)
                self.opening.setdefault((pairing, lane), (*ends(net.fab, cands[0][0]), cands,
                                                          key))
                piece = {"ti": ti, "n": f["bytes"], "pairing": pairing, "lane": lane,
                         "ready": t.ready_s, "kept": None, "key": key, "avoided": avoided,
                         "moved": False, "pooled": True}
                self.pieces.append(piece)
                self.to_post.append(piece)
        self.to_post.sort(key=lambda p: p["ready"])

    def open_pool(self) -> None:
        """The kept-open connections, opened before the first transfer (at time 0)."""
        for (pairing, lane), (src, dst, cands, key) in self.opening.items():
            self.pool.open(src, dst, pairing, lane, cands, key)

    def next_post_s(self) -> float | None:
        return self.to_post[0]["ready"] if self.to_post else None

    def post_due(self, now: float) -> None:
        while self.to_post and self.to_post[0]["ready"] <= now + 1e-9:
            self.pool.send(self.to_post.pop(0))

    def start(self, ti: int, nbytes: int, cand: tuple, at_s: float | None, **extra) -> dict:
        """A connection of its own sending ``nbytes`` of transfer ``ti`` over ``cand``
        (path, local address, remote address), started at ``at_s`` (None: now)."""
        ns, tcp, net = self.ns, "ns3::TcpSocketFactory", self.net
        path, local, remote = cand
        src, dst = ends(net.fab, path)
        port, sink = net.sink(dst)
        bulk = ns.BulkSendHelper(tcp, ns.InetSocketAddress(
            ns.Ipv4Address(remote), port).ConvertTo())
        bulk.SetAttribute("MaxBytes", ns.UintegerValue(nbytes))
        bulk.SetAttribute("SendSize", ns.UintegerValue(65536))
        bulk.SetAttribute("Local", ns.AddressValue(ns.InetSocketAddress(
            ns.Ipv4Address(local), 0).ConvertTo()))
        bulk.Install(net.node[src]).Start(ns.Seconds(0.0 if at_s is None else at_s))
        piece = {"ti": ti, "n": nbytes, "sink": sink,
                 "port": port, "path": path, "pairing": path_addresses(net.fab, path)[:2],
                 "ready": net.now() if at_s is None else at_s, "kept": None, **extra}
        self.pieces.append(piece)
        return piece

    def _over_nvlink(self, ti: int) -> dict:
        """Transfer ``ti`` between two GPUs of one server: over their NVLink alone, at its
        rate with the NICs' goodput share, not packet by packet (no fabric link carries
        it, and nine times a NIC it waits for nothing else here)."""
        t, fab = self.work.transfers[ti], self.net.fab
        bps = fab.nvlink_gbps * 1e9 * fab.scale_for(self.net.link_mbps) * NVLINK_GOODPUT
        return {"ti": ti, "n": t.bytes, "kept": None, "ready": t.ready_s,
                "nvlink": (t.ready_s, t.ready_s + t.bytes * 8 / bps)}

    def rx(self, p: dict) -> int:
        """Bytes of piece ``p`` its receiver has."""
        if "nvlink" in p:
            return p["n"]
        return Pool.rx(p) if p.get("pooled") else int(p["sink"].GetTotalRx())

    def times(self, p: dict, flows: dict) -> tuple | None:
        """(first, last) byte of piece ``p`` received (``flows``: the flow monitor's, by
        destination port)."""
        if "nvlink" in p:
            return p["nvlink"]
        return Pool.times(p) if p.get("pooled") else flows.get(p["port"])

    def done(self) -> bool:
        return not self.to_post and all(p["kept"] is not None or self.rx(p) >= p["n"]
                                        for p in self.pieces)

    def move(self, tl, epoch: int, now: float) -> int:
        """Pieces in flight on paths that died continue from the byte their receiver has,
        over connections of their own (:mod:`testbed.ns3.faults`), and kept-open
        connections on dead paths are replaced; how many pieces moved to another pairing."""
        damage, moved = tl.damage[epoch], 0
        if damage is None:
            return 0
        flows = self.net.rx_times()
        for piece in list(self.pieces):
            if (piece["kept"] is not None or piece["ready"] > now or "path" not in piece
                    or damage.path_ok(piece["path"])):
                continue
            rx = self.rx(piece)
            t = self.work.transfers[piece["ti"]]
            cands = tl.candidates(epoch, t.src, t.dst, piece["pairing"])
            if rx >= piece["n"] or not cands:
                continue                     # done, or cut off: it waits, as TCP does
            piece["kept"] = rx               # what the receiver counts of it, from now on
            key = f"{piece['key']}>{epoch}"
            was = self.times(piece, flows)
            new = self.start(piece["ti"], piece["n"] - rx, cands[ecmp_choice(key, len(cands))],
                             None, key=key, avoided=piece["avoided"],
                             since=was[1] if was else now)
            new["moved"] = new["pairing"] != piece["pairing"]
            moved += new["moved"]
        if self.pool is not None:
            for (pairing, _), conn in list(self.pool.conns.items()):
                if not damage.path_ok(conn["path"]):
                    self.pool.replace(conn, tl.plans[epoch].paths.get(pairing) or [], epoch)
        return moved

    def rows(self) -> list[dict]:
        """transfers.csv rows, made as every backend makes them (a piece left on a dead
        path counts what its receiver had then; its successor sends the rest)."""
        flows = self.net.rx_times()
        by_transfer: dict = {}
        for p in self.pieces:
            by_transfer.setdefault(p["ti"], []).append(
                (p, self.rx(p) if p["kept"] is None else p["kept"], self.times(p, flows)))
        return [_row(t, by_transfer.get(ti, [])) for ti, t in enumerate(self.work.transfers)]


def _row(t, mine: list) -> dict:
    """One transfer's row from its pieces ``(piece, bytes received, (first, last) or None)``:
    every piece is posted at the transfer's ready time, so it starts then."""
    final = [(p, rx, tm) for p, rx, tm in mine if p["kept"] is None]
    got = sum(rx for _, rx, _ in mine)
    ok = bool(final) and got == t.bytes and all(rx == p["n"] and tm for p, rx, tm in final)
    first = min((tm[0] for _, _, tm in mine if tm), default=None)
    end = max((tm[1] for _, _, tm in final if tm), default=None)
    again = [tm[0] for p, _, tm in mine if p.get("moved") and tm]
    gaps = [(tm[0] - p["since"], tm[0]) for p, _, tm in mine
            if p.get("since") is not None and not p.get("moved") and tm]
    gap = max(gaps, default=None)

    def r(x):
        return None if x is None else round(x, 6)
    return transfer_row(
        t, pairings=sum(1 for p, _, _ in mine if "since" not in p), start=t.ready_s,
        first_byte=first, end=end if ok else None, bytes_received=got, verified=ok,
        status="ok" if ok else "incomplete", attempts=2 if again else 1,
        retry_first_byte_s=r(max(again)) if again else None,
        avoided=any(p.get("avoided") for p, _, _ in mine),
        moves=sum(1 for p, _, _ in mine if p.get("moved")),
        gap_s=None if gap is None else r(gap[0]), gap_end_s=None if gap is None else r(gap[1]))
