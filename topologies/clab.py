"""A Fabric as a containerlab topology (``*.clab.yml``), pure: nodes, links and the set-up
commands that make it match the testbed's emulation; containerlab does not create the
Open vSwitch bridges, so the file's header lists the commands that do."""
from __future__ import annotations

import json
import os
import re
from typing import Mapping

from topologies.fabric import HOST_SYSCTLS, PREFIX_LEN, Fabric, FabricError
from topologies.host_setup import host_commands
from topologies.ifnames import BRIDGE_PREFIX, bridge_name, host_ifname, switch_ifname

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemas",
                           "clab.schema.json")
DEFAULT_CONTROLLER = "tcp:127.0.0.1:6653"
# iproute2 is needed inside the GPU containers (busybox's ``ip`` has no ``neigh replace``).
DEFAULT_IMAGE = "nicolaka/netshoot"
DEFAULT_BRIDGE_PREFIX = BRIDGE_PREFIX
SETUP_NODE = "ovs-setup"
IFNAMSIZ = 15            # longest Linux interface name
MAX_HOSTS = 1_024        # GPUs: the file grows with their square (about 190 MB at 1,024)


_CONTROLLER = re.compile(r"^(tcp|ssl):(\d{1,3}(\.\d{1,3}){3}|\[[0-9A-Fa-f:]+\]):(\d{1,5})$")
_LAB_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9-._]*$")
_NODE_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9-._]*$")


class ExportError(FabricError):
    """A fabric or an option that the export format cannot express; the message says which."""


def check_controller(controller: str) -> str:
    """``tcp:IP:PORT`` or ``ssl:IP:PORT`` (IPv6 in brackets), as ``ovs-vsctl`` takes it."""
    m = _CONTROLLER.match(controller or "")
    if not m or not 0 < int(m.group(4)) < 65536 or (
            m.group(2)[0] != "[" and any(int(x) > 255 for x in m.group(2).split("."))):
        raise ExportError(f"controller {controller!r} is not tcp:IP:PORT or ssl:IP:PORT "
                          f"(e.g. {DEFAULT_CONTROLLER})")
    return controller


