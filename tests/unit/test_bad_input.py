"""Property tests over what users type and feed: CLI arguments, scenario files and trace
lines.  Malformed input must give one clear line (exit 2), never a traceback, and start
nothing; well-formed input must be accepted."""
import contextlib
import io
import json
import os
import tempfile

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testbed.cli.main import main
from testbed.experiment.scenario import ScenarioError, loads
from traffic.arrivals import read_trace

SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

# verbs that only compute or read: fuzzing them can never start an emulation
VERBS = {
    "topo": ["--format", "--n", "--gpus-per-server", "--parallel", "--nic-gbps", "--servers",
             "--spines", "--oversubscription", "--radix", "--k", "--controller", "--gpu-type",
             "--nvlink-gbps"],
    "routes": ["--policy", "--traffic", "--seed", "--n", "--servers", "--format", "--check"],
    "cost": ["--vs", "--n", "--servers", "--oversubscription", "--json"],
    "workload": ["--model", "--placement", "--prefill-tp", "--decode-tp", "--arrivals", "--rate",
                 "--count", "--duration", "--link-mbps", "--time-scale", "--chunks", "--n",
                 "--buffer-ms"],
    "compare": ["--format"],
    "report": [],
    "run": ["--backend", "--export"],
}
junk = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
               max_size=12)
value = st.one_of(st.integers(-3, 9).map(str), st.floats(-2, 9).map(str), junk,
                  st.sampled_from(["zcube", "roft", "fattree", "json", "clab", "simai", "pd",
                                   "aligned", "poisson", "trace", "nan", "inf", "-1", "0", ""]))


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:                 # argparse's own exits (usage errors, --help)
            code = exc.code
    return code, err.getvalue()


@SETTINGS
@given(verb=st.sampled_from(sorted(VERBS)), data=st.data())
def test_cli_never_tracebacks_and_errors_are_one_line(verb, data):
    argv = [verb]
    if verb in ("topo", "routes", "cost", "workload"):
        argv.append(data.draw(st.one_of(st.sampled_from(["zcube", "roft", "fattree"]), junk)))
    elif verb in ("compare", "report", "run"):
        argv.append(data.draw(st.one_of(junk, st.just("/nonexistent/x"))).lstrip("-") or "x")
    opts = VERBS[verb] + ["--bogus"]
    for _ in range(data.draw(st.integers(0, 3))):
        argv += [data.draw(st.sampled_from(opts)), data.draw(value)]
    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            code, err = _run(argv)
        finally:
            os.chdir(cwd)
    assert code in (0, 1, 2), (argv, code, err)
    assert "Traceback" not in err, (argv, err)
    if code == 2:
        assert err.strip() and err.strip().count("\n") == 0, (argv, err)


GOOD = {
    "name": "fuzz",
    "backend": "model",
    "fabrics": [{"name": "z", "builder": "zcube", "params": {"n": 4, "gpus_per_server": 4},
                 "policy": "zcube"},
                {"name": "r", "builder": "roft", "params": {"servers": 4, "gpus_per_server": 4}}],
    "deployment": {"prefill_tp": 4, "decode_tp": 4, "placements": ["aligned"]},
    "workload": {"arrivals": "poisson", "rate": 4, "count": 10},
}
PATHS = [("name",), ("backend",), ("link_mbps",), ("seed",), ("repetitions",), ("model",),
         ("fabrics",), ("fabrics", 0), ("fabrics", 0, "builder"), ("fabrics", 0, "params"),
         ("fabrics", 0, "params", "n"), ("fabrics", 1, "policy"), ("fabrics", 1, "name"),
         ("deployment",), ("deployment", "prefill_tp"), ("deployment", "placements"),
         ("workload",), ("workload", "arrivals"), ("workload", "rate"), ("workload", "count"),
         ("workload", "trace"), ("sweep",), ("verify_sample",), ("buffer_ms",),
         ("unknown_key",)]
yaml_value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 12), st.floats(-5, 50), junk,
              st.sampled_from(["zcube", "roft", "aligned", "trace", "glm-5", "model"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from(["n", "rate", "name", "x"]), inner,
                                            max_size=3)),
    max_leaves=6)


