"""How a kept-open connection writes a frame (traffic/kvpool.py ``_Connection._write``); no
sockets are opened."""

class Sock:
    def __init__(self):
        self.sent = []

    def sendall(self, data, flags=0):
        self.sent.append((len(data), flags))

    def getsockopt(self, *a):
        raise OSError("not a socket")


def test_a_frames_header_and_digest_ride_with_its_first_and_last_payload_bytes():
    """Under TCP_NODELAY a header or digest written alone is a packet of its own: both are
    written with more to follow (MSG_MORE) or after the last block held back with it."""
    from socket import MSG_MORE

    from traffic.kvpool import _Connection
    from traffic.kvwire import BLOCK
    sock = Sock()
    _Connection._write(sock, {"id": "t1", "flow": 0, "bytes": 2 * BLOCK + 10})
    flags = [f for _, f in sock.sent]
    assert flags == [MSG_MORE, 0, 0, MSG_MORE, 0]
    assert [n for n, _ in sock.sent][1:] == [BLOCK, BLOCK, 10, 32]
