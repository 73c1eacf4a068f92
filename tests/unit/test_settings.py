"""The emulation's settings (testbed/core/settings.py): a scenario's ``emulation:`` section
is validated like the rest of it, its defaults are the measured ones the environment
variables used to default to, a value set in a scenario or by a flag reaches the emulation,
and docs/settings.md lists every setting and every ZCUBE_ variable the code reads (no root)."""
import glob
import os
import re

import pytest

from testbed.cli.main import main, make_parser
from testbed.core.backend import SessionOptions
from testbed.core.settings import RETIRED, TCP_CC_VAR, EmulationSettings, retired_in
from testbed.experiment.runner import run_scenario
from testbed.experiment.scenario import ScenarioError, describe, dumps, loads
from testbed.model.backend import ModelBackend

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGES = ("testbed", "controller", "traffic", "topologies")
DOC = os.path.join(ROOT, "docs", "settings.md")
SCENARIO = """\
name: settings
backend: model
fabrics: [{name: zc, builder: zcube, params: {n: 4, gpus_per_server: 4}}]
workload: {arrivals: poisson, rate: 4, count: 6}
"""


def test_defaults_are_the_measured_values_the_variables_defaulted_to():
    from testbed.emulation import network, ovs
    from traffic import kvwire
    assert EmulationSettings() == EmulationSettings(tcp_cc="cubic", ecmp="pinned")
    if TCP_CC_VAR not in os.environ:           # the agents' own fallback is the same
        assert kvwire.CONGESTION == EmulationSettings().tcp_cc
    # what the removed variables defaulted to is what the emulation now always does
    assert network.LEAF_QDISC == "pfifo limit 64" and network.GSO_MAX_SIZE == 32768
    assert network.TSO_RTT_LOG == 14 and ovs.STATS_MS == 3_600_000
    assert loads(SCENARIO).emulation == EmulationSettings()
    assert loads(SCENARIO + "emulation:\n").emulation == EmulationSettings()


@pytest.mark.parametrize("lines, says", [
    ("  bogus: 1\n", "6: emulation.bogus: unknown key (known: tcp_cc, ecmp)"),
    ("  ecmp: spray\n", "6: emulation.ecmp: expected one of pinned, hash, got 'spray'"),
    ("  pacing: true\n", "6: emulation.pacing: unknown key (known: tcp_cc, ecmp)"),
    ("  tcp_cc: BBR\n", "6: emulation.tcp_cc: 'BBR' is not a congestion control name"),
    ("  tcp_cc: 5\n", "6: emulation.tcp_cc: expected a non-empty string, got 5"),
    ("  tcp_cc: a_name_far_too_long\n", "6: emulation.tcp_cc: 'a_name_far_too_long' is not"),
])
def test_a_bad_key_or_value_is_one_line_naming_file_and_line(lines, says):
    with pytest.raises(ScenarioError) as err:
        loads(SCENARIO + "emulation:\n" + lines, "s.yaml")
    assert str(err.value).startswith("s.yaml:" + says), str(err.value)
    assert "\n" not in str(err.value)


