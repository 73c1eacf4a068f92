"""The zcube command line: formats other tools read, and one-line errors for bad input."""
import json
import os
import subprocess
import sys

import networkx as nx
import pytest

from testbed.cli.main import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exc:        # argparse errors exit through SystemExit
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_topo_json_is_networkx_node_link_with_the_documented_attributes(capsys):
    code, out, _ = run(capsys, "topo", "zcube", "--n", "4", "--gpus-per-server", "4",
                       "--format", "json")
    assert code == 0
    g = nx.node_link_graph(json.loads(out), edges="links")
    assert g.number_of_nodes() == 24 and g.number_of_edges() == 48
    assert {d["group"] for _, d in g.nodes(data=True) if d["kind"] == "switch"} == {"A", "B"}
    host = g.nodes["g5"]
    assert (host["kind"], host["server"], host["rank"]) == ("host", 1, 1)
    edge = g.edges["g5", "b1"]
    assert (edge["a_port"], edge["b_port"], edge["gbps"]) == (1, 2, 200.0)


def test_roft_and_fattree_json_carry_their_groups(capsys):
    _, out, _ = run(capsys, "topo", "roft", "--servers", "4", "--format", "json")
    groups = {n["group"] for n in json.loads(out)["nodes"] if n["kind"] == "switch"}
    assert groups == {"leaf", "spine"}
    _, out, _ = run(capsys, "topo", "fattree", "--k", "4", "--format", "json")
    groups = {n["group"] for n in json.loads(out)["nodes"] if n["kind"] == "switch"}
    assert groups == {"edge", "agg", "core"}


def test_a_fabric_file_written_by_topo_is_accepted_back(capsys, tmp_path):
    path = tmp_path / "fab.json"
    assert run(capsys, "topo", "zcube", "--n", "3", "--format", "json", "-o", str(path))[0] == 0
    code, out, _ = run(capsys, "routes", str(path), "--policy", "zcube", "--check")
    assert code == 0 and "OK" in out