def lab_name(fabric: Fabric) -> str:
    """``zcube-n4``, ``roft-4x4``, ``fattree-k4``: the fabric's label as a lab name."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", fabric.label.replace("=", "")).strip("-")
    return name if _LAB_NAME.match(name) else f"fabric-{name}" if name else "fabric"


def _endpoint(fabric: Fabric, node: str, port: int, prefix: str) -> tuple[str, str]:
    if fabric.is_host(node):
        return node, host_ifname(node, port)
    return bridge_name(node, prefix), switch_ifname(node, port, prefix)


def _check_names(fabric: Fabric, prefix: str) -> None:
    for name in [h.name for h in fabric.hosts] + [bridge_name(s.name, prefix)
                                                   for s in fabric.switches]:
        if not _NODE_NAME.match(name):
            raise ExportError(f"{name!r} is not a valid containerlab node name")
        if name == SETUP_NODE:
            raise ExportError(f"node name {SETUP_NODE!r} is taken by the bridge set-up node")
    for s in fabric.switches:
        if len(bridge_name(s.name, prefix)) > IFNAMSIZ:
            raise ExportError(f"bridge name {bridge_name(s.name, prefix)!r} is longer than "
                              f"{IFNAMSIZ} characters; use a shorter bridge prefix")
    for link in fabric.links:
        for node, port in ((link.a, link.a_port), (link.b, link.b_port)):
            _, ifname = _endpoint(fabric, node, port, prefix)
            if len(ifname) > IFNAMSIZ:
                raise ExportError(f"interface name {ifname!r} is longer than {IFNAMSIZ} "
                                  f"characters, the Linux limit; use a shorter bridge prefix")


def _bridge_setup(fabric: Fabric, switch: str, controller: str, prefix: str) -> str:
    sw = fabric.switch(switch)
    br = bridge_name(switch, prefix)
    parts = [f"ovs-vsctl set bridge {br} protocols=OpenFlow13 fail_mode=secure "
             f"other-config:datapath-id={sw.dpid_hex} other-config:disable-in-band=true"]
    for port in sorted(p for p, _, _, _ in fabric.neighbors(switch)):
        parts.append(f"set interface {switch_ifname(switch, port, prefix)} ofport_request={port}")
    parts.append(f"set-controller {br} {controller}")
    return " -- ".join(parts)


def bridge_commands(fabric: Fabric,
                    prefix: str = DEFAULT_BRIDGE_PREFIX) -> tuple[list[str], list[str]]:
    """Shell lines (run as root) that create the bridges before ``containerlab deploy`` and
    remove them after ``containerlab destroy``."""
    create = [f"ovs-vsctl --may-exist add-br {bridge_name(s.name, prefix)} -- set bridge "
              f"{bridge_name(s.name, prefix)} fail_mode=secure "
              f"other-config:datapath-id={s.dpid_hex} other-config:disable-in-band=true"
              for s in fabric.switches]
    remove = [f"ovs-vsctl --if-exists del-br {bridge_name(s.name, prefix)}"
              for s in fabric.switches]
    return create, remove


def check_size(fabric: Fabric) -> None:
    """Refuse a fabric of more than ``MAX_HOSTS`` GPUs: every GPU's static neighbours make
    the file grow with the number of GPUs squared."""
    if fabric.nvlinks:
        raise ExportError("a containerlab file has no NVLink inside the servers; export the "
                          "fabric without nvlink_gbps")
    n = len(fabric.hosts)
    if n > MAX_HOSTS:
        ports = max((len(h.ports) for h in fabric.hosts), default=1)
        raise ExportError(f"{n:,} GPUs: a containerlab file grows with GPUs squared (each "
                          f"GPU's static neighbours, about {n * n * ports * 90 / 1e9:,.1f} GB "
                          f"here); at most {MAX_HOSTS:,} GPUs")


def _check(fabric, controller, image, host_configs, name, bridge_prefix) -> str:
    check_size(fabric)
    check_controller(controller)
    if not image or any(c.isspace() for c in image):
        raise ExportError(f"image {image!r} is not a container image reference")
    name = name or lab_name(fabric)
    if not _LAB_NAME.match(name):
        raise ExportError(f"lab name {name!r} must match {_LAB_NAME.pattern}")
    if bridge_prefix and not re.match(r"^[A-Za-z0-9][A-Za-z0-9_-]*$", bridge_prefix):
        raise ExportError(f"bridge prefix {bridge_prefix!r} must be letters, digits, - or _")
    _check_names(fabric, bridge_prefix)
    if host_configs is not None:
        missing = [h.name for h in fabric.hosts if h.name not in host_configs]
        if missing:
            raise ExportError(f"no host configuration for {missing[0]}")
    return name


def _nodes(fabric, controller, host_configs, bridge_prefix):
    """``(name, node)`` of every node, one at a time (a host's configuration is asked for
    when its node is made)."""
    for h in fabric.hosts:
        yield h.name, {
            "kind": "linux",
            "group": f"server{h.server}",
            "labels": {"zcube.role": "gpu", "zcube.gpu": str(h.index),
                       "zcube.server": str(h.server), "zcube.rank": str(h.rank)},
            "sysctls": {k: str(v) for k, v in HOST_SYSCTLS.items()},
            "exec": host_commands(fabric, h.name,
                                  None if host_configs is None else host_configs[h.name]),
        }
    for s in fabric.switches:
        yield bridge_name(s.name, bridge_prefix), {
            "kind": "ovs-bridge",
            "group": s.group,
            "labels": {"zcube.role": "switch", "zcube.switch": s.name, "zcube.group": s.group,
                       "zcube.dpid": s.dpid_hex, "zcube.controller": controller},
        }
    if fabric.switches:
        yield SETUP_NODE, {
            "kind": "host",
            "labels": {"zcube.role": "ovs-setup", "zcube.controller": controller},
            "exec": [_bridge_setup(fabric, s.name, controller, bridge_prefix)
                     for s in fabric.switches],
        }


def _links(fabric, bridge_prefix):
    for link in fabric.links:
        a = _endpoint(fabric, link.a, link.a_port, bridge_prefix)
        b = _endpoint(fabric, link.b, link.b_port, bridge_prefix)
        yield {"endpoints": [f"{a[0]}:{a[1]}", f"{b[0]}:{b[1]}"], "vars": {"gbps": link.gbps}}


def clab_topology(fabric: Fabric, controller: str = DEFAULT_CONTROLLER,
                  image: str = DEFAULT_IMAGE, host_configs: Mapping | None = None,
                  name: str | None = None,
                  bridge_prefix: str = DEFAULT_BRIDGE_PREFIX) -> dict:
    """The containerlab topology of ``fabric`` as a dict: a ``linux`` node per GPU (its NIC
    ports named as in Mininet, addressed and, with ``host_configs``, routed by post-deploy
    ``exec``), an ``ovs-bridge`` node per switch (bridge ``<prefix><switch>``), one
    ``ovs-setup`` host node that sets each bridge's OpenFlow 1.3, DPID, port numbers and
    controller, and a link per cable (its rate recorded in ``vars``, not enforced)."""
    name = _check(fabric, controller, image, host_configs, name, bridge_prefix)
    topology: dict = {"kinds": {"linux": {"image": image}},
                      "nodes": dict(_nodes(fabric, controller, host_configs, bridge_prefix))}
    links = list(_links(fabric, bridge_prefix))
    if links:
        topology["links"] = links
    return {"name": name, "topology": topology}


def _header(fabric, controller, image, host_configs, bridge_prefix, policy) -> list[str]:
    create, remove = bridge_commands(fabric, bridge_prefix)
    hosts = (f"addresses, routes and static neighbours of policy {policy}" if policy
             else "addresses, routes and static neighbours" if host_configs is not None
             else f"addresses (/{PREFIX_LEN}) only")
    return [f"containerlab topology of {fabric.name} ({fabric.label}), written by zcube topo.",
            f"GPU containers get their {hosts}; image {image} (needs iproute2).",
            "containerlab does not create Open vSwitch bridges: create them first (as root):",
            *(f"  {line}" for line in create),
            f"then: containerlab deploy -t <this file>.  After deploy, node {SETUP_NODE} sets "
            f"each bridge's",
            "OpenFlow 1.3, DPID, port numbers and controller "
            f"{controller} (start the controller with the fabric's JSON:",
            "zcube topo ... --format json, then python -m controller.launch).",
            "Links are not shaped (vars.gbps records the Fabric's rate).",
            "After containerlab destroy -t <this file>:",
            *(f"  {line}" for line in remove)]


def write_clab(fabric: Fabric, out, controller: str = DEFAULT_CONTROLLER,
               image: str = DEFAULT_IMAGE, host_configs: Mapping | None = None,
               name: str | None = None, bridge_prefix: str = DEFAULT_BRIDGE_PREFIX,
               policy: str | None = None) -> None:
    """Write the topology as YAML to the text stream ``out``, node by node and link by link,
    with a header comment saying how to deploy it; the file it makes reads back as
    :func:`clab_topology`'s dict.  ``policy`` only names, in the header, the routing policy
    ``host_configs`` came from.  Everything is checked before the first line is written."""
    import yaml
    name = _check(fabric, controller, image, host_configs, name, bridge_prefix)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)     # libyaml when present: faster

    def dump(doc, indent: str) -> None:
        text = yaml.dump(doc, Dumper=dumper, sort_keys=False, default_flow_style=False,
                         width=1000)
        out.write("".join(indent + line + "\n" for line in text.splitlines()))
    out.write("".join(f"# {line}\n"
                      for line in _header(fabric, controller, image, host_configs,
                                          bridge_prefix, policy)))
    dump({"name": name, "topology": {"kinds": {"linux": {"image": image}}}}, "")
    out.write("  nodes:\n")
    for node, doc in _nodes(fabric, controller, host_configs, bridge_prefix):
        dump({node: doc}, "    ")
    if fabric.links:
        out.write("  links:\n")
        for link in _links(fabric, bridge_prefix):
            dump([link], "  ")


def to_clab_yaml(fabric: Fabric, controller: str = DEFAULT_CONTROLLER,
                 image: str = DEFAULT_IMAGE, host_configs: Mapping | None = None,
                 name: str | None = None, bridge_prefix: str = DEFAULT_BRIDGE_PREFIX,
                 policy: str | None = None) -> str:
    """:func:`write_clab`'s text."""
    import io
    buf = io.StringIO()
    write_clab(fabric, buf, controller, image, host_configs, name, bridge_prefix, policy)
    return buf.getvalue()


def load_schema() -> dict:
    with open(SCHEMA_PATH) as f:
        return json.load(f)


def validate_clab(doc: dict) -> None:
    """Check ``doc`` against containerlab's JSON schema (needs the ``jsonschema`` package);
    raises ``jsonschema.ValidationError``."""
    import jsonschema
    jsonschema.Draft7Validator(load_schema()).validate(doc)
