"""The scenario key buffer_ms: the queue behind every shaped port, in bytes at the port's
emulated rate, plumbed from the scenario (and --buffer-ms) to the emulation (no root)."""
import pytest

from testbed.cli.common import fabric_from_args
from testbed.cli.main import main, make_parser
from testbed.cli.up import _check_flags
from testbed.core.backend import SessionOptions
from testbed.emulation.network import LEAF_QDISC, MIN_BUFFER_BYTES, leaf_qdisc
from testbed.errors import UsageError
from testbed.experiment.runner import run_scenario
from testbed.experiment.scenario import ScenarioError, describe, loads
from testbed.model.backend import ModelBackend

SCENARIO = """\
name: buf
backend: model
fabrics: [{name: zc, builder: zcube, params: {n: 4, gpus_per_server: 4}}]
workload: {arrivals: poisson, rate: 4, count: 6}
"""


def test_buffer_is_rate_times_time_in_bytes():
    assert leaf_qdisc(100, 20) == "bfifo limit 250000"
    assert leaf_qdisc(50_000, 1) == "bfifo limit 6250000"


def test_a_buffer_holds_at_least_two_tso_segments():
    assert MIN_BUFFER_BYTES >= 2 * 65536
    assert leaf_qdisc(10, 1) == f"bfifo limit {MIN_BUFFER_BYTES}"


def test_without_buffer_ms_the_leaf_is_todays(monkeypatch):
    monkeypatch.setenv("ZCUBE_LEAF_QDISC", "fq_codel")     # no longer read
    assert leaf_qdisc(100, None) == LEAF_QDISC == "pfifo limit 64"
    assert leaf_qdisc(100) == LEAF_QDISC
    assert leaf_qdisc(100, 20) == "bfifo limit 250000"      # the scenario's key


@pytest.mark.parametrize("value", ["0", "-1", ".inf"])
def test_buffer_ms_must_be_a_positive_number(value):
    with pytest.raises(ScenarioError) as err:
        loads(SCENARIO + f"buffer_ms: {value}\n", "b.yaml")
    msg = str(err.value)
    assert msg.startswith("b.yaml:5: buffer_ms:") and "\n" not in msg, msg


def test_buffer_ms_is_optional_and_listed_in_help():
    assert loads(SCENARIO).buffer_ms is None
    assert loads(SCENARIO + "buffer_ms: 30\n").buffer_ms == 30
    assert "buffer_ms  emulation and ns3: queue behind each shaped (switch) port" in describe()


class Recording:
    """The model backend, remembering the options each session was given."""
    name = "model"

    def __init__(self):
        self.options = []

    def session(self, fabric, policy, options):
        self.options.append(options)
        return ModelBackend().session(fabric, policy, options)


@pytest.mark.parametrize("extra,key,want", [
    ("buffer_ms: 30\n", "buffer_ms", 30), ("", "buffer_ms", None),
    ("large_segments: true\n", "large_segments", True), ("", "large_segments", False)])
def test_emulation_keys_reach_the_session_and_the_summary(tmp_path, extra, key, want):
    """buffer_ms and large_segments go from the scenario to every session and summary."""
    be = Recording()
    summaries = run_scenario(loads(SCENARIO + extra), str(tmp_path), backend=be,
                             log=lambda msg: None)
    assert [getattr(o, key) for o in be.options] == [want]
    got = summaries["zc"][key]
    assert got == want and (got is want or not isinstance(want, bool))


@pytest.mark.parametrize("extra,want", [("", 2), ("calibration_s: 1\n", 1)])
def test_calibration_s_reaches_every_session(tmp_path, extra, want):
    be = Recording()
    run_scenario(loads(SCENARIO + extra), str(tmp_path), backend=be, log=lambda msg: None)
    assert [o.calibration_s for o in be.options] == [want]


@pytest.mark.parametrize("value", ["0.5", "1.5", "0", "61", ".nan", "x"])
def test_calibration_s_out_of_bounds_is_one_line(value):
    with pytest.raises(ScenarioError) as err:
        loads(SCENARIO + f"calibration_s: {value}\n", "b.yaml")
    msg = str(err.value)
    assert msg.startswith("b.yaml:5: calibration_s:") and "\n" not in msg, msg


def test_the_emulation_session_passes_it_to_the_emulation(monkeypatch):
    import testbed.emulation.emulation as emulation
    from testbed.emulation.backend import EmulationSession
    seen = {}

    class Fake:
        table = None

        def __init__(self, fabric, **kwargs):
            seen.update(kwargs)

    monkeypatch.setattr(emulation, "Emulation", Fake)
    EmulationSession(None, "zcube", SessionOptions(link_mbps=100, buffer_ms=12.5,
                                                   large_segments=True), {})
    assert seen["buffer_ms"] == 12.5 and seen["large_segments"] is True


def _up_args(*argv):
    args = make_parser().parse_args(["up", "zcube", "--n", "4", *argv])
    return args, fabric_from_args(args)


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_up_refuses_a_buffer_that_is_not_positive(value):
    with pytest.raises(UsageError, match="--buffer-ms"):
        _check_flags(*_up_args("--buffer-ms", value))


def test_up_passes_buffer_ms_to_its_emulation(monkeypatch):
    import testbed.emulation.emulation as emulation
    from testbed.cli.up import _run_plain
    seen = {}

    class Fake:
        def __init__(self, fabric, **kwargs):
            seen.update(kwargs)

        def __enter__(self):
            raise emulation.EmulationError("not here")

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(emulation, "Emulation", Fake)
    assert _run_plain(*_up_args("--buffer-ms", "7")) == 1
    assert seen["buffer_ms"] == 7.0


def test_up_kv_puts_buffer_ms_in_the_scenario():
    from testbed.cli.up import scenario_from_flags
    sc = scenario_from_flags(*_up_args("--kv", "--count", "3", "--buffer-ms", "30"))
    assert sc.buffer_ms == 30.0


@pytest.mark.parametrize("value", ["0", "-1"])
def test_workload_flag_names_the_flag_in_one_line(capsys, value):
    code = main(["workload", "zcube", "--n", "4", "--count", "3", "--buffer-ms", value])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "--buffer-ms" in err, err


@pytest.mark.parametrize("flag,want", [("1", 1), ("3", 3), ("1.5", None), ("0.5", None)])
def test_calibration_s_flag_takes_whole_seconds(flag, want, capsys):
    """``zcube up --kv --calibration-s S`` reaches the scenario as whole seconds; a fraction
    is refused in one line before anything starts (iperf3 reads -t as whole seconds)."""
    from testbed.cli.main import make_parser
    from testbed.cli.up import scenario_from_flags
    from topologies import zcube
    parser = make_parser()
    argv = ["up", "zcube", "--kv", "--count", "4", "--calibration-s", flag]
    if want is None:
        with pytest.raises(SystemExit) as err:
            parser.parse_args(argv)
        assert err.value.code == 2 and "whole number" in capsys.readouterr().err
        return
    args = parser.parse_args(argv)
    assert scenario_from_flags(args, zcube(4, 4)).calibration_s == want
