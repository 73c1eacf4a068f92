"""The ns-3 backend (no root): its addresses and routes send every connection along one of
the route table's paths for its pair, and a workload simulated packet by packet comes
back as the other backends' rows, every byte delivered."""
import pytest

from controller.routing import RouteTable
from testbed.core.records import LINK_FIELDS, ROW_FIELDS
from testbed.ns3.routes import plan
from topologies import fattree, roft, zcube
from traffic.types import Transfer

CASES = [(zcube(4, 4), "zcube"), (zcube(4, 4), "zcube-short"), (roft(4, 4), "ecmp"),
         (roft(4, 4), "spray:4"), (fattree(4), None)]


def _walk(p, fab, src_host, port, addr):
    """The nodes a packet to ``addr`` crosses from ``src_host`` by the planned routes."""
    first = fab.host(src_host).ports[port]
    node = next(peer for _, peer, _, link in fab.neighbors(src_host)
                if (link.a == src_host and link.a_port == first.index)
                or (link.b == src_host and link.b_port == first.index))
    hops = [src_host, node]
    while fab.is_switch(node):
        node = p.switch_routes[(node, addr)]
        hops.append(node)
        assert len(hops) < 10, hops
    return tuple(hops)


DOWN = {"zcube": "b3", "ecmp": "l0:6-s1:1", None: "g1:0"}   # a fault's table, rerouted


WALKS = [(f, p, False) for f, p in CASES] + [(f, p, True) for f, p in CASES if p in DOWN]


@pytest.mark.parametrize("fab,policy,failed", WALKS,
                         ids=[f"{f.label}-{p}" + ("-rerouted" if x else "") for f, p, x in WALKS])
def test_every_connection_follows_a_path_of_the_route_table(fab, policy, failed):
    from controller.failures import Failures
    table = RouteTable(fab, policy)
    if failed:
        table = table.with_failures(Failures.parse(fab, [DOWN[policy]]))
    p = plan(table)
    from controller.flows import path_addresses
    for (src_ip, dst_ip), cands in p.paths.items():
        for path, local, remote in cands:
            assert local == src_ip
            s = path[0]
            port = p.host_routes[(s, remote)]
            assert fab.host(s).ports[port].ip == src_ip
            assert _walk(p, fab, s, port, remote) == path       # data: exactly this path
            back = _walk(p, fab, path[-1], p.host_routes[(path[-1], src_ip)], src_ip)
            assert back[-1] == s                                 # acknowledgements arrive
            table_paths = {tuple(q) for q in table.paths(s, path[-1])
                           if path_addresses(fab, q)[:2] == (src_ip, dst_ip)}
            assert path in table_paths


def _work(transfers):
    from types import SimpleNamespace
    return SimpleNamespace(transfers=transfers, bytes_total=sum(t.bytes for t in transfers),
                           schedule=[], seed=1)


@pytest.fixture(scope="module")
def ns():
    pytest.importorskip("ns", reason="the ns3 package (make setup installs it)")
    from testbed.ns3.simulate import ns3
    return ns3()


def test_a_workload_comes_back_as_rows_with_every_byte(ns):
    from testbed.ns3.simulate import simulate
    fab = zcube(2, 2)
    table = RouteTable(fab, "zcube")
    size = 168_000
    work = _work([Transfer(0, "g0", "g3", size, 0.1), Transfer(1, "g1", "g2", size, 0.1),
                  Transfer(2, "g2", "g0", size, 0.6)])
    rows, links, summary, faults, drops = simulate(table, work, 100)
    assert all(set(ROW_FIELDS) <= set(r) for r in rows) and faults is None and drops == 0
    assert all(r["verified"] and r["bytes_received"] == size for r in rows)
    ideal_ms = size * 8 / 100e6 * 1000                # two 50 Mb/s ports, striped
    assert all(ideal_ms < r["fct_ms"] < 3 * ideal_ms for r in rows), rows
    assert rows[2]["first_byte_s"] >= 0.6
    assert set(links[0]) == set(LINK_FIELDS)
    up = sum(r["bytes"] for r in links if r["src"] == "g0")
    assert up >= size                                  # payload plus headers
    assert 0 < summary["max"] <= 1.0


