"""The environment the testbed's own ovs-vswitchd starts with (no root): jemalloc where a
library is installed, glibc's malloc when asked or when none is."""
import pytest

import testbed.emulation.ovs as ovs


def test_jemalloc_is_preloaded_where_installed_unless_glibc_is_asked(monkeypatch, tmp_path):
    lib = tmp_path / "libjemalloc.so.2"
    lib.write_bytes(b"")
    monkeypatch.setattr(ovs, "JEMALLOC_PATHS", ("/nonexistent/libjemalloc.so.2", str(lib)))
    monkeypatch.delenv("ZCUBE_OVS_MALLOC", raising=False)
    assert ovs.vswitchd_env() == {"LD_PRELOAD": str(lib), "MALLOC_CONF": ovs.JEMALLOC_CONF}
    monkeypatch.setenv("ZCUBE_OVS_MALLOC", "Glibc ")
    assert ovs.vswitchd_env() == {}
    monkeypatch.setenv("ZCUBE_OVS_MALLOC", "jemalloc")
    monkeypatch.setattr(ovs, "JEMALLOC_PATHS", ("/nonexistent/libjemalloc.so.2",))
    assert ovs.vswitchd_env() == {}


def test_only_ovs_vswitchd_gets_the_allocator(monkeypatch):
    """The preload goes to the one command that asks for it, not to every OVS tool."""
    seen = []

    class Done:
        returncode, stdout, stderr = 0, "", ""

    monkeypatch.setattr(ovs.subprocess, "run", lambda cmd, **kw: seen.append(kw["env"]) or Done)
    o = ovs.Ovs()
    o.run("ovs-vsctl", "show")
    o.run("ovs-vswitchd", "x", extra_env={"LD_PRELOAD": "/l.so"})
    assert "LD_PRELOAD" not in seen[0] or seen[0]["LD_PRELOAD"] != "/l.so"
    assert seen[1]["LD_PRELOAD"] == "/l.so"


@pytest.mark.parametrize("raw,want", [(None, ovs.STATS_MS), ("", ovs.STATS_MS),
                                      ("default", None), (" Default", None), ("5000", 5000),
                                      ("60000", 60000)])
def test_interface_counters_interval(monkeypatch, raw, want):
    """Once an hour unless $ZCUBE_OVS_STATS_MS says otherwise ("default": OVS's 5 s)."""
    if raw is None:
        monkeypatch.delenv("ZCUBE_OVS_STATS_MS", raising=False)
    else:
        monkeypatch.setenv("ZCUBE_OVS_STATS_MS", raw)
    assert ovs.stats_interval_ms() == want


@pytest.mark.parametrize("raw", ["4999", "1s", "-5000"])
def test_interface_counters_interval_refused(monkeypatch, raw):
    monkeypatch.setenv("ZCUBE_OVS_STATS_MS", raw)
    with pytest.raises(ovs.OvsError, match="at least 5000"):
        ovs.stats_interval_ms()


def test_a_refused_interval_starts_no_daemon(monkeypatch):
    """A bad $ZCUBE_OVS_STATS_MS is refused before ovsdb-server starts, so nothing is left
    running that the testbed would not stop."""
    ran = []
    monkeypatch.setattr(ovs.Ovs, "run", lambda self, *cmd, **kw: ran.append(cmd))
    monkeypatch.setenv("ZCUBE_OVS_STATS_MS", "100")
    with pytest.raises(ovs.OvsError, match="at least 5000"):
        ovs.Ovs()._start()
    assert ran == []
