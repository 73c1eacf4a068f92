"""One metrics module: its definitions against numpy and scipy, and every figure a run folder's
summary.json and report.html state against the run's own CSVs (model backend, pure)."""
import json
import math
import random
from html.parser import HTMLParser

import numpy as np
import pytest
from scipy import stats as sps

from controller.verify import jain as verifier_jain
from testbed.analysis.compare import comparison, load_runs, to_text
from testbed.cli.main import main
from testbed.core import metrics
from testbed.core.tables import csv_text, fewer, text_table
from testbed.experiment.summaries import SPREAD_KEYS

SCENARIO = """\
name: metrics
backend: model
repetitions: 3
fabrics:
  - {name: zc, builder: zcube, params: {n: 4, gpus_per_server: 4}, policy: zcube}
  - {name: rf, builder: roft, params: {servers: 4, gpus_per_server: 4}, policy: ecmp}
deployment: {placements: [cross-rail]}
workload: {arrivals: poisson, rate: 40, count: 16, input_tokens: 4096}
"""
RUNS = ("zc", "rf")                  # one placement: runs are named by fabric


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    d = tmp_path_factory.mktemp("metrics")
    (d / "s.yaml").write_text(SCENARIO)
    assert main(["run", str(d / "s.yaml"), "-o", str(d / "out")]) == 0
    return d / "out"


# -- definitions -----------------------------------------------------------------------------

@pytest.mark.parametrize("n", range(2, 41))
def test_t95_is_scipys_student_t(n):
    assert metrics.t95(n) == pytest.approx(sps.t.ppf(0.975, n - 1), rel=1e-12)


def test_t95_has_no_value_below_two_and_spread_uses_it_exactly():
    assert metrics.t95(1) is None and metrics.t95(0) is None
    xs = [float(x) for x in range(12)]                      # 11 degrees of freedom: 2.201
    want = sps.t.ppf(0.975, 11) * np.std(xs, ddof=1) / math.sqrt(12)
    assert metrics.spread(xs)["ci95"] == round(want, 4)
    assert metrics.t95(12) == pytest.approx(2.201, abs=5e-4)


@pytest.mark.parametrize("q", [0, 1, 25, 50, 90, 99, 99.9, 100])
def test_percentile_is_numpys_default(q):
    rng = np.random.default_rng(7)
    for n in (1, 2, 5, 101, 1000):
        xs = list(rng.lognormal(size=n))
        assert metrics.percentile(xs, q) == float(np.percentile(xs, q))
    assert metrics.percentile([1, 2, 3, 4], 50) == 2.5
    assert metrics.percentile(range(101), 99) == 99


def test_percentile_of_nothing_is_an_error_and_stats_of_nothing_is_none():
    with pytest.raises(ValueError):
        metrics.percentile([], 50)
    assert metrics.stats([]) is None
    assert metrics.pkey(99.9) == "p999" and metrics.pkey(50) == "p50"


def test_one_jain():
    assert metrics.jain is verifier_jain                     # one definition
    assert metrics.jain([3, 1]) == pytest.approx(0.8) and metrics.jain([]) == 1.0


def test_link_summary_of_rows_is_the_summary_of_the_link_means():
    rows = [{"t_s": t, "src": "a", "dst": b, "bytes": by, "util": u}
            for t, b, by, u in ((0.5, "b", 0, 0.0), (1.0, "b", 10, 0.4), (1.5, "b", 10, 0.2),
                                (0.5, "c", 0, 0.0), (1.0, "c", 0, 0.0), (1.5, "c", 5, 0.6),
                                (2.0, "b", 0, 0.0), (2.0, "c", 0, 0.0))]
    means = metrics.link_means(rows)
    assert means == {("a", "b"): pytest.approx(0.3), ("a", "c"): pytest.approx(0.3)}
    assert metrics.link_summary_of_rows(rows) == metrics.link_summary(list(means.values()), 0.6)
    assert metrics.link_summary_of_rows(rows[:1]) is None


def test_estimate_is_the_mean_of_repetitions_or_the_pooled_figure():
    sp = metrics.spread([10.0, 12.0, 14.0])
    assert metrics.estimate(11.5, sp, 3) == (12.0, sp["ci95"], metrics.MEAN_OF_REPS)
    assert metrics.estimate(11.5, metrics.spread([11.0]), 1) == (11.5, None, metrics.POOLED)
    assert metrics.estimate(None, None, 3) == (None, None, metrics.POOLED)


def test_one_text_table_and_one_csv_writer():
    lines = text_table(["metric", "a", "bb"], [["x", "1.0", "22"], ["longer", "3", "-"]])
    assert lines == ["metric    a  bb", "x       1.0  22", "longer    3   -"]
    assert text_table(["a", "b"], [["xx", "y"]], align="ll") == ["a   b", "xx  y"]
    assert csv_text([{"a": 1, "b": None}, [2, 3]], ("a", "b")) == "a,b\r\n1,\r\n2,3\r\n"
    assert fewer({"a": 10, "b": 6, "c": 10}) == (10, "b 6")
    assert fewer({"a": 2, "b": 2}, "{} the first {}", most=4) == (4, "a the first 2, b the first 2")
    assert fewer({"a": 3}) == (3, "")


