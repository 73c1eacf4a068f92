"""The environment the testbed's own ovs-vswitchd starts with (no root): jemalloc where a
library is installed, glibc's malloc where none is."""
import testbed.emulation.ovs as ovs


def test_jemalloc_is_preloaded_where_installed(monkeypatch, tmp_path):
    lib = tmp_path / "libjemalloc.so.2"
    lib.write_bytes(b"")
    monkeypatch.setattr(ovs, "JEMALLOC_PATHS", ("/nonexistent/libjemalloc.so.2", str(lib)))
    monkeypatch.setenv("ZCUBE_OVS_MALLOC", "glibc")         # no longer read
    assert ovs.vswitchd_env() == {"LD_PRELOAD": str(lib), "MALLOC_CONF": ovs.JEMALLOC_CONF}
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


def test_own_ovs_writes_interface_counters_hourly(monkeypatch, tmp_path):
    """The testbed's own OVS database says once an hour before ovs-vswitchd starts (every
    5 s the pass that writes them stalls the forwarding thread)."""
    schema = tmp_path / "vswitch.ovsschema"
    schema.write_text("{}")
    monkeypatch.setenv("ZCUBE_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("ZCUBE_OVS_STATS_MS", "default")      # no longer read
    monkeypatch.setattr(ovs, "SCHEMA_PATHS", [str(schema)])
    ran = []
    monkeypatch.setattr(ovs.Ovs, "run", lambda self, *cmd, **kw: ran.append(cmd) or "ok")
    monkeypatch.setattr(ovs.Ovs, "_record", lambda self, name: None)
    monkeypatch.setattr(ovs.Ovs, "answers", lambda self: True)
    ovs.Ovs()._start()
    names = [cmd[0] for cmd in ran]
    told = next(k for k, cmd in enumerate(ran) if "other_config:userspace-tso-enable=true" in cmd)
    assert f"other_config:stats-update-interval={ovs.STATS_MS}" in ran[told]
    assert ovs.STATS_MS == 3_600_000 and told < names.index("ovs-vswitchd")
