"""What the testbed leaves on the machine (processes, bridges, veths, namespaces), recorded
under ``$ZCUBE_STATE_DIR`` before it is made, so that cleaning up after a crashed run
removes exactly that and nothing else."""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import time

PREFIX = "zc"                    # switch (bridge) names, their veths and named namespaces


def state_dir() -> str:
    return os.environ.get("ZCUBE_STATE_DIR", "/run/zcube")


def proc_start_time(pid: int) -> str | None:
    """The kernel's start time of a live process (field 22 of /proc/PID/stat), or None for
    no such process or a zombie (dead, waiting to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except OSError:
        return None
    fields = data.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None
    return fields[19]


def alive(pid: int, start: str | None) -> bool:
    return start is not None and proc_start_time(pid) == start


class RunRecord:
    """The record of one run: append-only files in its folder."""

    def __init__(self, run_id: str | None = None, root: str | None = None):
        root = root or state_dir()
        self.id = run_id or time.strftime("%Y%m%d-%H%M%S-") + str(os.getpid())
        self.dir = os.path.join(root, "runs", self.id)
        os.makedirs(self.dir, mode=0o755, exist_ok=True)

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def _append(self, name: str, obj) -> None:
        with open(self.path(name), "a") as f:
            f.write(json.dumps(obj) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def add_pid(self, pid: int, what: str) -> None:
        self._append("pids", {"pid": pid, "start": proc_start_time(pid), "what": what})

    def add_bridges(self, names) -> None:
        for n in names:
            self._append("bridges", n)

    def add_links(self, names) -> None:
        for n in names:
            self._append("links", n)

    def add_netns(self, names) -> None:
        for n in names:
            self._append("netns", n)

    def write_json(self, name: str, obj) -> None:
        with open(self.path(name), "w") as f:
            json.dump(obj, f)

    def read_json(self, name: str, default=None):
        try:
            with open(self.path(name)) as f:
                return json.load(f)
        except (OSError, ValueError):
            return default

    def read(self, name: str) -> list:
        try:
            with open(self.path(name)) as f:
                return [json.loads(line) for line in f if line.strip()]
        except OSError:
            return []


def runs(root: str | None = None) -> list[RunRecord]:
    base = os.path.join(root or state_dir(), "runs")
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    return [RunRecord(n, root) for n in names]


class Lock:
    """One emulation at a time on a machine: the switch names would collide."""

    def __init__(self, root: str | None = None):
        root = root or state_dir()
        os.makedirs(root, mode=0o755, exist_ok=True)
        self.path = os.path.join(root, "lock")
        self.fd = None

    def acquire(self) -> bool:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            self.fd = None
            return False
        os.ftruncate(self.fd, 0)
        os.write(self.fd, str(os.getpid()).encode())
        return True

    def holder(self) -> str:
        try:
            with open(self.path) as f:
                return f.read().strip() or "?"
        except OSError:
            return "?"

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


def end_process(pid: int, start: str | None, grace: float = 3.0) -> bool:
    """SIGTERM, then SIGKILL after ``grace`` seconds; only if it is the recorded process."""
    if not alive(pid, start):
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.time() + grace
    while time.time() < deadline:
        if not alive(pid, start):
            return True
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return True


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace")


def free_ports(n: int) -> tuple[int, ...]:
    """``n`` distinct TCP ports on 127.0.0.1 that were free a moment ago (held open together
    while chosen, so never the same one twice)."""
    import socket
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return tuple(s.getsockname()[1] for s in socks)
    finally:
        for s in socks:
            s.close()


def existing_links() -> set[str]:
    """Names of the network interfaces of the root namespace (netlink, through pyroute2)."""
    from pyroute2 import IPRoute
    with IPRoute() as ipr:
        return {link.get_attr("IFLA_IFNAME") for link in ipr.get_links()}


def clean_run(rec: RunRecord, ovs_env: dict | None = None) -> dict:
    """Remove what one run recorded.  Returns counts of what was removed."""
    if ovs_env is None:
        ovs_env = rec.read_json("ovs.json", {})
    done = {"processes": 0, "bridges": 0, "links": 0, "netns": 0}
    for entry in reversed(rec.read("pids")):
        if end_process(entry["pid"], entry["start"]):
            done["processes"] += 1
    bridges = [b for b in rec.read("bridges") if b.startswith(PREFIX)]
    if bridges and shutil.which("ovs-vsctl"):
        env = dict(os.environ, **(ovs_env or {}))
        listed = subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True,
                                text=True, errors="replace", env=env)
        present = set(listed.stdout.split()) if listed.returncode == 0 else set()
        for b in bridges:
            if b in present:
                subprocess.run(["ovs-vsctl", "--timeout=5", "--if-exists", "del-br", b],
                               capture_output=True, env=env)
                done["bridges"] += 1
    links = existing_links()
    for name in rec.read("links") + bridges:
        if name.startswith(PREFIX) and name in links:
            _run(["ip", "link", "del", name])
            done["links"] += 1
    netns = set(os.listdir("/var/run/netns")) if os.path.isdir("/var/run/netns") else set()
    for name in rec.read("netns"):
        if name.startswith(PREFIX) and name in netns:
            _run(["ip", "netns", "delete", name])
            done["netns"] += 1
    shutil.rmtree(rec.dir, ignore_errors=True)
    return done