def _set(doc, path, v):
    d = doc
    for k in path[:-1]:
        d = d[k]
    if isinstance(d, list) and path[-1] >= len(d):
        return
    d[path[-1]] = v


@SETTINGS
@given(path=st.sampled_from(PATHS), v=yaml_value)
def test_mutated_scenarios_load_or_fail_in_one_line_naming_file_and_line(path, v):
    doc = json.loads(json.dumps(GOOD))
    _set(doc, path, v)
    text = yaml.safe_dump(doc, sort_keys=False)
    try:
        sc = loads(text, "fuzz.yaml")
    except ScenarioError as err:
        msg = str(err)
        assert msg.startswith("fuzz.yaml:") and "\n" not in msg, msg
        assert msg.split(":")[1].isdigit(), msg
    else:
        assert sc.fabrics and sc.run_names()


@SETTINGS
@given(text=st.text(max_size=200))
def test_arbitrary_text_is_a_scenario_error_or_a_scenario(text):
    try:
        loads(text, "raw.yaml")
    except ScenarioError as err:
        assert str(err).startswith("raw.yaml") and "\n" not in str(err)


trace_line = st.one_of(
    junk,
    st.dictionaries(st.sampled_from(["timestamp", "input_length", "output_length", "hash_ids",
                                     "extra"]),
                    st.one_of(st.integers(-5, 10 ** 6), st.floats(allow_nan=True), junk,
                              st.lists(st.integers(0, 9), max_size=4), st.none()),
                    max_size=5).map(json.dumps),
    st.builds(lambda t, i, o: json.dumps({"timestamp": t, "input_length": i, "output_length": o}),
              st.integers(0, 10 ** 6), st.integers(0, 10 ** 5), st.integers(0, 10 ** 4)))


@SETTINGS
@given(lines=st.lists(trace_line, max_size=12))
def test_every_trace_line_is_read_or_reported_with_its_number(lines):
    lines = [ln.replace("\n", " ").replace("\r", " ") for ln in lines]
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write("\n".join(lines) + "\n")
    try:
        replay = read_trace(f.name)
    finally:
        os.unlink(f.name)
    nonblank = [i + 1 for i, ln in enumerate(lines) if ln.strip()]
    skipped = [n for n, _ in replay.skipped]
    assert len(replay.requests) + len(skipped) + replay.excluded == len(nonblank)
    assert set(skipped) <= set(nonblank)
    assert all(isinstance(reason, str) and reason for _, reason in replay.skipped)


NUMERIC = [("link_mbps",), ("seed",), ("repetitions",), ("verify_sample",), ("buffer_ms",),
           ("time_dilation",), ("fabrics", 0, "params", "n"),
           ("fabrics", 0, "params", "gpus_per_server"), ("fabrics", 1, "params", "servers"),
           ("deployment", "prefill_tp"), ("deployment", "chunks"), ("workload", "rate"),
           ("workload", "count"), ("workload", "duration_s"), ("workload", "input_tokens"),
           ("workload", "output_tokens"), ("model", "layers"), ("model", "head_dim"),
           ("model", "prefill_tokens_per_s"), ("model", "decode_step_ms"),
           ("model", "dtype_bytes")]
extreme = st.one_of(
    st.sampled_from([0, -1, 1e-300, 1e300, 10 ** 13, 2 ** 64, float("nan"), float("inf"),
                     "1e9", True, [], {}, None]),
    st.integers(0, 10 ** 13), st.floats(0, 1e15, allow_nan=False))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(NUMERIC), v=extreme)
def test_huge_tiny_and_odd_values_load_or_fail_in_one_line_in_bounded_memory(path, v):
    """Checking a scenario never holds much memory, whatever a value is: a value that
    would make the run outgrow this machine is refused while the scenario is read."""
    import tracemalloc
    doc = json.loads(json.dumps(GOOD))
    doc["model"] = {"preset": "llama3-70b"}
    _set(doc, path, v)
    text = yaml.safe_dump(doc, sort_keys=False)
    tracemalloc.start()
    try:
        loads(text, "fuzz.yaml")
    except ScenarioError as err:
        msg = str(err)
        assert msg.startswith("fuzz.yaml:") and "\n" not in msg, msg
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < 400 << 20, (path, v, peak)
