"""When the kept-open receiver (traffic/kvreceiver.py) says a frame's first byte came: when
its first payload bytes did, not when its first 64 KB block was complete.  Over loopback."""
import hashlib
import socket
import threading
import time


def pair():
    lis = socket.create_server(("127.0.0.1", 0))
    out = socket.create_connection(lis.getsockname())
    conn, _ = lis.accept()
    lis.close()
    return out, conn


def test_the_first_byte_is_the_first_payload_bytes_even_inside_a_block():
    from traffic.kvreceiver import PoolReceiver
    from traffic.kvwire import BLOCK
    payload = bytes(range(256)) * 20            # 5,120 bytes: one block, short of BLOCK
    assert len(payload) < BLOCK
    digest = hashlib.sha256(hashlib.sha256(payload).digest()).digest()
    out, conn = pair()
    sent = {}

    def send():
        sent["first"] = time.time()
        out.sendall(payload[:1000])
        time.sleep(0.3)                         # the rest of the block comes 0.3 s later
        out.sendall(payload[1000:] + digest)

    th = threading.Thread(target=send)
    th.start()
    try:
        rec = PoolReceiver._receive(conn, {"id": "t", "flow": 0, "bytes": len(payload)},
                                    memoryview(bytearray(BLOCK)), ("127.0.0.1", 1))
    finally:
        th.join()
        out.close()
        conn.close()
    assert rec["verified"] and rec["bytes"] == len(payload)
    assert rec["first_byte"] - sent["first"] < 0.15        # before the pause, not after it
    assert rec["end"] - sent["first"] >= 0.3
