"""RoCEv2 probes on an emulated fabric, captured and decoded by tshark."""
import shutil
import subprocess

import pytest

from testbed.emulation.roce_probe import roce_probe
from topologies import zcube


def test_roce_probes_cross_both_zcube_pairings_and_tshark_decodes_them(emulate, tmp_path):
    if not shutil.which("tshark"):
        pytest.fail("tshark missing: make setup installs it")
    emu = emulate(zcube(4, 4), policy="zcube")
    results = roce_probe(emu, "g0", "g5", str(tmp_path), count=5)
    assert [r["pairing"] for r in results] == ["0->1", "1->0"]
    for r in results:
        assert r["received"] == r["sent"] == 5
        # the path read from the switches' port counters is the one the table computed
        assert r["path"] and [r["path"]] == r["computed"], (r["path"], r["computed"])
        assert 0 < r["latency_ms"]["p50"] <= r["latency_ms"]["max"] < 1000
        out = subprocess.run(["tshark", "-r", r["pcap"], "-T", "fields", "-e", "udp.dstport",
                              "-e", "infiniband.bth.opcode", "-e", "infiniband.bth.psn",
                              "-e", "ip.dst"], capture_output=True, text=True, check=True)
        rows = [line.split("\t") for line in out.stdout.split("\n") if line]
        assert rows == [["4791", "100", str(psn), r["dst_ip"]] for psn in range(5)]


def test_roce_probes_show_which_ecmp_path_roft_took(emulate, tmp_path):
    from topologies import roft
    emu = emulate(roft(4, 4), policy="ecmp")
    (r,) = roce_probe(emu, "g0", "g5", str(tmp_path), count=7)     # across rails: 3 switches
    assert r["received"] == 7 and len(r["computed"]) == 4            # four spines to choose from
    assert r["path"] in r["computed"] and len(r["path"]) == 5
