"""The marks a row of the standings table (:mod:`testbed.analysis.verdict_table`) may have
beside its verdict (light load, 64 KB segments, datapath stalls, model as control), and the
line under the table that says why, once per mark.
"""
from __future__ import annotations

LIGHT_LOAD = 0.10       # busiest link under this share of its rate in every 0.5 s window
LIGHT = "light load"
SEGMENTS = "64 KB segments"
STALLS = "datapath stalls"
CONTROL = "model as control"

LIGHT_WHY = (f"No link was busier than {LIGHT_LOAD:.0%} of its rate in any 0.5 s window, so "
             "transfers hardly met: an FCT difference here is what each switch crossed costs "
             "at these scaled-down rates (a switch forwards a whole segment before the next hop "
             "starts: milliseconds here, nanoseconds at 400 Gb/s), not the fabric; such winners "
             "are marked light load.")

SEGMENTS_WHY = ("The emulator forwards the 64 KB segments large_segments has the hosts hand "
                "their ports whole, so sprayed sub-flows a few segments long that meet on a "
                "link take turns a segment at a time, where a real fabric interleaves their "
                "packets: on cross-rail this made the spraying Clos's FCT P99 13% longer "
                "than with 16 KB segments (docs/results.md, \"Packet spraying: the stronger "
                "baseline\"), so a spraying run's FCT here is longer than its fabric's.")

STALLS_WHY = ("Most of the slowest 1% of a run's transfers were in flight while the emulator's "
              "datapath stalled (a lone packet across it waited 2 ms or more for its one "
              "forwarding thread: the fidelity record's datapath probe, stalled.tail in "
              "summary.json), so that FCT P99 measures the emulator more than the fabric.")

CONTROL_WHY = ("Each of these ECMP runs' kept-open connections took the path the flow-level "
               "model draws for it, so the model on the same draws says how lucky the run's "
               "few draws of ECMP's hash were: the ratio is the run's difference from the "
               "model draw by draw plus the model's mean over its other draws, the interval "
               "counting both (docs/verdicts.md). Spraying runs keep their plain intervals: "
               "their tails do not follow the model's draws.")


def _pair(r: dict) -> str:
    return f"{r['scenario']} {r['placement']} {r['run']} / {r['reference']}"


def _marked_note(rows: list[dict], mark: str, why: str, where=_pair) -> str | None:
    """``(mark: where, where, ... why)`` over the rows marked ``mark``, each place once."""
    marked = [r for r in rows if mark in (r.get("note") or "").split("; ")]
    if not marked:
        return None
    return f"({mark}: {', '.join(dict.fromkeys(where(r) for r in marked))}. {why})"


def light_note(rows: list[dict]) -> str | None:
    """The line under a standings table that holds winners marked light load."""
    return _marked_note(rows, LIGHT, LIGHT_WHY, lambda r: (
        f"{r['scenario']} {r['placement']} ({r['hops_run']:.2f} switches per transfer on "
        f"{r['run']}, {r['hops_ref']:.2f} on {r['reference']})"))


def segments_note(rows: list[dict]) -> str | None:
    """The line under a standings table that holds winners marked 64 KB segments."""
    return _marked_note(rows, SEGMENTS, SEGMENTS_WHY)


def stalls_note(rows: list[dict]) -> str | None:
    """The line under a standings table that holds winners marked datapath stalls."""
    return _marked_note(rows, STALLS, STALLS_WHY)


def control_note(rows: list[dict]) -> str | None:
    """The line under a standings table that holds rows with the model as a control."""
    return _marked_note(rows, CONTROL, CONTROL_WHY)


def notes(rows: list[dict]) -> list[str]:
    """Every line a standings table's marks need, in the order of the marks in a row."""
    return [n for n in (light_note(rows), segments_note(rows),
                        stalls_note(rows), control_note(rows)) if n]
