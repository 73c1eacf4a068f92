"""The pure part of ``zcube demo`` (what runs without root)."""
import json

from testbed.cli import main


def test_demo_without_emulation_writes_costs_routes_and_drawings(tmp_path, capsys):
    code = main(["demo", "--no-emulation", "-o", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    assert {p.name for p in tmp_path.iterdir()} == {
        "cost.json", "routes.json", "zcube.json", "roft.json", "zcube.svg", "zcube.png",
        "roft.svg", "roft.png"}
    costs = json.loads((tmp_path / "cost.json").read_text())
    assert costs[0]["switch_port_gbps"] / costs[1]["switch_port_gbps"] == 2 / 3
    routes = json.loads((tmp_path / "routes.json").read_text())
    assert all(r["ok"] for r in routes.values()) and len(routes) == 8
    assert "switch-port Gb/s (sum)       12,800    19,200  0.667" in out
