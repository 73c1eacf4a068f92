"""The calibration's per-path flows run at once only when their paths share no directed
hop, and an iperf3 server counts as ready once its socket listens (no root)."""
import os
import socket
from types import SimpleNamespace

from controller.routing import RouteTable
from testbed.emulation.calibrate import _disjoint, _listens, _wait_listening, per_path_flows
from topologies import zcube


def _hops(table, fab, item):
    from controller.flows import path_addresses
    (s, d, src_ip, dst_ip), _ = item
    return {(p[i], p[i + 1]) for p in table.paths(s, d)
            if path_addresses(fab, p)[:2] == (src_ip, dst_ip) for i in range(len(p) - 1)}


def test_zcubes_two_planes_are_measured_at_once_and_shortcuts_apart():
    fab = zcube(4, 4)
    plain = RouteTable(fab, "zcube")
    groups = _disjoint(plain, fab, per_path_flows(plain, fab))
    assert [[key for _, key in g] for g in groups] == [[(0, 1, 0), (1, 0, 0)]]
    short = RouteTable(fab, "zcube-short")
    todo = per_path_flows(short, fab)
    groups = _disjoint(short, fab, todo)
    assert sorted(key for g in groups for _, key in g) == sorted(key for _, key in todo)
    assert len(groups) > 1                    # a shortcut shares its source's first hop
    for g in groups:                          # within a group, no hop is shared
        for i, a in enumerate(g):
            for b in g[i + 1:]:
                assert not _hops(short, fab, a) & _hops(short, fab, b)


def test_a_server_is_ready_once_its_socket_listens():
    with socket.socket(socket.AF_INET6) as sock:
        sock.bind(("::", 0))
        port = sock.getsockname()[1]
        assert not _listens(os.getpid(), port)            # bound, not yet listening
        sock.listen()
        assert _listens(os.getpid(), port)
        emu = SimpleNamespace(host_pid=lambda host: os.getpid())
        _wait_listening(emu, [("g0", port)], timeout=1.0)  # returns at once
    assert not _listens(os.getpid(), port)
