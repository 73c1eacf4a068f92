"""Asks the controller to pin each kept-open connection of a workload to the path the flow
model and ns-3 draw for it, so the backends compare draw for draw (the ``ecmp: pinned``
setting; ``hash`` leaves the choice to the select groups)."""
from __future__ import annotations

import json
import time
import urllib.request
from dataclasses import asdict

from controller.httpguard import HEADER, TOKEN_ENV, new_token
from controller.pins import Pin
from testbed.core.ecmp import pool_paths
from testbed.emulation.agents import EmulationError
from traffic.kvpool import POOL_PORT

PIN_WAIT_S = 15.0     # every switch confirms its pinned flows within this, or the run stops


def pinning_paths(emu) -> bool:
    """Whether ``emu``'s kept-open connections are pinned to drawn paths (its settings'
    ``ecmp``: ``pinned``, the default, or ``hash``)."""
    return emu.settings.ecmp == "pinned"


def workload_pins(table, workload, pairs_by_host: dict, ports_by_host: dict) -> list[Pin]:
    """A pin for each seeded connection (``pairs_by_host`` and their source ports
    ``ports_by_host``, in the same order) that has a path drawn for it."""
    paths = pool_paths(table, workload)
    pins = []
    for host, pairs in sorted(pairs_by_host.items()):
        for pair, sport in zip(pairs, ports_by_host.get(host, ())):
            path = paths.get((pair[0], pair[1], int(pair[2]) if len(pair) > 2 else 0))
            if path and sport:
                pins.append(Pin(pair[0], pair[1], int(sport), POOL_PORT, tuple(path)))
    return pins


def controller_token(emu) -> dict:
    """A fresh secret for the controller about to start, as the environment variable that
    hands it over; ``emu.rest_token`` keeps it for :func:`post_pins`, whose POSTs the
    controller refuses without it (:mod:`controller.httpguard`)."""
    emu.rest_token = new_token()
    return {TOKEN_ENV: emu.rest_token}


def post_pins(emu, pins: list[Pin], timeout_s: float = PIN_WAIT_S) -> int:
    """Hand ``pins`` to the emulation's controller (replacing those before) and wait until
    every switch has confirmed them; how many pinned flows the switches hold."""
    body = json.dumps({"pins": [asdict(p) for p in pins]})
    req = urllib.request.Request(f"http://127.0.0.1:{emu.rest_port}/zcube/pins",
                                 data=body.encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          HEADER: emu.rest_token})
    with urllib.request.urlopen(req, timeout=10) as r:
        answer = json.load(r)
    emu.pins = list(pins)
    deadline = time.time() + timeout_s
    while emu.status().get("pins_installed", 0) < answer["generation"]:
        if time.time() > deadline:
            raise EmulationError(f"the controller did not confirm {len(pins)} pinned "
                                 f"connection(s) within {timeout_s:g} s")
        time.sleep(0.02)
    return answer["pinned_flows"]
