"""The typed scenario: dumps/loads and from_dict give back the same scenario, an unknown key
in any section names its file and line, and describe() lists every key."""
import glob
import os
import typing

import pydantic
import pytest
import yaml

from testbed.experiment.scenario import (
    Background,
    Fault,
    Scenario,
    ScenarioError,
    describe,
    dumps,
    from_dict,
    load,
    loads,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHIPPED = sorted(glob.glob(os.path.join(ROOT, "scenarios", "*.yaml")))

BLOCK = """\
name: every-section
fabrics:
  - name: z
    builder: zcube
    params: {n: 4, gpus_per_server: 4}
deployment:
  prefill_tp: 4
workload:
  count: 10
sweep:
  rates: [1, 2]
  slo_ttft_ms: 500
faults:
  - at_s: 1
    element: a0
background:
  pattern: permutation
"""


def _same(a: Scenario, b: Scenario) -> None:
    for key in Scenario.model_fields:
        assert getattr(a, key) == getattr(b, key), key
    assert a == b


@pytest.mark.parametrize("path", SHIPPED, ids=os.path.basename)
def test_every_shipped_scenario_survives_dumps_and_from_dict(path):
    sc = load(path)
    again = loads(dumps(sc), "/elsewhere/again.yaml")       # trace paths are absolute
    _same(sc, again)
    assert [f.line for f in sc.fabrics] != [0] * len(sc.fabrics)
    with open(path) as f:
        doc = yaml.safe_load(f)
    plain = from_dict(doc, base_dir=os.path.dirname(path))
    _same(sc, plain)
    assert plain.text == dumps(plain) and plain.path == "<flags>"
    _same(sc, from_dict(sc.model_dump()))
    assert sc.text == open(path).read()


def test_typed_sections_and_the_new_background():
    sc = loads(BLOCK, "s.yaml")
    assert sc.workload.rate == 2.0 and sc.workload.count == 10 and sc.workload.trace == "mooncake"
    assert sc.deployment.placements == ["aligned"] and sc.deployment.prefill_instances is None
    assert sc.sweep.rates == [1.0, 2.0] and sc.sweep.count == 40
    assert sc.faults == [Fault(at_s=1.0, element="a0")] and sc.faults[0].duration_s is None
    assert sc.background == Background(pattern="permutation", mbps=10.0)
    assert sc.fabrics[0].line == 3 and sc.model.name == "llama3-70b"
    assert loads(BLOCK.replace("background:\n  pattern: permutation\n", ""), "s.yaml") \
        .background is None
    _same(sc, loads(dumps(sc)))


@pytest.mark.parametrize("after, section, known", [
    ("name: every-section\n", "", "name, description, backend"),
    ("    builder: zcube\n", "fabrics[0].", "name, builder, params, policy"),
    ("  prefill_tp: 4\n", "deployment.", "prefill_tp, decode_tp, prefill_instances"),
    ("  count: 10\n", "workload.", "arrivals, rate, on_s"),
    ("  slo_ttft_ms: 500\n", "sweep.", "rates, slo_ttft_ms, count"),
    ("    element: a0\n", "faults[0].", "at_s, element, duration_s"),
    ("  pattern: permutation\n", "background.", "pattern, mbps"),
])
def test_an_unknown_key_in_each_section_names_file_and_line(after, section, known):
    indent = after[:len(after) - len(after.lstrip())]
    text = BLOCK.replace(after, after + indent + "bogus: 1\n")
    line = BLOCK[:BLOCK.index(after) + len(after)].count("\n") + 1
    with pytest.raises(ScenarioError) as err:
        loads(text, "/tmp/bad.yaml")
    assert str(err.value).startswith(f"/tmp/bad.yaml:{line}: {section}bogus: unknown key "
                                     f"(known: {known}"), str(err.value)


@pytest.mark.parametrize("text, where", [
    (BLOCK.replace("mbps", "x").replace("pattern: permutation",
                                        "pattern: permutation\n  mbps: 0"),
     "s.yaml:18: background.mbps: must be greater than 0"),
    (BLOCK.replace("pattern: permutation", "pattern: ring"),
     "s.yaml:17: background.pattern: expected one of permutation, all-to-all, got 'ring'"),
    (BLOCK.replace("n: 4, gpus_per_server: 4", "n: 4, n: 4"),
     "s.yaml:5: fabrics[0].params.n: given twice (first on line 5)"),
    (BLOCK.replace("element: a0", "element: !!python/name:os.system a0"),
     "s.yaml:15: faults[0].element: cannot read this value"),
    (BLOCK.replace("builder: zcube", "builder: !secret zcube"),
     "s.yaml:4: fabrics[0].builder: cannot read this value"),
    ("a: &a [1]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
     "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
     "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
     "f: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n",
     "s.yaml:5: f[8][3][6][1][0]: aliases expand to more than 20000 values"),
    ("name: &n x\nfabrics: &f [*f]\n", "s.yaml:2: fabrics[0]: an alias refers to"),
    (BLOCK.replace("count: 10", "count: 10\n  trace: mooncake\n  arrivals: trace\n"
                                "  prefix_cache: maybe"),
     "s.yaml:12: workload.prefix_cache: expected true or false, got 'maybe'"),
])
def test_yaml_and_new_keys_fail_in_one_line(text, where):
    with pytest.raises(ScenarioError) as err:
        loads(text, "s.yaml")
    assert str(err.value).startswith(where), str(err.value)
    assert "\n" not in str(err.value)


def test_all_to_all_background_must_fit_the_iperf3_flows():
    text = BLOCK.replace("n: 4, gpus_per_server: 4", "n: 8, gpus_per_server: 4") \
        .replace("pattern: permutation", "pattern: all-to-all")
    with pytest.raises(ScenarioError, match=r"^s.yaml:17: background.pattern: on fabrics\[0\] "
                                            r"\(z\): all-to-all needs 4032 iperf3 flows"):
        loads(text, "s.yaml")


def test_from_dict_checks_like_a_file_on_line_one_and_takes_traces_from_base_dir(tmp_path):
    doc = yaml.safe_load(BLOCK)
    doc["workload"] = {"arrivals": "trace", "trace": "t.jsonl"}
    with pytest.raises(ScenarioError, match=r"^<flags>:1: workload.trace: no such file: "):
        from_dict(doc, base_dir=str(tmp_path))
    (tmp_path / "t.jsonl").write_text('{"timestamp": 0, "input_length": 10, '
                                      '"output_length": 1, "hash_ids": []}\n')
    sc = from_dict(doc, base_dir=str(tmp_path))
    assert sc.workload.trace == str(tmp_path / "t.jsonl")
    assert loads(sc.text) == sc and "t.jsonl" in sc.text
    doc["deployment"]["placements"] = ("aligned", "cross-rail")        # tuples are lists
    assert from_dict(doc, base_dir=str(tmp_path)).placements == ["aligned", "cross-rail"]
    with pytest.raises(ScenarioError, match=r"^x:1: fabrics\[0\]\.polcy: unknown key"):
        from_dict({"name": "a", "fabrics": [{"name": "z", "builder": "zcube", "polcy": 1}]},
                  path="x")
    with pytest.raises(ScenarioError, match=r"^<flags>:1: scenario: expected a mapping"):
        from_dict(["not", "a", "dict"])


def _section(annotation):
    """The section model inside Optional[...] or list[...], if any."""
    for t in (annotation, *typing.get_args(annotation)):
        if isinstance(t, type) and issubclass(t, pydantic.BaseModel):
            return t
    return None


def _keys(cls, prefix=""):
    for key, field in cls.model_fields.items():
        sub = _section(field.annotation)
        yield prefix, key, field, sub
        if sub is not None:
            yield from _keys(sub, prefix + "  ")


def test_describe_lists_every_key_with_its_default_and_meaning():
    text = describe()
    keys = list(_keys(Scenario))
    assert len(text.splitlines()) == len(keys)
    assert {k for _, k, _, _ in keys} >= {"background", "pattern", "mbps", "prefix_cache"}
    for (prefix, key, field, sub), line in zip(keys, text.splitlines()):
        assert line.lstrip(" -").startswith(key) and field.description in line, (key, line)
        if sub is None and field.is_required():
            assert line.endswith("(required)") or "(required, at most " in line
        elif sub is None and field.get_default(call_default_factory=True) is not None:
            assert "(default " in line, line
    assert "  deployment:  the PD deployment" in text
    assert "    placements  placements to run, each a separate run (default [aligned])" in text
    assert ("    - at_s  when, in workload time (s), the element goes down (required, at most "
            "86,400)") in text
    assert "  repetitions  runs per fabric and placement, each with its own seed (default 1, " \
        "at most 1,000)" in text