def test_routes_json_lists_every_ordered_pair_host_to_host(capsys):
    code, out, _ = run(capsys, "routes", "zcube", "--n", "3", "--policy", "zcube",
                       "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["policy"] == "zcube" and len(doc["pairs"]) == 9 * 8
    pair = next(p for p in doc["pairs"] if p["src"] == "g0" and p["dst"] == "g4")
    assert pair["paths"] == [["g0", "a0", "b1", "g4"], ["g0", "b0", "a1", "g4"]]


def test_cost_vs_roft_prints_the_two_thirds_ratio(capsys):
    code, out, _ = run(capsys, "cost", "zcube", "--n", "4", "--gpus-per-server", "4",
                       "--vs", "roft")
    line = next(ln for ln in out.splitlines() if ln.startswith("switch-port Gb/s"))
    assert code == 0 and line.split()[-1] == "0.667"


def test_cost_json_has_the_contract_keys(capsys):
    code, out, _ = run(capsys, "cost", "roft", "--servers", "4", "--json")
    doc = json.loads(out)
    for key in ("switches", "switch_ports", "switch_port_gbps", "fabric_links", "host_links",
                "optics_switch_side", "optics_both_ends", "bisection_gbps", "diameter"):
        assert key in doc
    code, out, _ = run(capsys, "cost", "zcube", "--vs", "roft --servers 8 --gpus-per-server 2",
                       "--json")
    doc = json.loads(out)
    assert [f["gpus"] for f in doc["fabrics"]] == [16, 16]
    assert doc["ratio"]["gpus"] == 1.0


def test_check_with_traffic_reports_balanced_zcube_fabric_links(capsys):
    code, out, _ = run(capsys, "routes", "zcube", "--n", "4", "--check", "--traffic",
                       "all-to-all", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["ok"]
    assert doc["loads"]["A->B"]["pairs_min"] == doc["loads"]["A->B"]["pairs_max"] == 15
    assert doc["loads"]["B->A"]["jain"] == pytest.approx(1.0)


def test_line_rate_names_overloaded_links_and_keeps_the_checks_exit_status(capsys, tmp_path):
    argv = ["routes", "roft", "--oversubscription", "2", "--check", "--traffic", "all-to-all",
            "--line-rate"]
    code, out, err = run(capsys, *argv)
    lines = out.splitlines()
    assert code == 0 and err == ""
    assert lines[-3].startswith("OVERLOADED: 16 link(s) offered more than their rate, up to 1.60 ")
    assert "cannot all get that rate" in lines[-2] and lines[-1].startswith("OK: ")
    # written to a file, or as JSON, the warning is also said on stderr
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0 and json.loads(out)["overloaded_total"] == 16
    assert err.startswith("zcube routes: warning: OVERLOADED: 16 link(s)")


def test_check_fails_with_exit_1_naming_pair_and_path(capsys, tmp_path, monkeypatch):
    (tmp_path / "badpolicy.py").write_text(
        "def route(fabric, src, dst):\n"
        "    if (src, dst) == ('g0', 'g5'):\n"
        "        return [[src, 'a0', dst]]\n"
        "    from controller.routing import make_policy\n"
        "    return make_policy('zcube', fabric).paths(src, dst)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = run(capsys, "routes", "zcube", "--n", "4", "--policy", "badpolicy:route",
                         "--check")
    assert code == 1
    assert "g0 -> g5 path g0-a0-g5: no cable a0-g5" in err
    assert "FAILED" in out


def test_topo_summary_says_the_switch_ports_in_use_in_words(capsys):
    code, out, _ = run(capsys, "topo", "roft", "--servers", "4", "--gpus-per-server", "4")
    assert code == 0
    assert ("  switch ports in use: 4 leaf switches with 8 each, 4 spine switches with 4 each\n"
            in out)
    code, out, _ = run(capsys, "topo", "fattree")
    assert ("switch ports in use: 8 edge switches with 4 each, 8 agg switches with 4 each, "
            "4 core switches with 4 each\n") in out


def test_topo_dot_and_svg_formats(capsys, tmp_path):
    code, out, _ = run(capsys, "topo", "zcube", "--n", "4", "--format", "dot")
    assert code == 0 and out.lstrip().startswith(("graph", "strict graph"))
    svg = tmp_path / "z.svg"
    assert run(capsys, "topo", "zcube", "--n", "4", "--format", "svg", "-o", str(svg))[0] == 0
    assert "<svg" in svg.read_text()


BAD_INPUTS = [
    (["topo", "zcube", "--n", "0"], "n must be"),
    (["topo", "zcube", "--n", "1"], "n must be"),
    (["topo", "zcube", "--n", "4", "--gpus-per-server", "3"], "gpus_per_server=3"),
    (["topo", "zcube", "--n", "x"], "--n"),
    (["topo", "zcube", "--nic-gbps", "-100"], "nic_gbps"),
    (["topo", "zcube", "--nic-gbps", "nan"], "nic_gbps"),
    (["topo", "zcube", "--parallel", "0"], "parallel"),
    (["topo", "roft", "--servers", "0"], "servers"),
    (["topo", "roft", "--oversubscription", "3"], "oversubscription"),
    (["topo", "roft", "--spines", "3"], "spines"),
    (["topo", "fattree", "--k", "5"], "k=5"),
    (["topo", "mesh"], "unknown fabric 'mesh'"),
    (["topo", "zcube", "--k", "4"], "--k does not apply to zcube"),
    (["topo", "zcube", "--format", "gif"], "--format"),
    (["topo", "missing.json"], "missing.json"),
    (["routes", "zcube", "--policy", "nope"], "unknown policy 'nope'"),
    (["routes", "roft", "--policy", "zcube"], "needs a zcube fabric"),
    (["routes", "zcube", "--policy", "no_such_module:f"], "no_such_module"),
    (["routes", "zcube", "--traffic", "gravity"], "--traffic"),
    (["cost", "zcube", "--vs", "roft --spines 3"], "spines"),
    (["cost", "zcube", "--vs", "mesh"], "mesh"),
    (["frobnicate"], "frobnicate"),
    (["up", "zcube", "--sweep", "x,2"], "--sweep wants rates"),
    (["up", "zcube", "--sweep", "0,2"], "--sweep rates must be greater than 0"),
    (["up", "zcube", "--roce", "g0:g99"], "--roce wants SRC:DST"),
    (["up", "zcube", "--no-report"], "--no-report goes with --kv or --sweep"),
]


@pytest.mark.parametrize("argv,names", BAD_INPUTS, ids=[" ".join(a) for a, _ in BAD_INPUTS])
def test_bad_input_is_one_line_exit_2_naming_the_parameter(capsys, argv, names):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert names in lines[0]
    assert "Traceback" not in err


def test_console_script_reports_bad_input_without_traceback():
    exe = os.path.join(os.path.dirname(sys.executable), "zcube")
    if not os.path.exists(exe):
        pytest.skip("zcube console script not installed (make setup installs it)")
    proc = subprocess.run([exe, "topo", "zcube", "--n", "0"], capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "zcube topo: error: n must be at least 2, got 0"


def test_help_explains_every_fabric_option(capsys):
    code, out, _ = run(capsys, "topo", "--help")
    assert code == 0
    for opt in ("--n", "--gpus-per-server", "--parallel", "--nic-gbps", "--servers", "--spines",
                "--oversubscription", "--radix", "--k", "--format"):
        assert opt in out


def test_the_command_starts_without_the_heavy_libraries():
    """``zcube --help`` and the parser of every verb load no scipy.stats, matplotlib or
    Mininet: they are imported where a verb needs them (scipy.stats alone cost every
    command about a second)."""
    code = ("import sys\nfrom testbed.cli.main import make_parser\nmake_parser()\n"
            "print(sorted(m for m in ('scipy.stats', 'matplotlib', 'mininet') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def test_every_verbs_help_renders_its_percent_signs():
    """Every verb's --help comes out as a reader should see it: a description or option
    text that doubles a percent sign where argparse does not expand it shows ``%%``."""
    import argparse

    from testbed.cli.main import make_parser
    parser = make_parser()
    verbs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert len(verbs.choices) >= 10
    for name, sub in verbs.choices.items():
        text = sub.format_help()
        assert "%%" not in text and "%(" not in text, name
