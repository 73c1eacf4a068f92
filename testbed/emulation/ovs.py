"""Open vSwitch without systemd: an OVS already running is used and left alone, else the
testbed starts and stops its own in ``$ZCUBE_STATE_DIR/ovs``; the datapath choice and the
few OVS commands the testbed reads."""
from __future__ import annotations

import os
import shutil
import subprocess
import time

from testbed.emulation.machine_state import alive, end_process, proc_start_time, state_dir

SCHEMA_PATHS = ["/usr/share/openvswitch/vswitch.ovsschema",
                "/usr/local/share/openvswitch/vswitch.ovsschema"]

# jemalloc where installed: glibc's malloc and free of the datapath's 64 KB segment buffers
# took a fifth of its busiest windows (docs/fidelity.md, "A faster allocator for the datapath").
JEMALLOC_PATHS = ("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
                  "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2",
                  "/usr/lib64/libjemalloc.so.2", "/usr/local/lib/libjemalloc.so.2")
JEMALLOC_CONF = "tcache_max:131072"


def vswitchd_env() -> dict:
    """The environment ovs-vswitchd starts with beyond the testbed's own: jemalloc preloaded
    with :data:`JEMALLOC_CONF` where a library is found."""
    lib = next((p for p in JEMALLOC_PATHS if os.path.exists(p)), None)
    return {"LD_PRELOAD": lib, "MALLOC_CONF": JEMALLOC_CONF} if lib else {}

# Interface stats written hourly, not every 5 s: each pass stalled the userspace forwarding
# thread 2-5 ms (docs/fidelity.md, "What the stalls are"), and nothing reads them.
STATS_MS = 3_600_000


class OvsError(RuntimeError):
    pass


def kernel_datapath_available() -> bool:
    if os.path.isdir("/sys/module/openvswitch"):
        return True
    if shutil.which("modprobe"):
        return subprocess.run(["modprobe", "-q", "openvswitch"],
                              capture_output=True).returncode == 0
    return False


def resolve_datapath(choice: str) -> str:
    if choice == "auto":
        return "kernel" if kernel_datapath_available() else "user"
    if choice == "kernel" and not kernel_datapath_available():
        raise OvsError("--datapath kernel: the openvswitch kernel module is not available here; "
                       "use --datapath user (or auto)")
    return choice


