"""The order in which a scenario's fabrics carry their repetitions (scenario key ``order``,
``zcube run --order``): each fabric in one session, or in mirrored halves (no root)."""
import dataclasses

import pytest

from testbed.cli.main import make_parser
from testbed.cli.run import with_flags
from testbed.core import fidelity
from testbed.experiment.repetitions import Part, plan
from testbed.experiment.runner import run_scenario
from testbed.experiment.scenario import ScenarioError, describe, loads
from testbed.model.backend import ModelBackend

# an emulated repetition's records with every figure inside its threshold
CALM = {"datapath": {"p50": 0.2, "p99": 0.5, "max": 0.6}, "machine_idle": {"mean": 0.5,
                                                                           "min": 0.3},
        "window_s": 0.1, "isolated": {"p50": 1.02, "p99": 1.1, "n": 10, "kinds": []}}

SCENARIO = """\
name: ord
backend: model
repetitions: 4
fabrics:
  - {name: zc, builder: zcube, params: {n: 4, gpus_per_server: 4}}
  - {name: rf, builder: roft, params: {servers: 4, gpus_per_server: 4}}
workload: {arrivals: poisson, rate: 4, count: 6}
sweep: {rates: [2], slo_ttft_ms: 1000, count: 3}
"""


def test_by_fabric_each_fabric_is_one_session_with_its_sweep_last():
    assert plan(2, 8) == [Part(0, 0, 8, 8, True), Part(1, 0, 8, 8, True)]


def test_mirrored_halves_and_the_last_fabric_whole_with_its_sweep_between():
    assert plan(2, 8, "mirrored") == [Part(0, 0, 4, None, False), Part(1, 0, 8, 4, True),
                                      Part(0, 4, 8, 8, True)]
    assert [p.fabric for p in plan(3, 5, "mirrored")] == [0, 1, 2, 1, 0]


@pytest.mark.parametrize("fabrics, seeds", [(1, 8), (2, 1), (4, 7), (3, 2)])
def test_mirrored_carries_every_seed_once_in_order_and_one_sweep_per_fabric(fabrics, seeds):
    parts = plan(fabrics, seeds, "mirrored")
    for i in range(fabrics):
        mine = [p for p in parts if p.fabric == i]
        assert [k for p in mine for k in range(p.start, p.stop)] == list(range(seeds))
        assert sum(p.sweep_at is not None for p in mine) == 1 and mine[-1].last
        assert not any(p.last for p in mine[:-1])
    if fabrics == 1 or seeds == 1:
        assert parts == plan(fabrics, seeds)


@pytest.mark.parametrize("order", ["fabric", "mirrored"])
@pytest.mark.parametrize("counts", [[8, 4, 8], [8, 1, 8], [8, 8, 3], [1, 8, 2]])
def test_a_fabric_carrying_fewer_carries_its_first_seeds_and_its_sweep(order, counts):
    parts = plan(3, 8, order, counts)
    for i, c in enumerate(counts):
        mine = [p for p in parts if p.fabric == i]
        assert [k for p in mine for k in range(p.start, p.stop)] == list(range(c))
        assert sum(p.sweep_at is not None for p in mine) == 1 and mine[-1].last
        assert not any(p.last for p in mine[:-1])
    assert plan(3, 8, order, [8] * 3) == plan(3, 8, order)


class Ordered:
    """The model backend under the emulation's name, remembering what each session ran:
    (fabric label, seed, requests) per run, and "up" when a session opens; ``alter``, when
    given, changes what each run gave."""
    name = "emulation"

    def __init__(self, alter=None):
        self.log, self.alter = [], alter or (lambda got: got)

    def session(self, fabric, policy, options):
        inner, log, alter = ModelBackend().session(fabric, policy, options), self.log, self.alter

        class Session:
            def __enter__(self):
                inner.__enter__()
                log.append(("up", fabric.label))
                return self

            def __exit__(self, *exc):
                return inner.__exit__(*exc)

            def __getattr__(self, key):
                return getattr(inner, key)

            def run(self, work, faults=None):
                log.append((fabric.label, work.seed, len(work.schedule)))
                return alter(inner.run(work, faults))
        return Session()


