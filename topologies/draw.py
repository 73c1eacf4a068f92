"""Pictures of a Fabric (pure): Graphviz DOT text and a matplotlib SVG/PNG drawing, in rows
by role, top tier first and the GPUs at the bottom, grouped by server."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

from topologies.fabric import Fabric

# Top-to-bottom order of switch groups; groups not listed (hand-made fabrics) go after these.
ROW_ORDER = ("core", "spine", "A", "agg", "B", "leaf", "edge")
ROW_TITLES = {"A": "group A", "B": "group B", "core": "core", "spine": "spines",
              "agg": "aggregation", "leaf": "leaves", "edge": "edge", None: "GPUs"}
GROUP_COLORS = {"A": "#2f6db5", "B": "#e07b1a", "spine": "#7b4bb3", "leaf": "#2e9a5a",
                "core": "#c0392b", "agg": "#7b4bb3", "edge": "#2e9a5a"}
OTHER_COLOR = "#5d6d7e"
HOST_COLOR = "#4d4d4d"
SERVER_GAP = 0.8        # extra horizontal space between two servers, in host widths
ROW_GAP = 3.0           # vertical distance between rows, in host widths
HOST_LABEL_LIMIT = 64   # more hosts than this: no host labels


def _rows(fabric: Fabric) -> list[tuple[Optional[str], list[str]]]:
    """``[(group, [node names])]`` top to bottom; the GPU row has group ``None``."""
    groups = fabric.groups()
    order = [g for g in ROW_ORDER if g in groups] + sorted(g for g in groups if g not in ROW_ORDER)
    rows = [(g, [s.name for s in sorted(groups[g], key=lambda s: s.index)]) for g in order]
    servers = fabric.servers()
    hosts = [h.name for srv in sorted(servers) for h in sorted(servers[srv], key=lambda h: h.index)]
    return rows + [(None, hosts)]


def row_layout(fabric: Fabric) -> dict[str, tuple[float, float]]:
    """``{node: (x, y)}``: one horizontal row per switch group, top tier at the top and the
    GPUs on the bottom row (y = 0), ``ROW_GAP`` apart.  GPUs are one unit apart in server
    order with an extra ``SERVER_GAP`` between servers; each switch row is spread evenly
    over the width of the widest row, so a switch sits above the servers it serves.  In a
    zcube the A row moves a quarter slot left and the B row a quarter slot right, so the
    cables from the GPUs up to A pass beside, not behind, the B switches."""
    rows = _rows(fabric)
    step = 1.0 + SERVER_GAP                 # room one server boundary or one switch takes
    hx, x, prev = {}, 0.0, None
    for name in rows[-1][1]:
        srv = fabric.host(name).server
        if prev is not None:
            x += 1.0 + (SERVER_GAP if srv != prev else 0.0)
        hx[name], prev = x, srv
    extent = max([x + step] + [len(names) * step for _, names in rows[:-1]])
    skew = {g for g, _ in rows} >= {"A", "B"}
    pos = {n: (v + (extent - x - step) / 2, 0.0) for n, v in hx.items()}   # centred GPUs
    for r, (group, names) in enumerate(rows[:-1]):
        shift = {"A": -0.25, "B": 0.25}.get(group, 0.0) if skew else 0.0
        slot = extent / len(names)
        for i, n in enumerate(names):
            pos[n] = (-step / 2 + (i + 0.5 + shift) * slot, ROW_GAP * (len(rows) - 1 - r))
    return pos


def _cable_loads(fabric: Fabric, loads: Mapping) -> list[float]:
    """Per cable, the larger of its two directed loads (0 when neither is given)."""
    return [max(float(loads.get((link.a, link.b), 0.0)), float(loads.get((link.b, link.a), 0.0)))
            for link in fabric.links]


# -- Graphviz DOT ---------------------------------------------------------------------------

def _q(s) -> str:
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _attrs(**kw) -> str:
    return "[" + ", ".join(f"{k}={_q(v)}" for k, v in kw.items()) + "]"


def _heat(t: float) -> str:
    """Pale yellow (t=0) to dark red (t=1), as a #rrggbb colour."""
    stops = [(255, 237, 160), (253, 141, 60), (189, 0, 38)]
    t = min(max(t, 0.0), 1.0) * (len(stops) - 1)
    i = min(int(t), len(stops) - 2)
    f = t - i
    return "#" + "".join("%02x" % round(a + (b - a) * f) for a, b in zip(stops[i], stops[i + 1]))


