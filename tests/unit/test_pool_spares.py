"""Transfers started again each take an idle spare connection of their pairing, not one
queue behind each other (traffic/kvpool.py ``Pool._spare``); no sockets are opened."""
import queue

from traffic.kvpool import RESTART_LANE, SPARES, Pool


class Conn:
    def __init__(self, busy: int = 0):
        self.claimed, self.waiting, self.work = 0, dict.fromkeys(range(busy)), queue.Queue()

    def idle(self) -> bool:
        return not self.claimed and not self.waiting and self.work.empty()


def pool_with(conns) -> Pool:
    pool = Pool(record=lambda rec: None)
    for k, conn in enumerate(conns, 1):
        pool.conns[("a", "b", k * RESTART_LANE)] = conn
    return pool


def transfer(n: int):
    tr = {"id": f"r{n}", "flow": 0, "idx": 0, "lane": 0, "deadline": float("inf"),
          "candidates": [("x", "y"), ("a", "b")]}
    return tr, {"errors": [], "attempts": 1}


def test_transfers_moved_together_take_one_spare_connection_each():
    conns = [Conn() for _ in range(SPARES)]
    pool = pool_with(conns)
    for n in range(3):
        pool.retry(*transfer(n), "x->y: its pairing went down", pause=False)
    assert [c.work.qsize() for c in conns] == [1, 1, 1] + [0] * (SPARES - 3)
    assert [c.claimed for c in conns[:4]] == [1, 1, 1, 0]


def test_a_spare_busy_with_a_transfer_in_flight_is_passed_over():
    conns = [Conn(busy=1), Conn()]
    pool = pool_with(conns)
    pool.retry(*transfer(0), "x->y: reset", pause=False)
    assert (conns[0].work.qsize(), conns[1].work.qsize()) == (0, 1)


def test_with_every_spare_busy_the_least_loaded_one_takes_it():
    conns = [Conn(busy=3) for _ in range(SPARES)]
    conns[5].waiting = {}
    conns[5].claimed = 1
    pool = pool_with(conns)
    pool.retry(*transfer(0), "x->y: reset", pause=False)
    assert [c.work.qsize() for c in conns] == [0] * 5 + [1] + [0] * (SPARES - 6)
    assert len(pool.conns) == SPARES