class Ovs:
    """A running OVS: the system's, or one this object started (and will stop)."""

    def __init__(self):
        self.rundir = os.path.join(state_dir(), "ovs")
        self.env: dict = {}          # OVS_RUNDIR & co when we run our own
        self.started = False
        self.pids: list[tuple[int, str | None]] = []

    # -- commands ---------------------------------------------------------------------
    def run(self, *cmd: str, check: bool = True, timeout: float = 30,
            extra_env: dict | None = None) -> str:
        env = dict(os.environ, **self.env, **(extra_env or {}))
        try:
            proc = subprocess.run(list(cmd), capture_output=True, text=True, errors="replace",
                                  env=env, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise OvsError(f"{' '.join(cmd[:3])} did not answer in {timeout:.0f} s") from None
        if check and proc.returncode != 0:
            raise OvsError(f"{' '.join(cmd[:4])}: {proc.stderr.strip() or proc.stdout.strip()}")
        return proc.stdout

    def vsctl(self, *args: str, check: bool = True) -> str:
        return self.run("ovs-vsctl", "--timeout=10", *args, check=check)

    def ofctl(self, *args: str, check: bool = True) -> str:
        return self.run("ovs-ofctl", "-O", "OpenFlow13", *args, check=check)

    def appctl(self, *args: str, check: bool = True) -> str:
        return self.run("ovs-appctl", *args, check=check)

    def answers(self) -> bool:
        return subprocess.run(["ovs-vsctl", "--timeout=2", "show"], capture_output=True,
                              env=dict(os.environ, **self.env)).returncode == 0

    @property
    def ours(self) -> bool:
        """Whether this OVS runs in the testbed's own run directory (not the system's)."""
        return self.rundir in (self.env.get("OVS_RUNDIR"), os.environ.get("OVS_RUNDIR"))

    @property
    def tso_enabled(self) -> bool:
        out = self.vsctl("--if-exists", "get", "Open_vSwitch", ".",
                         "other_config:userspace-tso-enable", check=False)
        return out.strip().strip('"') == "true"

    @property
    def allocator(self) -> str | None:
        """``jemalloc`` or ``glibc``: what the ovs-vswitchd of this testbed's run directory
        allocates with, read from its memory map (None: not ours, or not readable)."""
        pid = vswitchd_pid(self.rundir) if self.ours else None
        try:
            with open(f"/proc/{pid}/maps") as f:
                return "jemalloc" if "libjemalloc" in f.read() else "glibc"
        except (OSError, TypeError):
            return None

    @property
    def stats_interval(self) -> int | None:
        """The database's ``stats-update-interval`` in ms (None: unset, OVS's 5000)."""
        out = self.vsctl("--if-exists", "get", "Open_vSwitch", ".",
                         "other_config:stats-update-interval", check=False).strip().strip('"')
        return int(out) if out.isdigit() else None

    def allocator_note(self) -> str:
        """``", allocator X"`` for the bring-up line, or "" when unknown; with the interface
        counters' interval where it is not OVS's default."""
        stats = self.stats_interval
        return ((f", allocator {a}" if (a := self.allocator) else "")
                + (f", interface stats every {stats // 1000} s" if stats else ""))

    # -- lifecycle --------------------------------------------------------------------
    def ensure(self) -> "Ovs":
        """Use the OVS that answers (system's, or ours from an earlier step), else start ours."""
        for tool in ("ovs-vsctl", "ovsdb-server", "ovs-vswitchd", "ovsdb-tool"):
            if not shutil.which(tool):
                raise OvsError(f"{tool} not found: run 'make setup' (installs openvswitch-switch)")
        if self.answers():
            return self
        own = {"OVS_RUNDIR": self.rundir, "OVS_DBDIR": self.rundir, "OVS_LOGDIR": self.rundir,
               "OVS_SYSCONFDIR": self.rundir}
        self.env = own
        if self.answers():
            self._adopt()        # left running by a testbed that crashed: ours to stop
            return self
        self._start()
        return self

    def export_env(self) -> None:
        """Make child processes (Mininet's ovs-vsctl calls) talk to this OVS."""
        os.environ.update(self.env)

    def _start(self) -> None:
        os.makedirs(self.rundir, mode=0o755, exist_ok=True)
        db = os.path.join(self.rundir, "conf.db")
        sock = os.path.join(self.rundir, "db.sock")
        for stale in ("ovsdb-server.pid", "ovs-vswitchd.pid", "db.sock", "pids", "owner"):
            try:
                os.unlink(os.path.join(self.rundir, stale))
            except OSError:
                pass
        if os.path.exists(db):
            os.unlink(db)          # ours only: a fresh database every time
        schema = next((p for p in SCHEMA_PATHS if os.path.exists(p)), None)
        if schema is None:
            raise OvsError("vswitch.ovsschema not found: is openvswitch-switch installed?")
        self.run("ovsdb-tool", "create", db, schema)
        self.run("ovsdb-server", db, f"--remote=punix:{sock}",
                 f"--pidfile={self.rundir}/ovsdb-server.pid", "--detach",
                 f"--log-file={self.rundir}/ovsdb-server.log", "-vconsole:off")
        self._record("ovsdb-server")
        self.vsctl("--no-wait", "init")
        self.vsctl("--no-wait", "set", "Open_vSwitch", ".",
                   "other_config:userspace-tso-enable=true",
                   f"other_config:stats-update-interval={STATS_MS}")
        self.run("ovs-vswitchd", f"unix:{sock}", f"--pidfile={self.rundir}/ovs-vswitchd.pid",
                 "--detach", f"--log-file={self.rundir}/ovs-vswitchd.log", "-vconsole:off",
                 extra_env=vswitchd_env())
        self._record("ovs-vswitchd")
        self.started = True
        write_owner(self.rundir)
        deadline = time.time() + 10
        while time.time() < deadline:
            if self.answers() and self.run("ovs-appctl", "version", check=False):
                return
            time.sleep(0.1)
        raise OvsError(f"ovs-vswitchd did not come up; see {self.rundir}/ovs-vswitchd.log")

    def _adopt(self) -> None:
        """Take over daemons a dead testbed process started; leave a live owner's alone."""
        if owner_alive(self.rundir):
            return
        try:
            lines = open(os.path.join(self.rundir, "pids")).read().split("\n")
        except OSError:
            return
        for line in filter(None, lines):
            pid, start, _ = line.split(" ", 2)
            self.pids.append((int(pid), None if start == "None" else start))
        self.started = bool(self.pids)
        if self.started:
            write_owner(self.rundir)

    def _record(self, name: str) -> None:
        with open(os.path.join(self.rundir, f"{name}.pid")) as f:
            pid = int(f.read().strip())
        start = proc_start_time(pid)
        self.pids.append((pid, start))
        with open(os.path.join(self.rundir, "pids"), "a") as f:
            f.write(f"{pid} {start} {name}\n")

    def stop(self) -> None:
        """Stop the daemons this object started (vswitchd first); nothing else."""
        if not self.started:
            return
        for pid, start in reversed(self.pids):
            end_process(pid, start)
        self.pids.clear()
        self.started = False
        for name in ("pids", "owner"):
            try:
                os.unlink(os.path.join(self.rundir, name))
            except OSError:
                pass


def write_owner(rundir: str) -> None:
    """Record which process is responsible for stopping the daemons in ``rundir``."""
    with open(os.path.join(rundir, "owner"), "w") as f:
        f.write(f"{os.getpid()} {proc_start_time(os.getpid())}\n")


def owner_alive(rundir: str) -> bool:
    try:
        pid, start = open(os.path.join(rundir, "owner")).read().split()
    except (OSError, ValueError):
        return False
    return alive(int(pid), start)


def stop_own_leftovers() -> int:
    """Stop OVS daemons the testbed started whose owning process has died."""
    rundir = os.path.join(state_dir(), "ovs")
    if owner_alive(rundir):
        return 0
    path = os.path.join(rundir, "pids")
    stopped = 0
    try:
        lines = open(path).read().split("\n")
    except OSError:
        return 0
    for line in reversed([ln for ln in lines if ln.strip()]):
        pid, start, _ = line.split(" ", 2)
        if end_process(int(pid), None if start == "None" else start):
            stopped += 1
    os.unlink(path)
    try:
        os.unlink(os.path.join(rundir, "owner"))
    except OSError:
        pass
    return stopped


def vswitchd_pid(rundir: str) -> int | None:
    """The PID of the ovs-vswitchd serving ``rundir`` (None if it cannot be read)."""
    try:
        with open(os.path.join(rundir, "ovs-vswitchd.pid")) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None