def to_dot(fabric: Fabric, loads: Optional[Mapping] = None) -> str:
    """Graphviz DOT text (undirected) of ``fabric``: one rank per switch group, top tier
    first, GPUs at the bottom in one ``cluster_server<N>`` per server.  Every cable is its
    own edge with a tooltip such as ``a0:5 - b0:5, 200 Gb/s``; with ``loads`` (``{(u, v):
    number}``, directed) cables are coloured by the larger of their two directions."""
    out = [f"graph {_q(fabric.name)} {{",
           "  graph " + _attrs(label=fabric.name, labelloc="t", fontname="Helvetica",
                               ranksep="1.2", nodesep="0.15", newrank="true") + ";",
           "  node " + _attrs(fontname="Helvetica", fontsize="10") + ";",
           "  edge " + _attrs(color="#555555") + ";"]
    rows = _rows(fabric)
    for group, names in rows[:-1]:
        color = GROUP_COLORS.get(group, OTHER_COLOR)
        style = _attrs(shape="box", style="rounded,filled", fillcolor=color, color=color,
                       fontcolor="white")
        out.append(f"  // {ROW_TITLES.get(group, group)}")
        out.append("  { rank=same; " + " ".join(f"{_q(n)} {style};" for n in names) + " }")
    servers = fabric.servers()
    for srv in sorted(servers):
        out.append(f"  subgraph {_q(f'cluster_server{srv}')} {{")
        out.append("    graph " + _attrs(label=f"server {srv}", style="rounded,filled",
                                          fillcolor="#f2f2f2", color="#bbbbbb", fontsize="9") + ";")
        for h in sorted(servers[srv], key=lambda h: h.index):
            out.append(f"    {_q(h.name)} " + _attrs(shape="ellipse", fontsize="8", width="0.3",
                                                      height="0.25", margin="0.02") + ";")
        out.append("  }")
    per_cable = _cable_loads(fabric, loads) if loads else None
    peak = max(per_cable or [0.0]) or 1.0
    # dot ranks nodes along edge direction: write the upper tier first so the rows stack
    row_of = {n: r for r, (_, names) in enumerate(rows) for n in names}
    for i, link in enumerate(fabric.links):
        tail, head = (link.a, link.b) if row_of[link.a] <= row_of[link.b] else (link.b, link.a)
        tip = f"{link.a}:{link.a_port} - {link.b}:{link.b_port}, {link.gbps:g} Gb/s"
        if per_cable:
            kw = dict(tooltip=f"{tip}, load {per_cable[i]:g}", color=_heat(per_cable[i] / peak),
                      penwidth="2")
        elif fabric.is_host(link.a) or fabric.is_host(link.b):
            kw = dict(tooltip=tip, color="#aaaaaa", penwidth="0.6")
        else:
            kw = dict(tooltip=tip, penwidth="1.4")
        out.append(f"  {_q(tail)} -- {_q(head)} {_attrs(**kw)};")
    out.append("}")
    return "\n".join(out) + "\n"


# -- matplotlib -----------------------------------------------------------------------------

def _curve(p, q, bend: float, steps: int = 16):
    """Points of a quadratic Bezier from p to q bulging sideways by ``bend`` (0: straight)."""
    import numpy as np
    p, q = np.asarray(p, float), np.asarray(q, float)
    if bend == 0:
        return np.array([p, q])
    d = q - p
    normal = np.array([-d[1], d[0]]) / (np.hypot(*d) or 1.0)
    c = (p + q) / 2 + normal * bend
    t = np.linspace(0, 1, steps)[:, None]
    return (1 - t) ** 2 * p + 2 * (1 - t) * t * c + t ** 2 * q


@dataclass
class _Canvas:
    """A figure sized for one fabric, and the scales its parts are drawn with."""
    fig: Any
    ax: Any
    left: float             # layout x of the plot's left edge (room for the row names)
    r: float                # data y per x unit: sizes near the GPUs in x units
    pt: float               # points per layout unit, to size text and markers
    fs: float               # base font size
    plot_w: float           # plot size, inches
    plot_h: float
    head: float             # room for the titles above, inches
    bar: float              # room for the colorbar on the right, inches


