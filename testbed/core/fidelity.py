"""Did the emulator keep up?  The fidelity record of an emulated run (its own timing, as
Mininet-HiFi monitors it) and the :data:`THRESHOLDS` it must meet to be called faithful; no
winner is named from a run that is not (docs/fidelity.md lists every figure).
"""
from __future__ import annotations

from typing import Optional

from testbed.core import metrics

THRESHOLDS = {
    "lateness_p99_ms": 2.0,            # transfers start within 2 ms of their planned time
    "datapath_p99": 0.80,              # OVS's busiest thread below 80% of one core
    "isolated_p50_min": 0.95,          # isolated FCT / ideal, median, in [0.95, 1.10]
    "isolated_p50_max": 1.10,
    "isolated_p99_max": 1.25,          # and its P99 at most 1.25
    "emulator_loss_max": 0.001,        # at most 0.1% of packets lost outside the queues
    "web_cpu_share_max": 0.05,         # the live view's server under 5% of one core
    "saturated_share_max": 0.01,       # at most 1% of transfers in a saturated window
    "stolen_share_max": 0.01,          # and at most 1% in a window the hypervisor took
}


# steal is named from this share of a 100 ms window on: three of /proc/stat's 10 ms ticks on two
# CPUs, as calm runs reach one tick (0.05) and a busy host's late starts come with three
STEAL_NOTED = 0.15

# isolated transfers are measured again from two ticks on, as two can stretch a transfer of a
# few tens of ms by a tenth or more
STEAL_ISOLATED = 0.10

# a datagram of the datapath probe later than this stalled: the lateness bound (the probe's
# median is about 0.3 ms on an idle fabric)
STALL_MS = 2.0

# the reason a record gives when its transfers started late
LATE = "transfers started late"


def judge(lateness_ms: Optional[dict], datapath: Optional[dict],
          isolated: Optional[dict], loss: Optional[dict] = None,
          web_cpu_share: Optional[float] = None, saturated: Optional[dict] = None,
          stolen: Optional[dict] = None) -> dict:
    """``{"faithful": bool, "reasons": [...]}`` from the records (None: not measured,
    which is itself a reason for the first three; a loss record is judged when given and
    its ``judged`` is not false; the live view's share only when it ran; the transfers in
    saturated windows when counted)."""
    t, reasons = THRESHOLDS, []
    if web_cpu_share is not None and web_cpu_share > t["web_cpu_share_max"]:
        reasons.append(f"the live view's server took {web_cpu_share:.0%} of a core during "
                       f"the workload > {t['web_cpu_share_max']:.0%}")
    if loss and loss.get("judged", True) and loss["lost_share"] > t["emulator_loss_max"]:
        reasons.append(f"the emulator lost {loss['lost_in_emulator']} of "
                       f"{loss['sent_packets']} packets ({loss['lost_share']:.2%}) outside "
                       f"the shaped queues > {t['emulator_loss_max']:.1%}")
    if not lateness_ms:
        reasons.append("schedule lateness not measured")
    elif lateness_ms["p99"] > t["lateness_p99_ms"]:
        reasons.append(f"{LATE}: lateness p99 {lateness_ms['p99']:.2f} ms "
                       f"> {t['lateness_p99_ms']:g} ms")
    if not datapath:
        reasons.append("datapath load not measured")
    elif datapath["p99"] > t["datapath_p99"]:
        reasons.append(f"the datapath fell behind: its busiest thread at {datapath['p99']:.0%}"
                       f" of a core (p99 of 100 ms windows) > {t['datapath_p99']:.0%}")
    if not isolated or isolated.get("p50") is None:
        reasons.append("isolated transfers not measured")
    else:
        p50, p99 = isolated["p50"], isolated["p99"]
        if not t["isolated_p50_min"] <= p50 <= t["isolated_p50_max"]:
            reasons.append(f"isolated transfers take {p50:.2f}x their ideal (median), outside "
                           f"[{t['isolated_p50_min']:g}, {t['isolated_p50_max']:g}]")
        if p99 > t["isolated_p99_max"]:
            reasons.append(f"isolated transfers' P99 is {p99:.2f}x their ideal "
                           f"> {t['isolated_p99_max']:g}")
    if saturated and saturated["share"] > t["saturated_share_max"]:
        reasons.append(f"{saturated['transfers']} of {saturated['of']} transfers "
                       f"({saturated['share']:.1%}) were in flight while the datapath's "
                       f"busiest thread ran at {t['datapath_p99']:.0%} of a core or more in a "
                       f"100 ms window > {t['saturated_share_max']:.0%}: the FCT P99 may be "
                       "the emulator's")
    if stolen and stolen["share"] > t["stolen_share_max"]:
        reasons.append(f"{stolen['transfers']} of {stolen['of']} transfers "
                       f"({stolen['share']:.1%}) were in flight while the hypervisor took "
                       f"{STEAL_NOTED:.0%} of the CPUs or more in a 100 ms window > "
                       f"{t['stolen_share_max']:.0%}: the FCT P99 may be the host's")
    return {"faithful": not reasons, "reasons": reasons}


