"""``zcube compare``: one table of each metric per fabric, grouped by placement, with the ratio
to the group's first run; with repetitions a value is their mean with its 95% half-width
(:func:`testbed.core.metrics.estimate`), and FCT and TTFT have ratios paired by seed.  Runs of
several output folders (say, one scenario over two sets of seeds) stand side by side, each
compared only with its own folder's first run, as runs over other seeds have no ratio.
"""
from __future__ import annotations

import itertools
import json
import math
import os

from testbed.core import metrics, verdict
from testbed.core.fidelity import busy_host_steal
from testbed.core.tables import csv_text, text_table
from testbed.errors import UsageError

# (label, how to read it from summary.json, spread key or None, digits)
METRICS = [
    ("switches", lambda s: s["cost"]["switches"], None, 0),
    ("switch ports", lambda s: s["cost"]["switch_ports"], None, 0),
    ("switch port Tb/s", lambda s: s["cost"]["switch_port_gbps"] / 1000, None, 1),
    ("transfers verified", lambda s: s["transfers_verified"], None, 0),
    ("FCT p50 ms", lambda s: (s["fct_ms"] or {}).get("p50"), "fct_p50_ms", 2),
    ("FCT p99 ms", lambda s: (s["fct_ms"] or {}).get("p99"), "fct_p99_ms", 2),
    ("TTFT p99 ms", lambda s: (s["ttft_ms"] or {}).get("p99"), "ttft_p99_ms", 1),
    ("requests/s", lambda s: s.get("requests_per_s"), "requests_per_s", 3),
    ("SLO throughput req/s", lambda s: s.get("slo_throughput_per_s"), None, 2),
    ("link util max", lambda s: (s.get("link_util") or {}).get("max"), "link_util_max", 3),
    ("link util mean", lambda s: (s.get("link_util") or {}).get("mean"), "link_util_mean", 3),
]


def load_runs(dirs: list[str]) -> list[dict]:
    """Summaries from result folders: a run folder (holding summary.json) or a scenario's
    output folder (its run folders, in the order the scenario ran them).  Each summary's
    ``_folder`` is the output folder it belongs to (a run folder's parent)."""
    out = []
    for d in dirs:
        folder = d
        if os.path.isfile(os.path.join(d, "summary.json")):
            names = [""]
            folder = os.path.dirname(os.path.normpath(d)) or "."
        elif os.path.isdir(d):
            order = []
            meta = os.path.join(d, "run.json")
            if os.path.isfile(meta):
                with open(meta) as f:
                    order = json.load(f).get("runs", [])
            found = sorted(n for n in os.listdir(d)
                           if os.path.isfile(os.path.join(d, n, "summary.json")))
            names = [n for n in order if n in found] + [n for n in found if n not in order]
            if not names:
                raise UsageError(f"{d}: no results here (no summary.json in it or its folders)")
        else:
            raise UsageError(f"{d}: no such results folder")
        for n in names:
            path = os.path.join(d, n, "summary.json")
            try:
                with open(path) as f:
                    doc = json.load(f)
                doc.setdefault("run", n or os.path.basename(os.path.normpath(d)))
                doc["_dir"] = os.path.join(d, n)
                doc["_folder"] = folder
                METRICS[0][1](doc)
            except (OSError, ValueError, KeyError, TypeError) as err:
                raise UsageError(f"{path}: not a zcube run summary ({err})") from None
            out.append(doc)
    return out


def trace_skips(run: dict) -> dict:
    """The trace lines a run did not replay (the same in every run of a scenario): how many,
    how many it replayed out of file order, and the first ones by line number and reason."""
    return {"count": run.get("skipped_trace_lines") or 0,
            "out_of_order": run.get("trace_lines_out_of_order") or 0,
            "rows": [[x["line"], x["reason"]] for x in run.get("skipped_trace_line_list") or []]}


def _cell(run: dict, get, spread_key) -> tuple:
    """(value, ci95, estimator) of one metric of one run (:func:`metrics.estimate`)."""
    try:
        pooled = get(run)
    except (KeyError, TypeError):
        pooled = None
    if spread_key is None:
        return pooled, None, metrics.POOLED
    rep_spread = (run.get("spread") or {}).get(spread_key)
    return metrics.estimate(pooled, rep_spread, run.get("repetitions", 1))


PAIRED = ("FCT p50 ms", "FCT p99 ms", "TTFT p99 ms")     # lower is better
# rows whose value does not depend on which repetitions a run had (the fabric's cost,
# the sweep on the first seed): a ratio between runs over different seeds only for these
SEEDLESS = ("switches", "switch ports", "switch port Tb/s", "SLO throughput req/s")