# -- summary.json against the CSVs -----------------------------------------------------------

def test_every_percentile_and_interval_in_summary_is_numpys_and_scipys(out,
                                                                     run_figures_match):
    for run in RUNS:
        s = run_figures_match(out / run)
        assert s["repetitions"] == 3


def test_every_spread_key_is_checked(out):
    s = json.loads((out / RUNS[0] / "summary.json").read_text())
    assert set(s["spread"]) == set(SPREAD_KEYS) and all(v["n"] == 3 for v in s["spread"].values())



# -- what compare and the report show --------------------------------------------------------

SHOWN = {"FCT p50 ms": ("fct_p50_ms", 2), "FCT p99 ms": ("fct_p99_ms", 2),
         "TTFT p99 ms": ("ttft_p99_ms", 1), "requests/s": ("requests_per_s", 3),
         "link util max": ("link_util_max", 3), "link util mean": ("link_util_mean", 3)}


def _shown(sp, digits):
    return f"{sp['mean']:,.{digits}f} ±{sp['ci95']:.{max(digits, 1)}f}"


def test_compare_shows_means_of_repetitions_with_their_interval(out):
    runs = load_runs([str(out)])
    (g,) = comparison(runs)
    rows = {r["metric"]: r for r in g["rows"]}
    for label, (key, _) in SHOWN.items():
        assert rows[label]["values"] == [r["spread"][key]["mean"] for r in runs], label
        assert rows[label]["ci95"] == [r["spread"][key]["ci95"] for r in runs], label
        assert rows[label]["estimators"] == [metrics.MEAN_OF_REPS] * 2
    assert g["footnote"] == ("± is the 95% confidence half-width of the mean over 3 "
                             "repetitions; values are means of per-repetition figures")
    for r in runs:                                   # one repetition: pooled, no interval
        r["repetitions"] = 1
    (g,) = comparison(runs)
    row = {r["metric"]: r for r in g["rows"]}["FCT p99 ms"]
    assert row["values"] == [r["fct_ms"]["p99"] for r in runs]
    assert row["ci95"] == [None, None] and row["estimators"] == [metrics.POOLED] * 2
    assert "one repetition: values are pooled" in to_text([g]) and "±" not in to_text([g])


class _Tables(HTMLParser):
    """The cells of every table on a page, and the text of its list items."""

    def __init__(self):
        super().__init__()
        self.tables, self.items, self._cell, self._li = [], [], None, None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = ""
        elif tag == "li":
            self._li = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append(self._cell)
            self._cell = None
        elif tag == "li":
            self.items.append(self._li)
            self._li = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data
        if self._li is not None:
            self._li += data


def test_the_report_shows_what_summary_json_holds(out):
    page = _Tables()
    page.feed((out / "report.html").read_text())
    docs = {run: json.loads((out / run / "summary.json").read_text()) for run in RUNS}
    compare_table = next(t for t in page.tables if t[0][0] == "placement cross-rail")
    assert compare_table[0][1:3] == list(RUNS)
    cells = {r[0]: r[1:] for r in compare_table[1:]}
    for label, (key, digits) in SHOWN.items():
        assert cells[label][:2] == [_shown(docs[n]["spread"][key], digits) for n in RUNS]
    assert cells["transfers verified"][:2] == [f"{docs[n]['transfers_verified']:,}"
                                               for n in RUNS]
    spread_table = next(t for t in page.tables if t[0][:3] == ["run", "metric", "mean"])
    assert len(spread_table) - 1 == sum(len(d["spread"]) for d in docs.values())
    for run, key, mean, ci95, sd, lo, hi, n in spread_table[1:]:
        sp = docs[run]["spread"][key]
        assert [mean, ci95, sd, lo, hi, n] == [f"{sp[k]:,.2f}" for k in (
            "mean", "ci95", "sd", "min", "max")] + [str(sp["n"])]
    said = " ".join(page.items)
    for n, d in docs.items():
        assert f"{n} {d['ttfb_ms']['p50']:.1f} ms" in said
        assert f"{n} {d['slowdown']['p50']:.2f}x" in said
        assert f"{100 * d['prefill_share_of_ttft']:.0f}% of the mean TTFT on {n}" in said


def test_crossval_compares_the_figures_compare_shows(out):
    from testbed.analysis.crossval import crossval, to_html
    runs = {r["run"]: r for r in load_runs([str(out)])}
    doc = crossval({"emulation": runs, "model": runs})
    for r in doc["runs"]:
        assert r["emulation_p99_ms"] == runs[r["run"]]["spread"]["fct_p99_ms"]["mean"]
        assert r["estimator"] == metrics.MEAN_OF_REPS and r["model_error_p99"] == 0.0
    page = to_html(doc, "m<n")
    assert "m&lt;n" in page and "means of per-repetition figures" in page
    assert "<script" not in page