def _canvas(fabric: Fabric, pos: dict, rows: list, loads: Optional[Mapping]) -> _Canvas:
    """The figure and its one axes, sized so small fabrics are generous and big ones stay
    printable."""
    from matplotlib.figure import Figure

    xs = [x for x, _ in pos.values()]
    left, right = min(xs) - 3.6, max(xs) + 0.9         # room for the row names on the left
    top = ROW_GAP * (len(rows) - 1) + 0.9
    # inches per layout unit: generous for small fabrics, shrinking so big ones stay printable;
    # rows may spread further apart (uy > ux) but never end up as a thin strip
    ux = min(0.42, 40.0 / (right - left))
    below = 1.9 * ux if fabric.hosts else 0.9 * ux     # GPU labels and server names, inches
    plot_w = (right - left) * ux
    plot_h = max(top * max(ux, 0.45), plot_w / 3.5 - below) + below
    uy = (plot_h - below) / top
    head, bar = 0.75, (1.1 if loads else 0.0)
    fig = Figure(figsize=(plot_w + bar, plot_h + head))
    ax = fig.add_axes([0, 0, plot_w / (plot_w + bar), plot_h / (plot_h + head)])
    ax.set_xlim(left, right)
    ax.set_ylim(-below / uy, top)
    ax.axis("off")
    pt = ux * 72
    return _Canvas(fig, ax, left, ux / uy, pt, max(5.0, min(10.0, pt * 0.3)), plot_w, plot_h,
                   head, bar)


def _draw_servers(c: _Canvas, fabric: Fabric, pos: dict) -> bool:
    """Server panels behind the GPUs (y = 0), named underneath when the name fits; False
    when some name did not fit."""
    from matplotlib.patches import FancyBboxPatch

    named = True
    for srv, hosts in sorted(fabric.servers().items()):
        hx = [pos[h.name][0] for h in hosts]
        x0, x1 = min(hx) - 0.42, max(hx) + 0.42
        c.ax.add_patch(FancyBboxPatch((x0, -1.0 * c.r), x1 - x0, 1.45 * c.r,
                                      mutation_aspect=c.r,
                                      boxstyle="round,pad=0,rounding_size=0.3",
                                      fc="#eef1f5", ec="#c5ccd6", lw=0.8, zorder=0))
        label = f"server {srv}"
        if (x1 - x0) * c.pt > 0.6 * len(label) * c.fs * 0.85:
            c.ax.text((x0 + x1) / 2, -1.25 * c.r, label, ha="center", va="top",
                      fontsize=c.fs * 0.85, color="#5a6472", zorder=1)
        else:
            named = False
    return named


def _cable_lines(fabric: Fabric, pos: dict) -> tuple[list, list, list]:
    """``(segments, colours, widths)`` of every cable: parallel ones bend apart; host cables
    thinner and tinted by their switch's group; lines get thinner as they get more numerous
    so big cores stay readable."""
    import matplotlib

    count: dict[frozenset, int] = {}
    for link in fabric.links:
        count[frozenset((link.a, link.b))] = count.get(frozenset((link.a, link.b)), 0) + 1
    n_core = sum(1 for _ in fabric.switch_links())
    core_lw = min(1.5, max(0.4, 1.5 * (32 / max(n_core, 1)) ** 0.5))
    host_lw = min(0.8, max(0.3, 0.8 * (64 / max(len(fabric.links) - n_core, 1)) ** 0.5))
    seen: dict[frozenset, int] = {}
    segs, colors, widths = [], [], []
    for link in fabric.links:
        key = frozenset((link.a, link.b))
        k = seen[key] = seen.get(key, -1) + 1
        p, q = sorted((pos[link.a], pos[link.b]))
        segs.append(_curve(p, q, (k - (count[key] - 1) / 2) * 0.35))
        if fabric.is_host(link.a) or fabric.is_host(link.b):
            sw = fabric.switch(link.b if fabric.is_host(link.a) else link.a)
            colors.append(matplotlib.colors.to_rgba(GROUP_COLORS.get(sw.group, OTHER_COLOR), 0.5))
            widths.append(host_lw)
        else:
            colors.append((0.2, 0.2, 0.2, 0.75))
            widths.append(core_lw)
    return segs, colors, widths