def paired_of(row: dict, i: int):
    """Run ``i``'s paired ratio to the first in a comparison row (None where there is
    none)."""
    paired = row.get("paired") or []
    return paired[i] if i < len(paired) else None


def both_faithful(g: dict, i: int) -> bool:
    """Whether neither a comparison group's first run nor its run ``i`` was marked not
    faithful."""
    faithful = g.get("faithful") or [None] * len(g["runs"])
    return faithful[0] is not False and faithful[i] is not False


def per_seed(run: dict, get) -> dict:
    """Seed -> the figure ``get`` reads from that repetition of ``run`` (None if absent)."""
    out = {}
    for rep in run.get("per_rep") or []:
        try:
            out[rep.get("seed")] = get(rep)
        except (KeyError, TypeError):
            out[rep.get("seed")] = None
    return out


def _paired(members: list[dict], get, label: str) -> list:
    """Each run's :func:`metrics.paired_ratio` to the first over the seeds both ran, with
    the equivalence margin its verdict uses (:func:`verdict.margin_for`)."""
    ref = per_seed(members[0], get)
    out = [None]
    for m in members[1:]:
        mine = per_seed(m, get)
        seeds = [k for k in ref if k in mine]
        p = (metrics.paired_ratio([ref[k] for k in seeds], [mine[k] for k in seeds])
             if len(seeds) > 1 else None)
        if p:
            p["margin"] = verdict.margin_for(label, members[0].get("backend"),
                                             m.get("backend"))
        out.append(p)
    return out


def comparison(runs: list[dict]) -> list[dict]:
    """Groups by placement and output folder (placement first, then folders in the order
    given): ``{"placement", "folder", "runs": [names], "fabrics", "repetitions", "footnote",
    "rows": [{"metric", "values", "ci95", "estimators", "ratios", "digits"}]}``; ratios are
    to the group's first run (None where undefined); FCT and TTFT rows also have ``paired``:
    each run's ratio to the first paired by seed, with its interval.  ``folder`` is None for
    summaries not read by :func:`load_runs`."""
    groups: dict[tuple, list] = {}
    for r in runs:
        where = r.get("_folder")
        key = (r.get("placement") or "-", where and os.path.abspath(where))
        groups.setdefault(key, []).append(r)
    placements = list(dict.fromkeys(p for p, _ in groups))
    return [_group(p, members) for (p, _), members in
            sorted(groups.items(), key=lambda kv: placements.index(kv[0][0]))]


def _group(placement: str, members: list[dict]) -> dict:
    """One group of :func:`comparison`: ``members``, one placement's runs of one folder."""
    rows = []
    seeds = [[r.get("seed") for r in m.get("per_rep") or []] for m in members]
    for label, get, spread_key, digits in METRICS:
        values, cis, estimators = zip(*(_cell(m, get, spread_key) for m in members))
        ref = values[0]
        ratios = [None if v is None or not ref or (s != seeds[0] and label not in SEEDLESS)
                  else v / ref for v, s in zip(values, seeds)]
        rows.append({"metric": label, "values": list(values), "ci95": list(cis),
                     "estimators": list(estimators), "ratios": ratios, "digits": digits})
        if label in PAIRED:
            rows[-1]["paired"] = _paired(members, get, label)
    reps = [m.get("repetitions", 1) for m in members]
    fid = [m.get("fidelity") or {} for m in members]
    return {"placement": placement, "folder": members[0].get("_folder"),
            "runs": [m["run"] for m in members],
            "faithful": [f.get("faithful") for f in fid],
            "unfaithful_reasons": {m["run"]: f.get("reasons") for m, f in
                                   zip(members, fid) if f.get("faithful") is False},
            "host_steal": {m["run"]: busy_host_steal(f) for m, f in zip(members, fid)
                           if f.get("faithful") is False},
            "fabrics": [m.get("fabric") for m in members], "rows": rows,
            "repetitions": reps, "footnote": footnote(reps) + (
                "; a run over other seeds than the first run's has ratios only where the "
                "seeds do not matter (cost, SLO throughput), and its paired lines compare it "
                "over the seeds both ran" if any(s != seeds[0] for s in seeds) else "")}