def test_zcube_run_refuses_a_bad_section_with_exit_2(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO + "emulation: {ecmp: hash, pin: on}\n")
    assert main(["run", str(path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "emulation.pin: unknown key" in err, err
    assert not (tmp_path / "out").exists()


def test_the_section_survives_dumps_and_is_listed_in_help():
    sc = loads(SCENARIO + "emulation: {tcp_cc: bbr, ecmp: hash}\n")
    assert sc.emulation == EmulationSettings(tcp_cc="bbr", ecmp="hash")
    assert loads(dumps(sc)).emulation == sc.emulation
    text = describe()
    assert "  emulation:  emulation: how it runs the workload" in text
    for key in EmulationSettings.model_fields:
        assert f"\n    {key}  " in text, key


class Recording:
    """The model backend, remembering the options each session was given."""
    name = "model"

    def __init__(self):
        self.options = []

    def session(self, fabric, policy, options):
        self.options.append(options)
        return ModelBackend().session(fabric, policy, options)


def test_a_scenarios_settings_reach_every_session(tmp_path):
    be = Recording()
    run_scenario(loads(SCENARIO + "emulation: {tcp_cc: bbr, ecmp: hash}\n"), str(tmp_path),
                 backend=be, log=lambda msg: None)
    assert [o.emulation for o in be.options] == [EmulationSettings(tcp_cc="bbr", ecmp="hash")]
    assert SessionOptions(link_mbps=1).emulation == EmulationSettings()


def test_the_session_hands_them_to_the_emulation(monkeypatch):
    import testbed.emulation.emulation as emulation
    from testbed.emulation.backend import EmulationSession
    seen = {}

    class Fake:
        table = None

        def __init__(self, fabric, **kwargs):
            seen.update(kwargs)

    monkeypatch.setattr(emulation, "Emulation", Fake)
    wanted = EmulationSettings(tcp_cc="bbr")
    EmulationSession(None, "zcube", SessionOptions(link_mbps=100, emulation=wanted), {})
    assert seen["settings"] is wanted


def test_the_emulation_acts_on_its_settings_not_the_environment(monkeypatch, tmp_path):
    """ECMP pinning and the agents' congestion control follow the object the
    emulation was given; the old variables change nothing and are named in a warning."""
    from testbed.emulation import agents, pin_requests
    from testbed.emulation.emulation import Emulation
    from topologies import roft
    monkeypatch.setenv("ZCUBE_STATE_DIR", str(tmp_path))
    for name, value in (("ZCUBE_ECMP", "hash"), ("ZCUBE_PACING", "on"), (TCP_CC_VAR, "reno")):
        monkeypatch.setenv(name, value)
    emu = Emulation(roft(2, 2), policy="ecmp")
    assert emu.settings == EmulationSettings()
    assert pin_requests.pinning_paths(emu)
    emu = Emulation(roft(2, 2), policy="ecmp", settings=EmulationSettings(
        tcp_cc="bbr", ecmp="hash"))
    assert not pin_requests.pinning_paths(emu)
    started = {}

    class Node:
        name = "g0"

        def popen(self, argv, **kwargs):
            started.update(kwargs["env"])

    agents.Agent(Node(), None, emu.settings.agent_env())
    assert started[TCP_CC_VAR] == "bbr"
    said = retired_in()
    assert any("$ZCUBE_ECMP" in line and "--ecmp" in line for line in said), said
    assert retired_in({}) == [] and len(retired_in(dict.fromkeys(RETIRED, "1"))) == len(RETIRED)


def test_run_flags_replace_the_scenarios_settings_and_say_so(tmp_path):
    from testbed.cli.run import with_flags
    sc = loads(SCENARIO + "emulation: {tcp_cc: reno}\n")
    args = make_parser().parse_args(["run", "x.yaml", "--ecmp", "hash"])
    got = with_flags(sc, args)
    assert got.emulation == EmulationSettings(tcp_cc="reno", ecmp="hash")
    assert got.text.startswith("# run with --ecmp hash:")
    args = make_parser().parse_args(["run", "x.yaml", "--tcp-cc", "bbr", "--ecmp", "hash"])
    got = with_flags(sc, args)
    assert got.emulation == EmulationSettings(tcp_cc="bbr", ecmp="hash")
    assert got.text.startswith("# run with --tcp-cc bbr --ecmp hash:")
    args = make_parser().parse_args(["run", "x.yaml"])
    assert with_flags(sc, args) is sc


@pytest.mark.parametrize("argv, says", [
    (["--tcp-cc", "Cubic"], "'Cubic' is not a congestion control name"),
    (["--ecmp", "spray"], "invalid choice: 'spray'"),
])
def test_a_bad_flag_is_one_line_and_exit_2(argv, says, capsys):
    with pytest.raises(SystemExit) as err:
        make_parser().parse_args(["run", "demo", *argv])
    text = capsys.readouterr().err.strip()
    assert err.value.code == 2 and len(text.splitlines()) == 1 and says in text, text


def test_up_flags_reach_its_emulation_and_its_scenario(monkeypatch):
    import testbed.emulation.emulation as emulation
    from testbed.cli.common import fabric_from_args
    from testbed.cli.up import _run_plain, scenario_from_flags
    argv = ["up", "zcube", "--n", "4", "--tcp-cc", "bbr", "--ecmp", "hash"]
    args = make_parser().parse_args(argv + ["--kv", "--count", "3"])
    sc = scenario_from_flags(args, fabric_from_args(args))
    assert sc.emulation == EmulationSettings(tcp_cc="bbr", ecmp="hash")
    seen = {}

    class Fake:
        def __init__(self, fabric, **kwargs):
            seen.update(kwargs)

        def __enter__(self):
            raise emulation.EmulationError("not here")

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(emulation, "Emulation", Fake)
    args = make_parser().parse_args(argv)
    assert _run_plain(args, fabric_from_args(args)) == 1
    assert seen["settings"] == EmulationSettings(tcp_cc="bbr", ecmp="hash")


# --- docs/settings.md ------------------------------------------------------------------------
def _variables_read() -> set:
    """Every ZCUBE_ name the packages quote in their code (read from or put into an
    environment), but the heredoc marker of testbed/emulation/batched_build.py and the retired
    names the settings module lists only to warn about them."""
    found = set()
    for pkg in PACKAGES:
        for path in glob.glob(os.path.join(ROOT, pkg, "**", "*.py"), recursive=True):
            if path.endswith(os.path.join("core", "settings.py")):
                continue
            with open(path, encoding="utf-8") as f:
                found |= set(re.findall(r"""["'](ZCUBE_[A-Z0-9_]+)["']""", f.read()))
    return (found | {TCP_CC_VAR}) - {"ZCUBE_EOF"}


def test_docs_list_every_setting_and_every_variable():
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    for key in EmulationSettings.model_fields:
        assert f"| `{key}` |" in text, key
    names = _variables_read()
    assert {"ZCUBE_STATE_DIR", "ZCUBE_TCP_CC", "ZCUBE_FABRIC"} <= names
    for name in sorted(names):
        assert f"| `{name}` |" in text, name
    assert len(names) <= 10
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text)      # user documentation, no history


def test_no_retired_variable_is_read_any_more():
    assert not (_variables_read() & set(RETIRED)) - {TCP_CC_VAR}
