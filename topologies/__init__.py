"""Fabric descriptions and their builders.  Pure: no root, no OVS, no processes."""
from .fabric import (
    Fabric,
    FabricError,
    Host,
    Link,
    Port,
    Switch,
    gpu_of_ip,
    host_ip,
    host_mac,
    load_fabric,
    save_fabric,
)
from .fattree import fattree
from .roft import roft
from .zcube import zcube

BUILDERS = {"zcube": zcube, "roft": roft, "fattree": fattree}


def build(kind: str, **params) -> Fabric:
    """Build a fabric by builder name: ``build("zcube", n=4, gpus_per_server=4)``."""
    try:
        builder = BUILDERS[kind]
    except KeyError:
        raise FabricError(f"unknown fabric {kind!r}; choose one of {', '.join(BUILDERS)}") from None
    return builder(**params)


__all__ = ["BUILDERS", "Fabric", "FabricError", "Host", "Link", "Port", "Switch", "build",
           "fattree", "gpu_of_ip", "host_ip", "host_mac", "load_fabric", "roft",
           "save_fabric", "zcube"]