def in_flight(row: dict, start: float, end: float, span: tuple = ("start_s", "end_s")) -> bool:
    """Whether a finished transfer's row (``start_s``/``end_s``, or the times ``span`` names)
    was in flight at some time in the window from ``start`` to ``end`` (the same clock)."""
    return start < row[span[1]] and end > row[span[0]]


def saturated(rows, hot: list) -> dict:
    """How many of ``rows`` (with ``start_s``/``end_s``) were in flight during one of the
    ``hot`` windows (``(start, end, ...)`` on the same clock): ``{"windows", "transfers",
    "of"}``."""
    done = [r for r in rows if r.get("start_s") is not None and r.get("end_s") is not None]
    hit = sum(1 for r in done if any(in_flight(r, a, b) for a, b, *_ in hot))
    return {"windows": len(hot), "transfers": hit, "of": len(done)}


def _windows_total(measured: list, key: str = "saturated") -> Optional[dict]:
    """The repetitions' counts of transfers in hot windows (``key``: ``saturated``,
    ``stolen`` or ``stalled``; ``probing``, which has no windows) summed, with their share."""
    got = [m[key] for m in measured if m.get(key)]
    if not got:
        return None
    out = {k: sum(g[k] for g in got) for k in ("windows", "transfers", "of") if k in got[0]}
    out["share"] = round(out["transfers"] / out["of"], 4) if out["of"] else 0.0
    return out


def probe_figures(records: list, t0: float, cpu_share: Optional[float] = None,
                  wakes: Optional[list] = None) -> tuple[Optional[dict], list]:
    """The datapath probe's figures for one repetition from its datagrams' ``(sent,
    received)`` Unix times (received None: lost), the probe process's own CPU share of a
    core and its wake-ups' ``(Unix time, ms late)``, and the stalls as ``(start, end, delay
    ms)``, in seconds from ``t0`` (for :func:`saturated`)."""
    if not records:
        return None, []
    got = [(s, (r - s) * 1000) for s, r in records if r is not None]
    spans = [(s - t0, s - t0 + d / 1000, round(d, 4)) for s, d in got if d > STALL_MS]
    out = {"sent": len(records), "lost": len(records) - len(got), "stalls": len(spans),
           "cpu_share": None if cpu_share is None else round(cpu_share, 4),
           "delays_ms": [round(d, 4) for _, d in got]}
    if wakes:
        out["wakes_ms"] = [round(late, 4) for _, late in wakes]
    return out, spans


def _probe(measured: list) -> Optional[dict]:
    """The repetitions' probe figures pooled: datagrams sent and lost, the delay's p50, p99
    and maximum in ms, the stalls (datagrams over :data:`STALL_MS`), and the probe's own
    CPU share of a core in its busiest repetition (it shares the machine)."""
    got = [m["probe"] for m in measured if m.get("probe")]
    delays = [d for g in got for d in g["delays_ms"]]
    if not delays:
        return None
    out = {"sent": sum(g["sent"] for g in got), "lost": sum(g["lost"] for g in got),
           "p50_ms": round(metrics.percentile(delays, 50), 3),
           "p99_ms": round(metrics.percentile(delays, 99), 3),
           "max_ms": round(max(delays), 3), "stall_ms": STALL_MS,
           "stalls": sum(g["stalls"] for g in got),
           "cpu_share": max((g["cpu_share"] for g in got if g.get("cpu_share") is not None),
                            default=None)}
    wakes = [w for g in got for w in g.get("wakes_ms") or ()]     # older records have none
    if wakes:
        out.update(wakes=len(wakes), wake_p50_ms=round(metrics.percentile(wakes, 50), 3),
                   wake_p99_ms=round(metrics.percentile(wakes, 99), 3),
                   wake_max_ms=round(max(wakes), 3))
    return out