def footnote(repetitions: list[int]) -> str:
    """What the values of a group and their ± are (see :func:`metrics.estimate`)."""
    many = sorted({n for n in repetitions if n > 1})
    if not many:
        return ("one repetition: values are pooled over its transfers and requests; no "
                "confidence intervals")
    text = (f"± is the 95% confidence half-width of the mean over {'/'.join(map(str, many))} "
            f"repetitions; values are means of per-repetition figures")
    if min(repetitions) == 1:
        text += " (pooled, without ±, for runs of one repetition)"
    return text


def fmt(v, digits: int, ci=None) -> str:
    """A value as the tables show it, with its ± when it has one."""
    if v is None:
        return "-"
    s = f"{v:,.{digits}f}"
    if ci is not None:
        s += f" ±{ci:.{max(digits, 1)}f}"
    return s


def labelled(name: str, label: str = "") -> str:
    """A run's name, or a ratio's, with the label of its folder when there are several."""
    return f"{name} ({label})" if label else name


def folder_labels(groups: list[dict]) -> dict:
    """Folder -> the label its runs carry in the text: none when there is one folder, else
    the folder's own name (its path as given where two names are the same)."""
    folders = list(dict.fromkeys(g.get("folder") for g in groups))
    if len(folders) < 2:
        return dict.fromkeys(folders, "")
    names = [os.path.basename(os.path.abspath(f)) if f else "-" for f in folders]
    if len(set(names)) < len(names):
        names = [os.path.normpath(f) if f else "-" for f in folders]
    return dict(zip(folders, names))


def table_rows(g: dict | list[dict], labels: list[str] | None = None
               ) -> tuple[list[str], list[list[str]]]:
    """Header and body of a group's table (the text table and the report show the same), or
    of several folders' groups of one placement side by side: every folder's runs, then its
    ratios, each named with its folder's label in ``labels``."""
    groups = g if isinstance(g, list) else [g]
    labels = labels or [""] * len(groups)
    head, ratio_head = [f"placement: {groups[0]['placement']}"], []
    body = [[row["metric"]] for row in groups[0]["rows"]]
    ratio_body = [[] for _ in body]
    for grp, label in zip(groups, labels):
        names = grp["runs"]
        head += [labelled(n, label) for n in names]
        ratio_head += [labelled(f"{n}/{names[0]}", label) for n in names[1:]]
        for cells, ratios, row in zip(body, ratio_body, grp["rows"]):
            cells += [fmt(v, row["digits"], c) for v, c in zip(row["values"], row["ci95"])]
            ratios += [fmt(r, 3) for r in row["ratios"][1:]]
    body = [cells + ratios for cells, ratios in zip(body, ratio_body)]
    marks = [m for grp in groups for m in grp.get("faithful") or [None] * len(grp["runs"])]
    if any(m is not None for m in marks):
        body.append(["faithful"] + [{True: "yes", False: "NO"}.get(m, "-") for m in marks]
                    + ["-"] * len(ratio_head))
    return head + ratio_head, body