def test_each_pair_alone_crosses_the_switches_of_one_of_its_paths(ns):
    """One transfer per ordered pair, each simulated alone on ROFT (ECMP): the links that
    sent its data are those of one of the table's paths for the pairing."""
    from controller.flows import path_addresses
    from testbed.ns3.simulate import simulate
    fab = roft(2, 2)
    table = RouteTable(fab, "ecmp")
    for s in fab.hosts:
        for d in fab.hosts:
            if s is d:
                continue
            rows, links, *_ = simulate(table, _work([Transfer(0, s.name, d.name, 50_000, 0.0)]),
                                      100)
            assert rows[0]["verified"]
            crossed = {(r["src"], r["dst"]) for r in links if r["bytes"] > 20_000}
            paths = [tuple(zip(p, p[1:])) for p in table.paths(s.name, d.name)
                     if path_addresses(fab, p)[:2] == (s.ports[0].ip, d.ports[0].ip)]
            assert any(crossed == set(p) for p in paths), (s.name, d.name, crossed)


def test_a_host_does_not_lose_its_own_bursts(ns):
    """Four connections sprayed from one NIC: no loss at the sender's own queue (a Linux
    host holds its packets back), so the transfer takes about its time at line rate, as
    one ECMP connection does (ns-3's 64-packet NIC queue and 1 s RTO made it 5x)."""
    from testbed.ns3.simulate import simulate
    fab = roft(4, 4)
    size, mbps = 1_000_000, 40
    line_ms = size * 8 / (mbps * 1e6) * 1000
    for policy, pieces in (("ecmp", 1), ("spray:4", 4)):
        rows, *_ = simulate(RouteTable(fab, policy),
                              _work([Transfer(0, "g0", "g5", size, 0.0)]), mbps)
        assert rows[0]["pairings"] == pieces and rows[0]["verified"]
        assert rows[0]["fct_ms"] < 1.15 * line_ms, (policy, rows[0]["fct_ms"])


TINY = """\
name: tiny
link_mbps: 100
repetitions: {reps}
fabrics:
  - {{name: zc, builder: zcube, params: {{n: 2}}, policy: zcube}}
  - {{name: rf, builder: roft, params: {{servers: 2, gpus_per_server: 2}}, policy: ecmp}}
deployment: {{prefill_tp: 2, decode_tp: 2, placements: [cross-rail]}}
workload: {{arrivals: poisson, rate: 8, count: 4, input_tokens: 4096}}
"""


def test_zcube_run_on_ns3_writes_what_compare_reads(ns, tmp_path, capsys, run_figures_match):
    import json

    from testbed.cli.main import main
    scen = tmp_path / "s.yaml"
    scen.write_text(TINY.format(reps=2) + "backend: ns3\n")
    out = tmp_path / "out"
    assert main(["run", str(scen), "--no-report", "-o", str(out)]) == 0
    assert "rf/zc" in capsys.readouterr().out
    for run in ("zc", "rf"):
        s = run_figures_match(out / run)
        assert s["backend"] == "ns3" and s["transfers_verified"] == s["transfers_total"] > 0
    assert json.loads((out / "run.json").read_text())["versions"]["ns3"]
    assert main(["compare", str(out / "zc"), str(out / "rf"), "--format", "json"]) == 0


