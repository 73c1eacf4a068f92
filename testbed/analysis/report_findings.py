"""The report's findings in plain sentences, from the comparison's numbers: who is lower on
which figure and by how much (only from faithful runs, paired by seed), the measured reasons
beside the verdicts, and what each fabric costs."""
from __future__ import annotations

from testbed.analysis.compare import paired_of
from testbed.analysis.verdict_table import switches_sentence
from testbed.core import verdict as rule


def as_text(v, digits=2) -> str:
    """A figure in a sentence or a plain cell: a float to ``digits`` places, an int with
    thousands separators, anything else as it is (:func:`compare.fmt` is the tables')."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def _why_unfaithful(g: dict, bad: list) -> str:
    """Why runs were not faithful and what to do: the machine's host, when the hypervisor
    took a noted share of the CPUs in every one of them, else the emulator."""
    steals = [(g.get("host_steal") or {}).get(run) or 0.0 for run in bad]
    if min(steals) > 0:
        return (f"(the machine's host was busy: the hypervisor took up to {max(steals):.0%} "
                "of the CPUs in a 100 ms window; see Fidelity). Repeat the run when the host "
                "is quieter.")
    return ("(the emulator did not keep up; see Fidelity). Repeat the run at a lower rate or "
            "on a machine with more cores.")


def _verdicts(g: dict) -> list[str]:
    """Who is lower on FCT p50, FCT p99 and TTFT p99 against the group's first run, by the
    one verdict rule (:func:`testbed.core.verdict.verdict`), or why no winner is named."""
    out, names = [], g["runs"]
    rows = {r["metric"]: r for r in g["rows"]}
    faithful = g.get("faithful") or [None] * len(names)
    for i, other in enumerate(names[1:], start=1):
        bad = [names[j] for j in (0, i) if faithful[j] is False]
        if bad:
            out.append(f"[{g['placement']}] No winner is named between {names[0]} and "
                       f"{other}: {' and '.join(bad)} {'was' if len(bad) == 1 else 'were'} "
                       f"not faithful {_why_unfaithful(g, bad)}")
            continue
        for metric in ("FCT p50 ms", "FCT p99 ms", "TTFT p99 ms"):
            row = rows[metric]
            a, b = row["values"][0], row["values"][i]
            if a is None or b is None or not a:
                continue
            paired = paired_of(row, i)
            if paired and paired["lo"] is not None:
                said = _paired_verdict(names[0], other, metric, a, b, paired)
            else:
                said = (f"No verdict on {metric[:-3]} between {names[0]} and {other} "
                        f"({as_text(a)} vs {as_text(b)} ms): a verdict needs repetitions "
                        "paired by seed (--repetitions 5 or more).")
            out.append(f"[{g['placement']}] {said}")
    return out


def _paired_verdict(ref: str, other: str, metric: str, a: float, b: float, p: dict) -> str:
    """A verdict from the ratio paired by seed (the same requests on both fabrics)."""
    what = metric[:-3]
    margin = p.get("margin") or rule.FLOOR
    interval = (f"paired ratio {other}/{ref} {p['ratio']:.3f}, 95% interval {p['lo']:.3f}-"
                f"{p['hi']:.3f}, over {p['n']} repetitions with the same requests; "
                f"equivalence margin {margin:.1%}")
    v = rule.verdict(p)
    if v in rule.WINNERS:
        winner, loser = (ref, other) if v == "ref" else (other, ref)
        return (f"{winner} is lower on {what}: {as_text(min(a, b))} ms against "
                f"{as_text(max(a, b))} ms for {loser} ({interval}).")
    if v == "level":
        return (f"{ref} and {other} are level on {what} ({as_text(a)} vs {as_text(b)} ms; "
                f"{interval}: the whole interval lies within the margin).")
    need = rule.repetitions_for(p)
    return (f"{ref} and {other} are not separated on {what} ({as_text(a)} vs {as_text(b)} ms; "
            f"{interval}): the interval crosses the margin, so it names no winner and does "
            "not show them level; "
            + (f"about {need:,} repetitions would settle it if the ratio and its spread "
               f"stayed as measured (--repetitions {need})." if need else
               "no number of repetitions up to 1,000 would settle it at this spread."))


def _reasons(g: dict, runs: dict) -> list[str]:
    """The measured reasons offered beside the verdicts: switches crossed, time to first
    byte and slowdown, prefill share of TTFT (all from summary.json)."""
    out, names, tag = [], g["runs"], f"[{g['placement']}]"
    hops = {n: runs[n].get("hops_mean") for n in names}
    if all(h is not None for h in hops.values()):
        util = next(r["values"] for r in g["rows"] if r["metric"] == "link util max")
        out.append(f"{tag} {switches_sentence(hops, util)}")
    ttfb = {n: (runs[n].get("ttfb_ms") or {}).get("p50") for n in names}
    slow = {n: (runs[n].get("slowdown") or {}).get("p50") for n in names}
    if all(v is not None for v in ttfb.values()) and all(v is not None for v in slow.values()):
        out.append(f"{tag} Median time from a transfer's start to its first byte at the "
                   "receiver: " + ", ".join(f"{n} {v:.1f} ms" for n, v in ttfb.items())
                   + "; median FCT over the time its bytes need at the full NIC rate: "
                   + ", ".join(f"{n} {v:.2f}x" for n, v in slow.items())
                   + ". Where both are far above 1x the transfers are short enough that "
                     "connection start-up and per-hop latency, not bandwidth, set the FCT.")
    share = {n: runs[n]["prefill_share_of_ttft"] for n in names
             if runs[n].get("prefill_share_of_ttft") is not None}
    if share:
        out.append(f"{tag} Prefill (queueing included) is "
                   + ", ".join(f"{100 * s:.0f}% of the mean TTFT on {n}" for n, s in share.items())
                   + ": where it dominates, fabric differences move TTFT little.")
    return out


def _cost_findings(runs: dict) -> list[str]:
    costs: dict = {}
    for s in runs.values():
        costs.setdefault(s["fabric"], s["cost"])
    if len(costs) < 2:
        return []
    (fa, ca), *rest = list(costs.items())
    return [f"Cost: {fa} uses {ca['switches']} switches and "
            f"{ca['switch_port_gbps'] / 1000:.1f} Tb/s of switch ports; {fb} uses "
            f"{cb['switches']} switches and {cb['switch_port_gbps'] / 1000:.1f} Tb/s "
            f"({ca['switch_port_gbps'] / cb['switch_port_gbps']:.2f}x)." for fb, cb in rest]


def findings(groups: list[dict], runs: dict) -> list[str]:
    """Plain-language statements drawn from the numbers: who wins which metric, by how much,
    and the measured reasons offered alongside (switches crossed, prefill share of TTFT)."""
    out = []
    for g in groups:
        if len(g["runs"]) >= 2:
            out += _verdicts(g) + _reasons(g, runs)
    return out + _cost_findings(runs)
