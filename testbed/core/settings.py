"""The emulation's settings: one validated object, a scenario's ``emulation:`` section, handed to
the emulation through :class:`testbed.core.backend.SessionOptions` so that nothing reads them from
the environment; docs/settings.md explains each.  In core, as the scenario, the CLI and the
emulation all import it.
"""
from __future__ import annotations

import os
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

ECMP_MODES = ("pinned", "hash")
# a Linux congestion control's name (the kernel's TCP_CA_NAME_MAX is 16 bytes with its NUL)
CC_NAME = re.compile(r"^[a-z][a-z0-9_]{0,14}$")
# the variable of the agents' environment that names the congestion control (traffic/kvwire.py)
TCP_CC_VAR = "ZCUBE_TCP_CC"
# variables these settings replace, and where each went: the emulation warns when one is set,
# as it has no effect
RETIRED = {
    "ZCUBE_TCP_CC": "emulation.tcp_cc in the scenario, or --tcp-cc",
    "ZCUBE_ECMP": "emulation.ecmp in the scenario, or --ecmp",
    **{name: "removed: the emulation always runs with its measured default" for name in (
        "ZCUBE_LEAF_QDISC", "ZCUBE_GSO_MAX_SIZE", "ZCUBE_TSO_RTT_LOG", "ZCUBE_OVS_MALLOC",
        "ZCUBE_OVS_STATS_MS", "ZCUBE_OVS_SEND_BUFFER", "ZCUBE_PIN", "ZCUBE_AGENT_REALTIME",
        "ZCUBE_BUNDLES", "ZCUBE_REROUTE_SETTLE", "ZCUBE_PACING")},
}


def cc_name(value: str) -> str:
    """``value`` if it can name a Linux congestion control, else ValueError saying why."""
    if not CC_NAME.match(value):
        raise ValueError(f"{value!r} is not a congestion control name (lower-case letters, "
                         f"digits and '_', at most 15, e.g. cubic, bbr, reno)")
    return value


class EmulationSettings(BaseModel):
    """How the emulation runs a workload; every default is the measured best."""
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    tcp_cc: str = Field(
        "cubic", description="congestion control of every KV connection (a Linux name: "
        "cubic, bbr, reno ...; reno where the kernel lacks it): CUBIC, as BBR's PROBE_RTT "
        "holds a kept-open connection's window at 4 segments for 200 ms, which an RDMA "
        "queue pair never does")
    ecmp: Literal[ECMP_MODES] = Field(
        "pinned", description="pinned: each kept-open connection on the path the model and "
        "ns-3 draw for it, so the backends compare draw for draw; hash: OVS's select groups "
        "hash it, as a real switch does, another draw than the other backends'")

    @field_validator("tcp_cc")
    @classmethod
    def _cc(cls, value: str) -> str:
        return cc_name(value)

    def agent_env(self) -> dict:
        """The environment variables a host agent gets from these settings."""
        return {TCP_CC_VAR: self.tcp_cc}


def retired_in(environ=None) -> list[str]:
    """One line for each retired variable set in ``environ`` (default: this process's)."""
    environ = os.environ if environ is None else environ
    return [f"${name} is no longer read ({where})" for name, where in RETIRED.items()
            if name in environ]