def test_crossval_puts_ns3_beside_the_model_without_root(ns, tmp_path, capsys):
    import json

    from testbed.cli.main import main
    scen = tmp_path / "s.yaml"
    scen.write_text(TINY.format(reps=1))
    out = tmp_path / "cv"
    assert main(["crossval", str(scen), "--backends", "ns3,model", "--no-report",
                 "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "FCT, ns3 against model" in printed and "rf/zc" in printed
    doc = json.loads((out / "crossval.json").read_text())
    assert doc["reference"] == "ns3" and doc["model_options"] == {}    # no emulator to model
    for r in doc["runs"]:
        ns3 = json.loads((out / "ns3" / r["run"] / "summary.json").read_text())
        mod = json.loads((out / "model" / r["run"] / "summary.json").read_text())
        assert (ns3["backend"], mod["backend"]) == ("ns3", "model")
        assert r["ns3_p99_ms"] == ns3["fct_ms"]["p99"] and r["faithful"] is None
        assert r["model_error_p99"] == round(mod["fct_ms"]["p99"] / ns3["fct_ms"]["p99"] - 1,
                                             4)
    assert set(doc["within"]) == {"model"}
    for bad in ("ns3", "ns3,ns3", "ns3,htsim"):
        with pytest.raises(SystemExit) as exited:
            main(["crossval", str(scen), "--backends", bad])
        err = capsys.readouterr().err
        assert exited.value.code == 2 and "--backends" in err and len(err.splitlines()) == 1


def test_the_even_split_over_every_path_is_refused_in_one_line(capsys, tmp_path):
    from testbed.cli.main import main
    assert main(["run", "production", "--backend", "ns3", "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "use spray:K on the ns3 backend" in err
    assert not (tmp_path / "o").exists()


def test_kept_open_connections_post_in_order_at_line_rate_on_one_path(ns):
    """``pool`` (the default): a pairing's transfers go one after another on one connection
    opened before the first, pinned to one path; ``tcp-per-transfer``: each its own."""
    from testbed.ns3.simulate import simulate
    table = RouteTable(roft(4, 4), "ecmp")
    size, mbps = 500_000, 100
    line_ms = size * 8 / (mbps * 1e6) * 1000
    two = _work([Transfer(0, "g0", "g5", size, 0.0), Transfer(1, "g0", "g5", size, 0.0)])
    pool = simulate(table, two, mbps).rows
    own = simulate(table, two, mbps, transport="tcp-per-transfer").rows
    assert all(r["verified"] for r in pool + own)
    assert pool[1]["fct_ms"] > 1.8 * pool[0]["fct_ms"]              # in order
    assert pool[1]["first_byte_s"] >= pool[0]["end_s"] - 0.002
    assert abs(own[1]["fct_ms"] - own[0]["fct_ms"]) < 0.3 * own[0]["fct_ms"]   # together
    late = _work([Transfer(0, "g0", "g5", size, 0.0), Transfer(1, "g0", "g5", size, 1.0),
                  Transfer(2, "g0", "g5", size, 2.0)])
    got = simulate(table, late, mbps)
    assert got.rows[2]["fct_ms"] < 1.1 * line_ms                     # no handshake, no ramp
    spines = [{x["dst"] for x in got.links if x["src"] == "l0" and x["dst"].startswith("s")
               and x["bytes"] > size / 2 and w < x["t_s"] <= w + 0.5} for w in (0.0, 1.0, 2.0)]
    assert len(spines[0]) == 1 and spines[0] == spines[1] == spines[2], spines


@pytest.mark.parametrize("transport", ["pool", "tcp-per-transfer"])
def test_bench_ns3_runs_on_a_small_fabric(ns, transport, capsys):
    import re

    from benchmarks import bench_ns3
    bench_ns3.main(["--fabrics", "zcube:2", "--count", "4", "--transport", transport])
    out = capsys.readouterr().out
    (done, total), = re.findall(r"(\d+)/(\d+)\s+target [^:]*: met$", out.split("\n")[2])
    assert done == total and int(total) > 0, out
    assert "peak memory" in out


@pytest.mark.parametrize("buffer_ms", [4, None])
def test_buffer_ms_sizes_every_switch_port_queue_in_time_at_its_rate(ns, buffer_ms):
    """A scenario's ``buffer_ms`` reaches ns-3 as the emulation takes it: every switch
    port's queue holds that many ms at its rate (hosts' NIC queues stay as they are).
    Without it, a switch port holds the bytes of the emulation's 64-packet FIFO at its
    hosts' 64 KB segments, not 64 of ns-3's one-MTU packets."""
    from testbed.ns3.simulate import HOST_QUEUE_PACKETS, QUEUE_BYTES, _Network, queue_bytes
    fab = zcube(2, 2)
    net = _Network(ns, RouteTable(fab, "zcube"), 100, buffer_ms=buffer_ms)
    assert QUEUE_BYTES == 64 * 64 * 1024
    try:
        for (u, v), devs in net.out.items():
            bps = net.capacity[(u, v)] * 1e6 / len(devs)
            switch = f"{queue_bytes(bps, 4)}B" if buffer_ms else f"{QUEUE_BYTES}B"
            want = switch if fab.is_switch(u) else f"{HOST_QUEUE_PACKETS}p"
            for dev, _ in devs:
                q = dev.GetObject[ns.PointToPointNetDevice]().GetQueue()
                assert str(q.GetMaxSize()) == want, (u, v)
        assert queue_bytes(50e6, 4) == 25_000
    finally:
        ns.Simulator.Destroy()


def test_the_session_hands_simulate_the_scenarios_transport_and_buffer(monkeypatch):
    import testbed.ns3.simulate as sim
    from testbed.core.backend import SessionOptions
    from testbed.ns3.backend import Ns3Session
    seen = {}

    def fake(table, work, mbps, routes, faults, transport, buffer_ms):
        seen.update(mbps=mbps, transport=transport, buffer_ms=buffer_ms, faults=faults)
        return sim.Simulated([], [], None, None)
    monkeypatch.setattr(sim, "simulate", fake)
    sess = Ns3Session(zcube(2, 2), "zcube", SessionOptions(
        link_mbps=40, transport="tcp-per-transfer", buffer_ms=3.0))
    sess.run(_work([]))
    assert seen == {"mbps": 40, "transport": "tcp-per-transfer", "buffer_ms": 3.0,
                    "faults": None}
    assert "connection per piece" in sess.info["ns3"]["transport"]