def _stalled(rows, measured: list) -> Optional[dict]:
    """The transfers in flight during a datapath stall (:func:`_windows_total`), and of the
    slowest 1% of transfers by FCT (at least one) how many went through one (``tail``,
    ``tail_of``; transfers.csv's ``stall_ms`` over 0): where they are most, the FCT P99 is
    the emulator's stalls more than the fabric."""
    out = _windows_total(measured, "stalled")
    done = [r for r in rows if r.get("fct_ms") is not None and r.get("stall_ms") is not None]
    if out is None or not done:
        return out
    top = sorted(done, key=lambda r: -r["fct_ms"])[:max(1, len(done) // 100)]
    return dict(out, tail=sum(1 for r in top if r["stall_ms"] > 0), tail_of=len(top))


def lateness_ms(rows) -> Optional[list]:
    """How late (ms) each transfer was handed to its connection: ``start_s - ready_s``."""
    out = [(r["start_s"] - r["ready_s"]) * 1000 for r in rows
           if r.get("start_s") is not None and r.get("ready_s") is not None]
    return out or None


def _lateness_stats(rows) -> Optional[dict]:
    late = lateness_ms(rows)
    if not late:
        return None
    out = metrics.stats(late, (50, 99))
    out["max"] = round(max(late), 3)
    return out


def _datapath(measured: list, worst: dict) -> Optional[dict]:
    """The datapath's load over the run: p50, p99 and max of every repetition's 100 ms
    windows pooled (``busiest``), as the lateness pools every transfer, so that a run of
    many repetitions is held to the same p99 as a run of one; the worst repetition's
    figures where a record lacks its windows (older records)."""
    if not all(m.get("busiest") for m in measured):
        return worst.get("datapath")
    return window_figures([x for m in measured for x in m["busiest"]])


def window_figures(xs: list) -> Optional[dict]:
    """``{"p50", "p99", "max"}`` of per-window shares (None without a window): what the
    record gives of the datapath's busiest thread, for one repetition or a run."""
    if not xs:
        return None
    return {"p50": round(metrics.percentile(xs, 50), 4),
            "p99": round(metrics.percentile(xs, 99), 4), "max": round(max(xs), 4)}


def record(rows, measured: Optional[list]) -> Optional[dict]:
    """The fidelity record of a run from its transfer rows (all repetitions) and what the
    backend measured for each repetition (:class:`testbed.core.backend.WorkloadResult`
    ``fidelity``): lateness over every transfer, the datapath load over every window, the
    least idle repetition's machine idle share, the isolated transfers, and the verdict.
    None when the backend measures nothing (the model)."""
    measured = [m for m in measured or [] if m]
    if not measured:
        return None
    worst = max(measured, key=lambda m: (m.get("datapath") or {}).get("p99", -1.0))
    idles = [m["machine_idle"] for m in measured if m.get("machine_idle")]
    isolated = next((m["isolated"] for m in measured if m.get("isolated")), None)
    losses = [m["loss"] for m in measured if m.get("loss")]
    loss = max(losses, key=lambda x: (x.get("judged", True), x["lost_share"]), default=None)
    lat = _lateness_stats(rows)
    out = {"lateness_ms": lat, "datapath": _datapath(measured, worst),
           "machine_idle": min(idles, key=lambda i: i["mean"]) if idles else None,
           "machine_steal": max((m["machine_steal"] for m in measured
                                 if m.get("machine_steal")), key=lambda x: x["max"],
                                default=None),
           "window_s": worst.get("window_s"), "isolated": isolated, "loss": loss,
           "saturated": _windows_total(measured),
           "stolen": _windows_total(measured, "stolen"), "probe": _probe(measured),
           "stalled": _stalled(rows, measured), "probing": _windows_total(measured, "probing"),
           "thresholds": dict(THRESHOLDS)}
    web = [m for m in measured if m.get("web_cpu_s") is not None]
    share = max((m["web_cpu_share"] for m in web), default=None)
    if web:                                   # the live view's server (--web) ran beside
        out["web_cpu_s"] = round(sum(m["web_cpu_s"] for m in web), 6)
        out["web_cpu_share"] = share          # the busiest repetition's, of one core
    out.update(judge(lat, out["datapath"], isolated, loss, share, out["saturated"],
                     out["stolen"]))
    steal = busy_host_steal(out)
    if steal:
        out["reasons"].append(f"the hypervisor took up to {steal:.0%} of the CPUs in a 100 ms "
                              "window (steal): the machine's host was busy; repeat when it "
                              "is quieter")
    return out


def held_back(rows, measured: Optional[dict]) -> Optional[dict]:
    """Why one repetition may be run again, ``{"cause", "reasons", "steal_max"}``, or None
    (faithful, not measured, or not faithful for a reason a second run would not change).
    ``cause`` is ``"host"`` when it was not faithful while the hypervisor took at least
    :data:`STEAL_NOTED` of the CPUs in a window, ``"late"`` when its transfers alone started
    late (the emulated network kept up while the machine under the agents was slow)."""
    rec = record(rows, [measured])
    if not rec or rec["faithful"]:
        return None
    steal = busy_host_steal(rec)
    if steal:
        cause = "host"
    elif all(r.startswith(LATE) for r in rec["reasons"]):
        cause = "late"
    else:
        return None
    out = {"cause": cause, "reasons": rec["reasons"],
           "steal_max": (rec.get("machine_steal") or {}).get("max") or 0.0}
    if "wake_p99_ms" in (rec.get("probe") or {}):   # what the machine's timers gave alone
        out["wake_p99_ms"] = rec["probe"]["wake_p99_ms"]
    return out


def held_back_text(why: dict) -> str:
    """``why`` (:func:`held_back`) in words, for the console."""
    if why["cause"] == "host":
        return (f"not faithful while the host was busy ({why['reasons'][0]}; the hypervisor "
                f"took up to {why['steal_max']:.0%} of the CPUs in a 100 ms window)")
    wake = ("" if why.get("wake_p99_ms") is None else
            f"; the probe's timer woke p99 {why['wake_p99_ms']:g} ms late")
    return (f"not faithful on its start times alone ({why['reasons'][0]}; the datapath kept "
            f"up, the hypervisor took at most {why['steal_max']:.0%} of the CPUs in a 100 ms "
            f"window{wake}; the machine may have been slow)")


def busy_host_steal(rec: dict) -> float:
    """The busiest window's steal when the record is not faithful and it reached
    :data:`STEAL_NOTED`, else 0."""
    steal = (rec.get("machine_steal") or {}).get("max") or 0.0   # older records have none
    return steal if rec.get("faithful") is False and steal >= STEAL_NOTED else 0.0


def one_line(fid: Optional[dict]) -> str:
    """The record in one console line."""
    if not fid:
        return "fidelity: not measured"
    lat, dp = fid.get("lateness_ms") or {}, fid.get("datapath") or {}
    iso, idle = fid.get("isolated") or {}, fid.get("machine_idle") or {}
    loss = fid.get("loss") or {}
    head = "faithful" if fid["faithful"] else "NOT faithful (" + "; ".join(fid["reasons"]) + ")"
    return (f"fidelity: {head}; lateness p99 {lat.get('p99')} ms, datapath p99 "
            f"{dp.get('p99')} of a core, machine idle {idle.get('mean')}"
            + (f" (steal max {steal['max']})" if (steal := fid.get("machine_steal")) else "")
            + ", isolated FCT/ideal "
            f"p50 {iso.get('p50')} p99 {iso.get('p99')}"
            + (f" ({iso['stalled']} through a datapath stall)" if iso.get("stalled") else "")
            + (f" ({iso['probing']} at a window of 4)" if iso.get("probing") else "")
            + f", lost in the emulator "
            f"{loss.get('lost_in_emulator')} of {loss.get('sent_packets')} packets "
            f"(queues dropped {loss.get('queue_drops')})"
            + (f", in flight in a saturated datapath window {sat['transfers']} of {sat['of']} "
               "transfers" if (sat := fid.get("saturated")) else "")
            + (f", in a stolen window {st['transfers']} of {st['of']}"
               if (st := fid.get("stolen")) else "")
            + (f", datapath probe p99 {pr['p99_ms']} ms max {pr['max_ms']} ms, "
               f"{pr['stalls']} stalls over {pr['stall_ms']:g} ms"
               + (f" ({sd['transfers']} of {sd['of']} transfers in flight during one"
                  + (f", {sd['tail']} of the slowest {sd['tail_of']}" if "tail" in sd else "")
                  + ")" if (sd := fid.get("stalled")) else "")
               + (f", its timer's wake-ups p99 {pr['wake_p99_ms']} ms late"
                  if "wake_p99_ms" in pr else "")
               if (pr := fid.get("probe")) else "")
            + (f", {pb['transfers']} of {pb['of']} transfers at a window of 4 segments"
               if (pb := fid.get("probing")) and pb["transfers"] else "")
            + (f", live view {fid['web_cpu_share']} of a core"
               if fid.get("web_cpu_share") is not None else "")
            + (f", {len(aside)} repetition(s) run again ({_causes(aside)})"
               if (aside := fid.get("set_aside")) else "")
            + (f", {len(stop)} late again and kept (running again stopped)"
               if (stop := fid.get("not_run_again")) else ""))


def _causes(aside: list) -> str:
    """How many set-aside repetitions had each cause (records from before ``cause`` were
    all the host's)."""
    host = sum(1 for a in aside if a.get("cause", "host") == "host")
    late = len(aside) - host
    return ", ".join(x for x in (f"{host} host busy" if host else "",
                                 f"{late} started late" if late else "") if x)


def runs_held_back(docs: list[dict]) -> list[str]:
    """The runs (summaries of one scenario's run) that were not faithful while the
    hypervisor took at least :data:`STEAL_NOTED` of the CPUs in a window, as ``"name
    (steal max NN%)"``: a run measured beside the host's neighbours, which a benchmark of
    repeatability runs again rather than counting (the choice is made on the host's steal
    and the record, never on the ratios)."""
    out = []
    for d in docs:
        steal = busy_host_steal(d.get("fidelity") or {})
        if steal:
            out.append(f"{d.get('run', '?')} (steal max {steal:.0%})")
    return out