def _draw_cables(c: _Canvas, fabric: Fabric, pos: dict, loads: Optional[Mapping]) -> None:
    """Every cable; with ``loads`` coloured by load, with a colorbar."""
    import matplotlib
    from matplotlib.collections import LineCollection

    segs, colors, widths = _cable_lines(fabric, pos)
    if loads:
        import numpy as np
        values = _cable_loads(fabric, loads)
        cmap = matplotlib.colors.LinearSegmentedColormap.from_list(
            "load", matplotlib.colormaps["YlOrRd"](np.linspace(0.2, 1.0, 256)))
        lc = LineCollection(segs, linewidths=[w * 1.8 for w in widths], cmap=cmap, zorder=2,
                            capstyle="round")
        lc.set_array(np.asarray(values))
        lc.set_clim(0, max(values) or 1.0)
        cax = c.fig.add_axes([(c.plot_w + 0.2) / (c.plot_w + c.bar), 0.12,
                              0.16 / (c.plot_w + c.bar), 0.6])
        c.fig.colorbar(lc, cax=cax).set_label("load", fontsize=c.fs)
        cax.tick_params(labelsize=c.fs * 0.85)
    else:
        lc = LineCollection(segs, colors=colors, linewidths=widths, zorder=2, capstyle="round")
    c.ax.add_collection(lc)


def _draw_nodes(c: _Canvas, fabric: Fabric, pos: dict, rows: list) -> None:
    """Switches as rounded coloured boxes with their name; GPUs as small dots, named when
    there are at most ``HOST_LABEL_LIMIT``."""
    for group, names in rows:
        color = GROUP_COLORS.get(group, OTHER_COLOR)
        for n in names if group is not None else ():
            c.ax.text(*pos[n], n, ha="center", va="center", fontsize=c.fs, color="white",
                      fontweight="bold", zorder=4,
                      bbox=dict(boxstyle="round,pad=0.35", fc=color, ec="white", lw=0.8))
    hx = [pos[h.name][0] for h in fabric.hosts]
    c.ax.scatter(hx, [0.0] * len(hx), s=(0.32 * c.pt) ** 2, c=HOST_COLOR, edgecolors="white",
                 linewidths=0.6, zorder=4)
    if len(fabric.hosts) <= HOST_LABEL_LIMIT:
        for h in fabric.hosts:
            c.ax.text(pos[h.name][0], -0.35 * c.r, h.name, ha="center", va="top",
                      fontsize=c.fs * 0.8, color="#333333", zorder=4)


def _draw_titles(c: _Canvas, fabric: Fabric, rows: list, named: bool,
                 title: Optional[str]) -> None:
    """Row names on the left (and a key to the server boxes when they are unnamed); the
    title and a line of counts on top."""
    for i, (group, _) in enumerate(rows):
        c.ax.text(c.left + 0.3, ROW_GAP * (len(rows) - 1 - i), ROW_TITLES.get(group, str(group)),
                  ha="left", va="center", fontsize=c.fs * 1.05, fontweight="bold",
                  color=GROUP_COLORS.get(group, HOST_COLOR))
    if not named:
        c.ax.text(c.left + 0.3, -0.55 * c.r, "(box = server)", ha="left", va="center",
                  fontsize=c.fs * 0.8, color="#5a6472")
    h = c.plot_h + c.head
    c.fig.text(0.5, 1 - 0.1 / h, title if title is not None else fabric.name, ha="center",
               va="top", fontsize=c.fs * 1.4)
    c.fig.text(0.5, 1 - 0.42 / h, f"{len(fabric.hosts)} GPUs, {len(fabric.switches)} switches, "
               f"{len(fabric.links)} cables", ha="center", va="top", fontsize=c.fs,
               color="#555555")


def draw(fabric: Fabric, path: str, fmt: Optional[str] = None, loads: Optional[Mapping] = None,
         title: Optional[str] = None) -> None:
    """Draw ``fabric`` into ``path`` as SVG or PNG (``fmt``, else the path's suffix).

    Rows as in :func:`row_layout`; switches coloured by group; each server's GPUs on a
    light rounded panel.  ``loads`` (``{(u, v): number}``, directed) colours every cable
    by the larger of its two directions, with a colorbar.  The same input gives the same
    bytes."""
    import matplotlib
    matplotlib.use("Agg")

    fmt = (fmt or str(path).rsplit(".", 1)[-1]).lower()
    if fmt not in ("svg", "png"):
        raise ValueError(f"cannot draw to format {fmt!r}; use svg or png")
    pos, rows = row_layout(fabric), _rows(fabric)
    c = _canvas(fabric, pos, rows, loads)
    named = _draw_servers(c, fabric, pos)
    _draw_cables(c, fabric, pos, loads)
    _draw_nodes(c, fabric, pos, rows)
    _draw_titles(c, fabric, rows, named, title)
    with matplotlib.rc_context({"svg.hashsalt": "zcube-fabric", "svg.fonttype": "path"}):
        c.fig.savefig(path, format=fmt, dpi=150,
                      metadata={"Date": None} if fmt == "svg" else None)