def test_the_runner_carries_in_mirrored_order_and_writes_the_same_runs(tmp_path):
    sc = loads(SCENARIO + "order: mirrored\n")
    be = Ordered()
    got = run_scenario(sc, str(tmp_path / "m"), backend=be, log=lambda msg: None)
    zc, rf = (s["fabric"] for s in got.values())
    ups = [e[1] for e in be.log if e[0] == "up"]
    carried = [(e[0], e[1]) for e in be.log if e[0] != "up" and e[2] == 6]
    swept = [e[0] for e in be.log if e[0] != "up" and e[2] == 3]
    assert ups == [zc, rf, zc] and swept == [rf, zc]
    assert carried == [(zc, 1), (zc, 2), (rf, 1), (rf, 2), (rf, 3), (rf, 4), (zc, 3), (zc, 4)]
    assert be.log.index((rf, 1, 3)) == be.log.index((rf, 2, 6)) + 1     # between the halves
    assert list(got) == ["zc", "rf"]
    assert got["zc"]["sessions"] == 2 and got["zc"]["order"] == "mirrored"
    assert "sessions" not in got["rf"]
    plain = run_scenario(loads(SCENARIO), str(tmp_path / "f"), backend=Ordered(),
                         log=lambda msg: None)
    for name in ("zc", "rf"):                        # the model: the same figures either way
        assert [r["seed"] for r in got[name]["per_rep"]] == [1, 2, 3, 4]
        assert got[name]["fct_ms"] == plain[name]["fct_ms"]
        assert got[name]["sweep"] == plain[name]["sweep"]


def test_other_backends_keep_the_fabric_order(tmp_path):
    """Only the emulation's pace drifts: the model carries mirrored scenarios by fabric."""
    seen = []

    class Model:
        name = "model"

        def session(self, fabric, policy, options):
            seen.append(fabric.label)
            return ModelBackend().session(fabric, policy, options)

    run_scenario(loads(SCENARIO + "order: mirrored\n"), str(tmp_path), backend=Model(),
                 log=lambda msg: None)
    assert len(seen) == 2 and seen[0] != seen[1]


def test_order_is_checked_and_listed_in_help():
    assert loads(SCENARIO).order == "fabric"
    with pytest.raises(ScenarioError) as err:
        loads(SCENARIO + "order: shuffled\n", "o.yaml")
    assert str(err.value).startswith("o.yaml:9: order:") and "\n" not in str(err.value)
    assert "order  emulation: fabric (each fabric's repetitions in one bring-up" in describe()


def test_the_command_line_replaces_it_and_the_run_says_so():
    args = make_parser().parse_args(["run", "demo", "--order", "mirrored"])
    sc = with_flags(loads(SCENARIO), args)
    assert sc.order == "mirrored" and sc.text.startswith("# run with --order mirrored")
    with pytest.raises(SystemExit) as out:
        make_parser().parse_args(["run", "demo", "--order", "shuffled"])
    assert out.value.code == 2


@pytest.mark.parametrize("order", ["fabric", "mirrored"])
def test_a_sweep_rate_that_is_the_workload_itself_reads_the_first_repetition(tmp_path, order):
    """The sweep's point at the scenario's own rate and count carries the first seed's
    requests again, so the runner reads it from that repetition instead of carrying it twice;
    the other rates are carried, and the figures are those of a sweep carried in full."""
    text = SCENARIO.replace("count: 3}", "count: 6, every_rate: true}").replace(
        "rates: [2]", "rates: [2, 4]")
    be, said = Ordered(), []
    got = run_scenario(loads(text + f"order: {order}\n"), str(tmp_path / order), backend=be,
                       log=said.append)
    zc = got["zc"]["fabric"]
    firsts = [e for e in be.log if e[:2] == (zc, 1)]
    assert len(firsts) == 2                  # repetition 1 and the 2/s point, not the 4/s one
    points = got["zc"]["sweep"]["points"]
    assert [p["repetition"] for p in points] == [None, 0]
    assert sum("(the first repetition's: the same requests)" in m for m in said) == 2
    full = run_scenario(loads(text.replace("rate: 4,", "rate: 3,")), str(tmp_path / "f"),
                        backend=Ordered(), log=lambda msg: None)
    assert [p["repetition"] for p in full["zc"]["sweep"]["points"]] == [None, None]
    assert [p["ttft_p99_ms"] for p in points] == [
        p["ttft_p99_ms"] for p in full["zc"]["sweep"]["points"]]


LATE = """\
name: late
backend: model
repetitions: 3
host_retries: 2
fabrics:
  - {name: zc, builder: zcube, params: {n: 4, gpus_per_server: 4}}
workload: {arrivals: poisson, rate: 4, count: 6}
"""


def _late(got):
    """Every transfer handed over 9 ms late with the emulated network calm: each run is
    held back for late starts."""
    late = [dict(r, start_s=r["ready_s"] + 0.009) for r in got.rows]
    return dataclasses.replace(got, rows=late, fidelity=dict(CALM, machine_steal={
        "mean": 0.0, "max": 0.05}))


