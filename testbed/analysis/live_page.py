"""The live view's page: the fabric as an SVG laid out as the report draws it, each directed
link named as ``/api/links`` names it and each cable and switch as ``fail``/``restore`` take it;
nothing comes from elsewhere, so it works offline.
"""
from __future__ import annotations

import html
import os

from topologies.draw import (
    GROUP_COLORS,
    HOST_COLOR,
    HOST_LABEL_LIMIT,
    OTHER_COLOR,
    ROW_TITLES,
    row_layout,
)

UNIT_PX = 46             # pixels per layout unit, at most (x shrinks to fit MAX_WIDTH_PX)
MAX_WIDTH_PX = 1500      # a big fabric is squeezed across, not down: rows stay apart
MARGIN_PX = 40
TITLES_PX = 80           # room on the left for the rows' names
STYLE = """<style>
 text { font-family: sans-serif; }
 .server { fill: #eef1f5; stroke: #c5ccd6; }
 .row-name { font-size: 13px; font-weight: bold; }
 .server-name { font-size: 11px; fill: #5a6472; text-anchor: middle; }
 .hit { stroke: transparent; stroke-width: 9; }
 .link { pointer-events: none; stroke: #b8bec7; stroke-width: 1.2; stroke-linecap: round; }
 .cable.down .link { stroke: #b00020 !important; stroke-dasharray: 5 4; opacity: .8; }
 .switch text { fill: white; font-size: 11px; font-weight: bold; text-anchor: middle; }
 .switch.down rect { fill: #777 !important; stroke: #b00020; stroke-width: 3; }
 .host text { font-size: 10px; fill: #333; text-anchor: middle; }
 .host.down circle { stroke: #b00020; stroke-width: 3; }
</style>"""


def _element(fabric, link) -> str:
    """The name fail/restore take for this cable."""
    if fabric.is_host(link.a):
        return f"{link.a}:{link.a_port}"
    if fabric.is_host(link.b):
        return f"{link.b}:{link.b_port}"
    return f"{link.a}:{link.a_port}-{link.b}:{link.b_port}"


def fabric_svg(fabric) -> str:
    """The drawing: ``<svg>`` with a line per directed link, a box per switch, a dot per
    GPU and a panel per server."""
    pos = row_layout(fabric)
    xs = [x for x, _ in pos.values()]
    top = max(y for _, y in pos.values())
    x0 = min(xs)

    ux = min(UNIT_PX, (MAX_WIDTH_PX - TITLES_PX - 2 * MARGIN_PX) / max(max(xs) - x0, 1.0))
    dot = max(1.5, min(6.0, ux * 0.35))

    def px(p):
        return (TITLES_PX + MARGIN_PX + (p[0] - x0) * ux, MARGIN_PX + (top - p[1]) * UNIT_PX)
    width = TITLES_PX + MARGIN_PX * 2 + (max(xs) - x0) * ux
    height = MARGIN_PX * 2 + top * UNIT_PX + 30
    out = [f'<svg id="fabric" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} '
           f'{height:.0f}" width="{width:.0f}" height="{height:.0f}" '
           f'data-fabric="{html.escape(fabric.label)}">', STYLE]
    for srv, hosts in sorted(fabric.servers().items()):
        hx = [px(pos[h.name])[0] for h in hosts]
        y = px((0, 0))[1]
        pad = dot + 4
        out.append(f'<rect class="server" x="{min(hx) - pad:.1f}" y="{y - 14:.1f}" '
                   f'width="{max(hx) - min(hx) + 2 * pad:.1f}" height="40" rx="8"/>')
        if max(hx) - min(hx) + 2 * pad >= 6.5 * len(f"server {srv}"):     # where it fits
            out.append(f'<text class="server-name" x="{(min(hx) + max(hx)) / 2:.1f}" '
                       f'y="{y + 38:.1f}">server {srv}</text>')
    rows = {pos[s.name][1]: s.group for s in fabric.switches} | {0.0: None}
    for y, group in sorted(rows.items()):
        out.append(f'<text class="row-name" x="8" y="{px((0, y))[1] + 4:.1f}" fill="'
                   f'{GROUP_COLORS.get(group, HOST_COLOR)}">'
                   f'{html.escape(ROW_TITLES.get(group, str(group)))}</text>')
    out += _cables(fabric, pos, px)
    for sw in fabric.switches:
        x, y = px(pos[sw.name])
        color = GROUP_COLORS.get(sw.group, OTHER_COLOR)
        out.append(f'<g class="switch" id="n-{sw.name}" data-element="{sw.name}">'
                   f'<rect x="{x - 17:.1f}" y="{y - 11:.1f}" width="34" height="22" rx="5" '
                   f'fill="{color}"/><text x="{x:.1f}" y="{y + 4:.1f}">{sw.name}</text></g>')
    named = len(fabric.hosts) <= HOST_LABEL_LIMIT        # as the report's drawing does
    for h in fabric.hosts:
        x, y = px(pos[h.name])
        label = f'<text x="{x:.1f}" y="{y + 20:.1f}">{h.name}</text>' if named else ""
        out.append(f'<g class="host" id="n-{h.name}"><title>{h.name}</title><circle '
                   f'cx="{x:.1f}" cy="{y:.1f}" r="{dot:.1f}" fill="{HOST_COLOR}"/>{label}</g>')
    out.append("</svg>")
    return "\n".join(out)


def _cables(fabric, pos, px) -> list[str]:
    """Two lines per cable, one per direction, side by side; parallel cables apart."""
    out, count, seen = [], {}, {}
    for link in fabric.links:
        key = frozenset((link.a, link.b))
        count[key] = count.get(key, 0) + 1
    for i, link in enumerate(fabric.links):
        key = frozenset((link.a, link.b))
        k = seen[key] = seen.get(key, -1) + 1
        (ax, ay), (bx, by) = px(pos[link.a]), px(pos[link.b])
        dx, dy = bx - ax, by - ay
        norm = (dx * dx + dy * dy) ** 0.5 or 1.0
        nx, ny = -dy / norm, dx / norm
        spread = (k - (count[key] - 1) / 2) * 9.0
        name = html.escape(_element(fabric, link))
        out.append(f'<g class="cable" id="c{i}" data-element="{name}">'
                   f'<line class="hit" x1="{ax + nx * spread:.1f}" y1="{ay + ny * spread:.1f}" '
                   f'x2="{bx + nx * spread:.1f}" y2="{by + ny * spread:.1f}"/>')
        for side, (u, v) in ((1, (link.a, link.b)), (-1, (link.b, link.a))):
            off = spread + side * 1.6
            out.append(f'<line class="link" data-src="{u}" data-dst="{v}" '
                       f'x1="{ax + nx * off:.1f}" y1="{ay + ny * off:.1f}" '
                       f'x2="{bx + nx * off:.1f}" y2="{by + ny * off:.1f}"/>')
        out.append("</g>")
    return out


def page(control: bool) -> str:
    """The HTML page (the drawing is fetched from ``/fabric.svg`` and replaced when the
    run moves to another fabric)."""
    from jinja2 import Environment, FileSystemLoader, select_autoescape
    here = os.path.join(os.path.dirname(__file__), "templates")
    env = Environment(loader=FileSystemLoader(here), autoescape=select_autoescape(["j2"]))
    return env.get_template("live.html.j2").render(control=control)
