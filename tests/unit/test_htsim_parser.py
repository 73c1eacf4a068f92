"""The htsim export read as csg-htsim reads it.  csg-htsim (github.com/Broadcom/csg-htsim) is
in no package registry, so CI cannot build it; :func:`load` follows its parser rule for rule
(``sim/datacenter/connection_matrix.cpp``, ``ConnectionMatrix::load(istream&)``):

* a line is split on single spaces; an empty line or one starting with ``#`` is skipped;
* header lines ``Nodes N`` and ``Connections M`` (``stoi``) come before the first line whose
  first token holds ``->``;
* a connection line is ``SRC->DST`` (``stoi`` of each side) followed by key-value pairs; the
  keys used here are ``start`` (``stof``: a 32-bit float, kept as picoseconds) and ``size``
  (``stoi``); any other token than the keys it knows ends the program, and so does a line
  with neither ``start`` nor ``trigger``.

What the binaries then do with ``start`` (their ``main_*.cpp``): ``htsim_eqds``,
``htsim_ndp``, ``htsim_roce`` and ``htsim_hpcc`` pass it to ``connect`` as picoseconds;
``htsim_swift`` passes ``timeFromUs((uint32_t)crt->start)``, microseconds.
"""
import struct

import pytest

from testbed.experiment import scenario
from testbed.experiment.runner import requests_for, workload_for
from traffic.htsim import MAX_SIZE, READERS, htsim_lines

INT32 = (-2 ** 31, 2 ** 31 - 1)
KNOWN = {"start", "size", "id", "addon", "trigger", "send_done_trigger", "recv_done_trigger",
         "prio"}


def stoi(text: str) -> int:
    """C++ ``std::stoi``: leading whitespace, a sign, digits; the rest ignored; throws on no
    digits or out of int range."""
    body = text.lstrip()
    digits = len(body) - len(body.lstrip("+-"))
    n = digits
    while n < len(body) and body[n].isdigit():
        n += 1
    if n == digits or digits > 1:
        raise ValueError(f"stoi: no conversion of {text!r}")
    value = int(body[:n])
    if not INT32[0] <= value <= INT32[1]:
        raise OverflowError(f"stoi: {text!r} out of range")
    return value


def stof(text: str) -> float:
    """C++ ``std::stof`` on a plain decimal: the value rounded to a 32-bit float."""
    return struct.unpack("f", struct.pack("f", float(text)))[0]


def load(lines: list[str]) -> tuple[int, int, list[dict]]:
    """(nodes, connections announced, connections) as csg-htsim's loader reads them."""
    nodes = announced = 0
    conns = []
    header = True
    for line in lines:
        tokens = line.split(" ")
        if not line or tokens[0].startswith("#"):
            continue
        if header and "->" not in tokens[0]:
            if tokens[0] == "Nodes":
                nodes = stoi(tokens[1])
            elif tokens[0] == "Connections":
                announced = stoi(tokens[1])
            continue
        header = False
        src, dst = tokens[0].split("->", 1)
        c = {"src": stoi(src), "dst": stoi(dst), "start": None}
        i = 1
        while i < len(tokens):
            key = tokens[i]
            if key not in KNOWN:
                raise ValueError(f"Error: unknown token: {key}")
            if key == "start":
                c["start"] = stof(tokens[i + 1])
            elif key == "size":
                c["size"] = stoi(tokens[i + 1])
            i += 1 if key == "addon" else 2
        if c["start"] is None:
            raise ValueError("Error: no start method specified for flow")
        conns.append(c)
    return nodes, announced, conns


def start_ps(conn: dict, binary: str) -> float:
    """When ``binary`` starts the connection, in picoseconds."""
    if binary == "htsim_swift":
        return (int(conn["start"]) & 0xFFFFFFFF) * 1e6            # timeFromUs((uint32_t)x)
    return conn["start"]


@pytest.fixture(scope="module")
def demo():
    sc = load_scenario()
    fab = sc.fabrics[0].build()
    reqs, _ = requests_for(sc, sc.seed)
    return fab, workload_for(sc, fab, sc.placements[0], sc.seed, reqs)


def load_scenario():
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    return scenario.load(os.path.join(here, "..", "..", "scenarios", "demo.yaml"))


@pytest.mark.parametrize("unit, binaries", [("ps", READERS["ps"]), ("us", READERS["us"])])
def test_each_binary_starts_the_demos_flows_at_their_intended_times(demo, unit, binaries):
    fab, work = demo
    nodes, announced, conns = load(htsim_lines(work, fab, unit))
    assert (nodes, announced, len(conns)) == (len(fab.hosts), len(work.transfers),
                                              len(work.transfers))
    want = sorted((t.ready_s * 1e12, int(t.src[1:]), int(t.dst[1:]), t.bytes)
                  for t in work.transfers)
    for binary in binaries.split(", "):
        got = sorted((start_ps(c, binary), c["src"], c["dst"], c["size"]) for c in conns)
        for (g, *gk), (w, *wk) in zip(got, want):
            assert gk == wk
            # within the float's precision (ps) or a microsecond's rounding (us)
            assert abs(g - w) <= max(w * 2 ** -23, 0.5e6 if unit == "us" else 1), binary
    # spread over the run, not bunched at its start (what a us file fed to htsim_eqds gave)
    assert max(w for w, *_ in want) > 0.5e12


def test_a_microsecond_file_read_as_picoseconds_starts_everything_at_once(demo):
    fab, work = demo
    _, _, conns = load(htsim_lines(work, fab, "us"))
    assert max(start_ps(c, "htsim_eqds") for c in conns) < 1e7       # all within 10 us


@pytest.mark.parametrize("line, why", [
    ("0->1 start 5 size 10 colour red", "unknown token"),
    ("0->1 size 10", "no start"),
    (f"0->1 start 5 size {MAX_SIZE + 1}", "out of range"),
])
def test_the_parser_rules_have_teeth(line, why):
    with pytest.raises((ValueError, OverflowError), match=why):
        load(["Nodes 2", "Connections 1", line])