def test_compare_says_how_many_repetitions_an_unseparated_ratio_would_need():
    from testbed.analysis.compare import paired_lines
    wide = {"n": 5, "ratio": 1.2544, "lo": 0.9875, "hi": 1.5933}      # a demo's TTFT P99
    clear = {"n": 5, "ratio": 1.8491, "lo": 1.2617, "hi": 2.7101}
    g = {"runs": ["zcube", "roft"], "rows": [
        {"metric": "TTFT p99 ms", "paired": [None, wide]},
        {"metric": "FCT p99 ms", "paired": [None, clear]}]}
    ttft, fct = paired_lines(g)
    assert ttft.endswith("not separated (about 6 repetitions would give a verdict at this "
                         "spread)"), ttft
    assert fct.endswith(": zcube lower"), fct


def _draws(n, seed, slope=1.0, offset=0.1, noise=0.02):
    """Per-draw log ratios of a cheap backend (x) and of one measured on the same draws (y):
    y follows x with ``slope`` and ``offset``, plus noise of its own."""
    rng = random.Random(seed)
    xs = [rng.gauss(0.6, 0.25) for _ in range(n)]
    return [offset + slope * x + rng.gauss(0, noise) for x in xs], xs


def test_controlled_ratio_narrows_a_correlated_interval_and_estimates_the_measured_mean():
    controlled_ratio, paired_ratio = metrics.controlled_ratio, metrics.paired_ratio
    ys, xs = _draws(8, seed=3)
    plain = paired_ratio([1.0] * 8, [math.exp(y) for y in ys])
    got = controlled_ratio(ys, xs, _draws(400, seed=99)[1])
    assert got["n"] == 8 and got["rho"] > 0.95
    assert (got["hi"] - got["lo"]) < (plain["hi"] - plain["lo"]) / 4
    # the measured backend's mean (0.1 above the control's), not the control's own
    assert got["lo"] < math.exp(0.7) < got["hi"]
    assert not got["lo"] < math.exp(0.6) < got["hi"]


def test_controlled_ratio_intervals_hold_the_true_mean_about_95_percent_of_the_time():
    # the measured backend follows the control with a slope of 0.8, or on a curve: the
    # estimate needs neither to be 1 or straight, and its interval counts the spread of the
    # control's own mean over its 60 other draws
    controlled_ratio = metrics.controlled_ratio
    for shape, truth in ((lambda x: 0.8 * x, 0.1 + 0.8 * 0.6),
                         (lambda x: x + 2 * (x - 0.6) ** 2, 0.1 + 0.6 + 2 * 0.25 ** 2)):
        held = 0
        for seed in range(400):
            _, xs = _draws(65, seed)
            noise = random.Random(-1 - seed)
            ys = [0.1 + shape(x) + noise.gauss(0, 0.05) for x in xs[:5]]
            got = controlled_ratio(ys, xs[:5], xs[5:])
            held += got["lo"] <= math.exp(truth) <= got["hi"]
        assert 0.91 <= held / 400 <= 0.99, (truth, held)


def test_controlled_ratio_costs_where_the_control_is_unrelated():
    # the differences then carry both spreads: wider than the plain interval, not narrower
    controlled_ratio, paired_ratio = metrics.controlled_ratio, metrics.paired_ratio
    rng = random.Random(5)
    ys = [rng.gauss(0.5, 0.2) for _ in range(12)]
    xs = [rng.gauss(0.0, 0.2) for _ in range(12)]
    plain = paired_ratio([1.0] * 12, [math.exp(y) for y in ys])
    got = controlled_ratio(ys, xs, [rng.gauss(0.0, 0.2) for _ in range(400)])
    assert abs(got["rho"]) < 0.6
    assert (got["hi"] - got["lo"]) > 1.1 * (plain["hi"] - plain["lo"])


def test_controlled_ratio_counts_the_spread_of_the_controls_own_mean():
    controlled_ratio = metrics.controlled_ratio
    ys, xs = _draws(8, seed=3)
    _, others = _draws(400, seed=99)
    few, many = controlled_ratio(ys, xs, others[:4]), controlled_ratio(ys, xs, others)
    assert (few["hi"] - few["lo"]) > 2 * (many["hi"] - many["lo"])


def test_controlled_ratio_needs_two_pairs_and_is_the_plain_one_where_the_control_is_flat():
    controlled_ratio, paired_ratio = metrics.controlled_ratio, metrics.paired_ratio
    assert controlled_ratio([0.1], [0.1], [0.1, 0.2]) is None
    assert controlled_ratio([0.1, 0.2, 0.3], [0.1, 0.2], [0.1, 0.2]) is None
    assert controlled_ratio([0.1, 0.2, 0.3], [0.1, 0.2, 0.3], [0.1]) is None
    got = controlled_ratio([0.1, 0.2, 0.4], [0.5] * 3, [0.5] * 50)
    plain = paired_ratio([1.0] * 3, [math.exp(y) for y in (0.1, 0.2, 0.4)])
    assert got["rho"] is None and got["n"] == 3
    assert (got["ratio"], got["lo"], got["hi"]) == (plain["ratio"], plain["lo"], plain["hi"])