def to_text(groups: list[dict]) -> str:
    """The tables, one per placement with every folder's runs side by side, each with its
    footnote, paired lines and warnings."""
    names = folder_labels(groups)
    lines = []
    for _, same in itertools.groupby(groups, key=lambda g: g["placement"]):
        same = list(same)
        labels = [names.get(g.get("folder"), "") for g in same]
        lines += text_table(*table_rows(same, labels))
        lines += footnote_lines(same, labels)
        for g, label in zip(same, labels):
            lines += paired_lines(g, label)
        for g, label in zip(same, labels):
            for run, why in (g.get("unfaithful_reasons") or {}).items():
                tail = ("" if (g.get("host_steal") or {}).get(run) else   # the reasons say so
                        ": its figures measure the emulator, not the fabric; repeat at a lower "
                        "rate or with more cores")
                lines.append(f"NOT FAITHFUL {labelled(run, label)}: {'; '.join(why)}{tail}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def footnote_lines(groups: list[dict], labels: list[str]) -> list[str]:
    """What a table's values and ratios are: one line, or one per folder where their
    repetitions differ."""
    if len(groups) == 1:
        return [f"({groups[0]['footnote']}; a ratio is run / {groups[0]['runs'][0]})"]
    refs = {g["runs"][0] for g in groups}
    ratio = ("" if all(len(g["runs"]) == 1 for g in groups)    # no ratio column to explain
             else f"a ratio is run / {refs.pop()} of the same folder" if len(refs) == 1
             else "a ratio is run / the first run of the same folder")
    notes = list(dict.fromkeys(g["footnote"] for g in groups))
    if len(notes) == 1:
        return [f"({notes[0]}{'; ' if ratio else ''}{ratio})"]
    return ([f"({label}: {g['footnote']})" for g, label in zip(groups, labels)]
            + ([f"({ratio})"] if ratio else []))


def paired_lines(g: dict, label: str = "") -> list[str]:
    """One line per run and figure compared with the first, paired by seed: the ratio, its
    95% interval, and who is lower (:func:`verdict.verdict`, with its margin); the ratio
    named with its folder's ``label`` when the text shows several."""
    names, out = g["runs"], []
    for row in g["rows"]:
        for i, p in enumerate(row.get("paired") or [], start=0):
            if not p or p["lo"] is None:
                continue
            say = verdict.words(p, names[0], names[i])
            if say == "not separated" and (need := verdict.repetitions_for(p)):
                say += f" (about {need:,} repetitions would give a verdict at this spread)"
            ratio = labelled(f"{names[i]}/{names[0]}", label)
            out.append(f"paired over {p['n']} repetitions (same requests): {row['metric']} "
                       f"{ratio} {p['ratio']:.3f} (95% {p['lo']:.3f}-"
                       f"{p['hi']:.3f}, {verdict.describe_margin(p)}): {say}")
    return out


def log_ratios(ref: dict, other: dict, metric: str) -> dict:
    """Seed -> log(other / ref) of ``metric`` (a :data:`METRICS` label) in that repetition,
    where both runs have it."""
    get = next(g for label, g, *_ in METRICS if label == metric)
    a, b = per_seed(ref, get), per_seed(other, get)
    return {k: math.log(b[k] / a[k]) for k in a if a[k] and b.get(k)}


# whose measured tails follow the model's draws (docs/verdicts.md)
CONTROLLED_POLICIES = ("ecmp",)


def controlled(measured: list[dict], model: list[dict]) -> list[dict]:
    """The paired figures of ``measured`` runs with the model's runs of the same scenario
    (the same run names, over the same seeds and more) as a control variate
    (:func:`metrics.controlled_ratio`), per placement, run and :data:`PAIRED` figure:
    ``{"placement", "metric", "ref", "run", "many", "n", "ratio", "lo", "hi", "rho"}``
    (``many``: the model's draws other than the measured ones, whose mean the control's
    is).  Only for runs of :data:`CONTROLLED_POLICIES`: a spraying run's tail is set by how
    its sub-flows' segments meet in the emulator, not by which paths were drawn (its
    correlation with the model's draws is near 0), so it keeps its plain interval."""
    mine = {(r.get("placement"), r["run"]): r for r in measured}
    theirs = {(r.get("placement"), r["run"]): r for r in model}
    out = []
    for g in comparison(model):
        where, names = g["placement"], g["runs"]
        ref = mine.get((where, names[0]))
        for name in names[1:]:
            other = mine.get((where, name))
            if other and other.get("policy") not in CONTROLLED_POLICIES:
                continue
            for metric in PAIRED if ref and other else ():
                ys = log_ratios(ref, other, metric)
                xs = log_ratios(theirs[(where, names[0])], theirs[(where, name)], metric)
                seeds = [k for k in ys if k in xs]
                many = [x for k, x in xs.items() if k not in ys]     # the other draws
                c = metrics.controlled_ratio([ys[k] for k in seeds], [xs[k] for k in seeds],
                                             many)
                if c:
                    c["margin"] = verdict.margin_for(metric, ref.get("backend"),
                                                     other.get("backend"))
                    out.append({"placement": where, "metric": metric, "ref": names[0],
                                "run": name, "many": len(many), **c})
    return out


CSV_FIELDS = ("placement", "metric", "run", "fabric", "value", "ci95", "ratio_to_first",
              "estimator", "folder")


def to_csv(groups: list[dict]) -> str:
    """Long format, one row per (placement, metric, run): what pandas reads straight;
    ``estimator`` says what ``value`` is (``mean_of_reps`` with its ``ci95``, or
    ``pooled``); ``folder`` is the output folder the run is from, whose first run
    ``ratio_to_first`` is to."""
    return csv_text(([g["placement"], row["metric"], run, fab, v, c, r, e, g.get("folder")]
                     for g in groups for row in g["rows"]
                     for run, fab, v, c, r, e in zip(g["runs"], g["fabrics"], row["values"],
                                                     row["ci95"], row["ratios"],
                                                     row["estimators"])), CSV_FIELDS)


def cmd_compare(args) -> int:
    runs = load_runs(args.dirs)
    groups = comparison(runs)
    if args.format == "json":
        print(json.dumps(groups, indent=1))
    elif args.format == "csv":
        print(to_csv(groups), end="")
    else:
        print(to_text(groups), end="")
    return 0
