"""How a transfer is split over the NIC port pairings its routes use (pure)."""
from controller.pairings import flows_for
from controller.routing import RouteTable
from topologies import roft, zcube


def test_zcube_stripes_half_over_p1_and_half_over_p2():
    fab = zcube(4, 4)
    flows = flows_for(RouteTable(fab, "zcube"), "g0", "g5", 1001)
    g0, g5 = fab.host("g0"), fab.host("g5")
    p1, p2 = [g0.ports[0].ip, g5.ports[1].ip], [g0.ports[1].ip, g5.ports[0].ip]
    rest = [[g0.ports[0].ip, g5.ports[0].ip], [g0.ports[1].ip, g5.ports[1].ip]]
    # each pairing is the other's first alternate when its connection dies (a dead NIC port)
    assert flows == [{"src": p1[0], "dst": p1[1], "bytes": 501, "alternates": [p2] + rest},
                     {"src": p2[0], "dst": p2[1], "bytes": 500, "alternates": [p1] + rest}]


def test_zcube_short_sends_a_rail_aligned_pair_over_its_shortcut_alone():
    fab = zcube(4, 4)
    flows = flows_for(RouteTable(fab, "zcube-short"), "g0", "g4", 1000)     # both on b0
    g0, g4 = fab.host("g0"), fab.host("g4")
    assert flows == [{"src": g0.ports[1].ip, "dst": g4.ports[1].ip, "bytes": 1000,
                      "alternates": [[g0.ports[0].ip, g4.ports[0].ip],
                                     [g0.ports[0].ip, g4.ports[1].ip],
                                     [g0.ports[1].ip, g4.ports[0].ip]]}]


def test_roft_uses_its_one_port():
    fab = roft(4, 4)
    flows = flows_for(RouteTable(fab, "ecmp"), "g0", "g7", 10)
    assert flows == [{"src": fab.host("g0").ports[0].ip, "dst": fab.host("g7").ports[0].ip,
                      "bytes": 10, "alternates": []}]