def test_the_run_records_the_repetitions_it_did_not_carry_again(tmp_path):
    be, said = Ordered(alter=_late), []
    got = run_scenario(loads(LATE), str(tmp_path), backend=be, log=said.append)
    fid = got["zc"]["fidelity"]
    carries = [e for e in be.log if e[0] != "up"]
    assert len(carries) == 4 and not fid["faithful"]         # 0 twice, then 1 and 2 once
    assert [a["rep"] for a in fid["set_aside"]] == [0]
    assert [(e["rep"], e["how"]) for e in fid["not_run_again"]] == [
        (0, "late again"), (1, "not run again"), (2, "not run again")]
    assert sum("not run again" in m for m in said) == 3
    assert "3 late again and kept (running again stopped)" in fidelity.one_line(fid)


def test_a_fabric_with_fewer_repetitions_is_compared_over_the_seeds_it_shares(tmp_path):
    """``repetitions`` on a fabric: its first seeds only, in either order; the command
    line's ``--repetitions`` carries every fabric in full; more than the scenario's is an
    error on the fabric's line."""
    capped = SCENARIO.replace("gpus_per_server: 4}}\nworkload",
                              "gpus_per_server: 4}, repetitions: 2}\nworkload")
    assert capped != SCENARIO
    for order in ("fabric", "mirrored"):
        be = Ordered()
        got = run_scenario(loads(capped + f"order: {order}\n"), str(tmp_path / order),
                           backend=be, log=lambda msg: None)
        assert [r["seed"] for r in got["zc"]["per_rep"]] == [1, 2, 3, 4]
        assert [r["seed"] for r in got["rf"]["per_rep"]] == [1, 2]
        assert got["rf"]["repetitions"] == 2 and got["rf"]["sweep"] is not None
        rf = got["rf"]["fabric"]
        assert [e[1] for e in be.log if e[0] == rf and e[2] == 6] == [1, 2]
    from testbed.analysis.compare import comparison, load_runs
    group = comparison(load_runs([str(tmp_path / "fabric")]))[0]
    rows = {r["metric"]: r for r in group["rows"]}
    assert rows["switches"]["ratios"][1] is not None             # not the seeds' doing
    assert rows["transfers verified"]["ratios"][1] is None       # 2 repetitions against 4
    assert rows["FCT p99 ms"]["ratios"][1] is None
    assert rows["FCT p99 ms"]["paired"][1]["n"] == 2             # over the seeds both carried
    assert group["footnote"].endswith(
        "; a run over other seeds than the first run's has ratios only where the seeds do not "
        "matter (cost, SLO throughput), and its paired lines compare it over the seeds both ran")
    from testbed.analysis.report import _repetitions
    assert loads(capped).repetitions_said() == "4 repetitions (rf 2)"
    assert (_repetitions(load_runs([str(tmp_path / "fabric")]), [1, 2, 3, 4])
            == "4 repetition(s) each (seeds 1, 2, 3, 4; rf the first 2)")
    args = make_parser().parse_args(["run", "demo", "--repetitions", "3"])
    sc = with_flags(loads(capped), args)
    assert sc.repetitions == 3 and [f.repetitions for f in sc.fabrics] == [None, None]
    assert [f.reps_of(3) for f in sc.fabrics] == [3, 3]
    with pytest.raises(ScenarioError) as err:
        loads(capped.replace("repetitions: 2}", "repetitions: 5}"), "c.yaml")
    assert str(err.value).startswith("c.yaml:") and "fabrics[1].repetitions" in str(err.value)
    assert "from 1 to the scenario's repetitions (4), got 5" in str(err.value)


def test_the_sweep_stops_at_the_first_rate_from_the_top_that_meets_the_objective(tmp_path):
    """Run from the highest rate down, a sweep stops once one meets the objective: the
    rates below it cannot change the SLO throughput, which is the same as over every rate;
    ``every_rate: true`` runs them all."""
    text = SCENARIO.replace("rates: [2], slo_ttft_ms: 1000", "rates: [1, 2, 3, 40], "
                            "slo_ttft_ms: 600")
    runs = {}
    for every in ("false", "true"):
        be, said = Ordered(), []
        sc = loads(text.replace("count: 3}", f"count: 3, every_rate: {every}}}"))
        got = run_scenario(sc, str(tmp_path / every), backend=be, log=said.append)
        runs[every] = got["zc"]["sweep"], [e[1:] for e in be.log if e[0] != "up" and e[2] == 3]
    (cut, carried), (full, every_carried) = runs["false"], runs["true"]
    best = full["points"][[p["rate_per_s"] for p in full["points"]].index(3)]
    assert best["ttft_p99_ms"] <= 600 < full["points"][-1]["ttft_p99_ms"]   # 3 meets, 40 not
    assert [p["rate_per_s"] for p in cut["points"]] == [3, 40] and cut["not_run"] == [1, 2]
    assert cut["points"] == full["points"][2:] and full["not_run"] == []
    assert len(carried) == 2 * 2 and len(every_carried) == 4 * 2           # both fabrics
