"""Fabric pictures: DOT text, the row layout, and PNG/SVG drawings (no root needed)."""
import re

import pytest

from topologies import fattree, roft, zcube
from topologies.draw import draw, row_layout, to_dot

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ID = r'"(?:[^"\\]|\\.)*"'
ATTRS = rf'(?:\[(?:\w+={ID})(?:, \w+={ID})*\])?'


def check_dot(text: str) -> None:
    """A small DOT parse check: every line is one of the statement shapes to_dot writes,
    and braces balance."""
    shapes = [rf"graph {ID} \{{",
              rf"(graph|node|edge) {ATTRS};",
              r"// .*",
              rf"\{{ rank=same;( {ID} {ATTRS};)+ \}}",
              rf"subgraph {ID} \{{",
              rf"{ID} {ATTRS};",
              rf"{ID} -- {ID} {ATTRS};",
              r"\}"]
    depth = 0
    for line in text.splitlines():
        stmt = line.strip()
        assert any(re.fullmatch(s, stmt) for s in shapes), f"not DOT: {line!r}"
        depth += stmt.endswith("{") - (stmt == "}")
        assert depth >= 0
    assert depth == 0


def test_dot_has_every_node_and_one_edge_per_cable():
    fab = zcube(4)
    text = to_dot(fab)
    check_dot(text)
    assert text.startswith("graph ")
    assert text.count(" -- ") == len(fab.links)
    for name in [h.name for h in fab.hosts] + [s.name for s in fab.switches]:
        assert f'"{name}"' in text
    for srv in fab.servers():
        assert f'"cluster_server{srv}"' in text and f'label="server {srv}"' in text
    assert 'tooltip="a0:5 - b0:5, 200 Gb/s"' in text


def test_dot_parallel_cables_and_loads():
    fab = zcube(3, parallel=2)
    loads = {("a0", "b0"): 5.0, ("b0", "a0"): 9.0}
    text = to_dot(fab, loads=loads)
    check_dot(text)
    assert text.count(" -- ") == len(fab.links)
    assert text.count('"a0" -- "b0"') == 2
    assert "load 9" in text


def test_dot_quotes_odd_names():
    from topologies.draw import _q
    assert _q('a"b\\c') == '"a\\"b\\\\c"'


@pytest.mark.parametrize("fab, groups", [(zcube(4, 2), ["A", "B"]),
                                         (roft(4, 4), ["spine", "leaf"]),
                                         (fattree(4), ["core", "agg", "edge"])])
def test_row_layout_rows_and_servers(fab, groups):
    pos = row_layout(fab)
    assert set(pos) == {h.name for h in fab.hosts} | {s.name for s in fab.switches}
    ys = [{pos[s.name][1] for s in fab.groups()[g]} for g in groups]
    assert all(len(y) == 1 for y in ys)                        # one row per group
    host_y = {pos[h.name][1] for h in fab.hosts}
    assert len(host_y) == 1
    rows = [y.pop() for y in ys] + [host_y.pop()]
    assert rows == sorted(rows, reverse=True)                  # top tier first, GPUs last
    order = [fab.host(n).server
             for n in sorted((h.name for h in fab.hosts), key=lambda n: pos[n][0])]
    runs = [s for i, s in enumerate(order) if i == 0 or order[i - 1] != s]
    assert len(runs) == len(set(runs))                         # each server contiguous


@pytest.mark.parametrize("fab", [zcube(4, 4), roft(4, 4), fattree(4)], ids=lambda f: f.kind)
@pytest.mark.parametrize("with_loads", [False, True])
def test_draw_png_and_svg(tmp_path, fab, with_loads):
    loads = {(link.a, link.b): i % 5 for i, link in enumerate(fab.links)} if with_loads else None
    draw(fab, tmp_path / "f.png", loads=loads)
    assert (tmp_path / "f.png").read_bytes().startswith(PNG_MAGIC)
    draw(fab, tmp_path / "f.svg", loads=loads, title="my fabric")
    svg = (tmp_path / "f.svg").read_text()
    assert "<svg" in svg
    draw(fab, tmp_path / "f.out", fmt="png")
    assert (tmp_path / "f.out").read_bytes().startswith(PNG_MAGIC)


def test_draw_is_deterministic(tmp_path):
    fab = zcube(4, parallel=2)
    loads = {("a0", "b1"): 3.0}
    draw(fab, tmp_path / "1.svg", loads=loads)
    draw(fab, tmp_path / "2.svg", loads=loads)
    assert (tmp_path / "1.svg").read_bytes() == (tmp_path / "2.svg").read_bytes()


def test_draw_big_fabric_and_bad_format(tmp_path):
    draw(zcube(16), tmp_path / "big.png")                      # 256 hosts: no host labels
    assert (tmp_path / "big.png").read_bytes().startswith(PNG_MAGIC)
    with pytest.raises(ValueError, match="svg or png"):
        draw(zcube(2), tmp_path / "x.pdf")
