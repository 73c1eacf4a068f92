"""Compare only the repetitions every run carried faithfully (``zcube compare
--faithful-reps``, ``bench_repeat.py --faithful-reps``).

A run is faithful when every one of its repetitions kept up; on a virtual machine whose
host takes its CPUs now and then, a long run (hundreds of ECMP draws, an hour) almost never
is, although most of its repetitions are.  Each repetition carries its own fidelity record
(``per_rep[i]["fidelity"]``), so a comparison can be made over the seeds that every run of
a placement carried faithfully, still paired by seed (the same requests on every fabric),
with each figure's mean and interval over those seeds alone.

The choice of seeds goes by the emulator's records, never by the figures.  It is not free
of bias: a repetition can fall behind because its own traffic is bursty, not only because
the host was busy, so the text says how many seeds were kept and the whole runs' verdicts
stay beside it (compare both before trusting either).
"""
from __future__ import annotations

from testbed.errors import UsageError
from testbed.experiment.records import spreads


def _kept(doc: dict) -> set:
    """The seeds of ``doc`` whose repetition was faithful (or not measured: the model)."""
    return {rep.get("seed") for rep in doc.get("per_rep") or []
            if (rep.get("fidelity") or {}).get("faithful") is not False}


def faithful_reps(runs: list[dict]) -> list[dict]:
    """``runs`` (summaries, :func:`testbed.analysis.compare.load_runs`) cut to the seeds
    that every run of the same placement carried faithfully: ``per_rep``, ``spread`` and
    ``repetitions`` over those seeds, the run's record marked faithful over them, and
    ``faithful_reps`` = ``{"kept", "of", "seeds", "whole_run"}`` (``whole_run``: the run's
    own verdict and reasons).  A usage error where a placement keeps fewer than two seeds."""
    seeds: dict[str, set] = {}
    for r in runs:
        key = r.get("placement") or "-"
        seeds[key] = _kept(r) if key not in seeds else seeds[key] & _kept(r)
    out = []
    for r in runs:
        keep = seeds[r.get("placement") or "-"]
        if len(keep) < 2:
            raise UsageError(f"{r.get('run', '?')}: only {len(keep)} seed(s) carried faithfully "
                             "by every run of its placement; too few to compare")
        per_rep = [rep for rep in r.get("per_rep") or [] if rep.get("seed") in keep]
        fid = r.get("fidelity") or {}
        doc = {**r, "per_rep": per_rep, "spread": spreads(per_rep),
               "repetitions": len(per_rep),
               "faithful_reps": {"kept": len(per_rep), "of": len(r.get("per_rep") or []),
                                 "seeds": sorted(keep),
                                 "whole_run": {"faithful": fid.get("faithful"),
                                               "reasons": fid.get("reasons") or []}}}
        if fid:
            doc["fidelity"] = {**fid, "faithful": True, "reasons": []}
        out.append(doc)
    return out


def note(runs: list[dict]) -> str:
    """One line saying what a comparison cut by :func:`faithful_reps` holds."""
    cut = [r for r in runs if r.get("faithful_reps")]
    if not cut:
        return ""
    parts = [f"{r['run']} {r['faithful_reps']['kept']} of {r['faithful_reps']['of']}"
             + ("" if r["faithful_reps"]["whole_run"]["faithful"] is not False
                else " (the whole run not faithful)") for r in cut]
    return ("faithful repetitions only: the seeds every run of a placement carried faithfully, "
            "by the emulator's own records (" + ", ".join(parts) + "); values, intervals and "
            "paired ratios are over those seeds, counts over every repetition")
