"""The kept-open connections' stall bound (traffic.kvwire.stall_ms), without root: read from
``TCP_INFO`` as the kernel lays it out, on a real loopback connection too."""
import math
import re
import socket
import struct
import subprocess
import threading
import time

from traffic.kvwire import stall_ms


def _info(rto_us, rtt_us, rttvar_us, retransmits=0, backoff=0) -> bytes:
    ints = [0] * 17
    ints[0], ints[15], ints[16] = rto_us, rtt_us, rttvar_us
    return struct.pack("8B17I", 1, 0, retransmits, 0, backoff, 0, 0, 0, *ints) + b"\0" * 64


def test_the_bound_is_the_rto_plus_two_rtts_and_four_variations_rounded_up():
    assert stall_ms(_info(204_000, 2_000, 500)) == 204 + 4 + 2
    assert stall_ms(_info(600_000, 150_000, 40_000)) == 600 + 300 + 160   # a loaded queue
    assert stall_ms(_info(200_000, 1_001, 0)) == 203
    assert stall_ms(_info(200_000, 0, 0)) is None           # no RTT measured yet
    assert stall_ms(b"\0" * 20) is None                     # an older kernel's short struct
    # backing off after a timeout, the RTO doubles: the bound set before it stays
    assert stall_ms(_info(400_000, 2_000, 500, retransmits=1, backoff=1)) is None


def test_a_real_connections_bound_follows_linuxs_200_ms_minimum_rto():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def serve():
        conn, _ = srv.accept()
        with conn:
            while conn.recv(1 << 16):
                pass
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    with socket.create_connection(srv.getsockname()) as c:
        c.sendall(b"x" * 100_000)
        time.sleep(0.1)                                  # every byte acknowledged
        ms = stall_ms(c.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256))
        ss = subprocess.run(["ss", "-tin", "src", f"127.0.0.1:{c.getsockname()[1]}"],
                            capture_output=True, text=True).stdout
    t.join(5)
    srv.close()
    # the same figures as ss shows for it: rto:204 rtt:0.134/0.171 -> 204 + 0.268 + 0.684
    m = re.search(r"rto:(\d+) rtt:([\d.]+)/([\d.]+)", ss)
    assert m, ss
    rto, rtt, var = (float(x) for x in m.groups())
    assert ms == math.ceil(rto + 2 * rtt + 4 * var) or abs(ms - (rto + 2 * rtt + 4 * var)) < 2
    assert 200 <= ms < 1000, ms


def test_the_senders_window_and_pacing_rate_are_read_as_ss_shows_them():
    from traffic.kvwire import sending_state
    ints = [0] * 24
    ints[18] = 42
    info = struct.pack("8B24IQ", *[0] * 8, *ints, 12_500_000) + b"\0" * 64
    assert sending_state(_Fake(info)) == {"cwnd": 42, "pacing_mbps": 100.0}
    assert sending_state(_Fake(b"\0" * 40)) == {}            # an older kernel's short struct
    assert sending_state(_Fake(None)) == {}                  # closed meanwhile
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    with socket.create_connection(srv.getsockname()) as c:
        conn, _ = srv.accept()
        c.sendall(b"x" * 10_000)
        time.sleep(0.05)
        got = sending_state(c)
        ss = subprocess.run(["ss", "-tin", "src", f"127.0.0.1:{c.getsockname()[1]}"],
                            capture_output=True, text=True).stdout
        conn.close()
    srv.close()
    m = re.search(r"\bcwnd:(\d+)", ss)
    assert m, ss
    assert got["cwnd"] == int(m.group(1)) and got["pacing_mbps"] > 0


class _Fake:
    """A socket whose TCP_INFO is ``info`` (None: the call fails)."""

    def __init__(self, info):
        self.info = info

    def getsockopt(self, *args):
        if self.info is None:
            raise OSError("closed")
        return self.info
