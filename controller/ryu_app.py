"""The OpenFlow 1.3 app: installs the testbed's computed routes, proactively, on every switch.

It holds no routing logic.  It loads the Fabric file and policy the testbed wrote (paths in
``ZCUBE_FABRIC`` and ``ZCUBE_POLICY``), asks the pure routing code for each switch's flows
(:mod:`controller.flows`), and turns them into group and flow mods when a switch connects.
Read-only REST on ``ZCUBE_REST`` (default 127.0.0.1:8080), a small WSGI server run by the
framework's hub (a green thread under Ryu, a thread under os-ken):

    GET /zcube/status            switches known, connected, flows installed
    GET /zcube/flows/<switch>    flow statistics of one switch
    GET /zcube/ports/<switch>    port statistics of one switch

Run it by hand with ``python -m controller.launch --fabric fabric.json --policy zcube``.
"""
import json
import os
import time
from wsgiref.simple_server import WSGIRequestHandler, make_server

from controller.flows import COOKIE, PRIO_MISS, compile_switch_flows
from controller.ofcompat import (CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, RUNTIME,
                                 app_manager, hub, ofctl_api, ofp_event, ofproto_v1_3, set_ev_cls)
from controller.routing import RouteTable
from topologies.fabric import load_fabric



class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass


class ZCubeController(app_manager.RyuApp if RUNTIME == "ryu" else app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        fabric = load_fabric(os.environ["ZCUBE_FABRIC"])
        table = RouteTable(fabric, os.environ.get("ZCUBE_POLICY") or None)
        self.switch_flows = compile_switch_flows(table)
        self.by_dpid = {sf.dpid: sf for sf in self.switch_flows.values()}
        self.datapaths = {}           # dpid -> datapath
        self.installed = {}           # dpid -> time the barrier after install came back
        self.started = time.time()
        self.logger.info("zcube: %s, policy %s: %d switches, %d flows to install (%s)",
                         fabric.name, table.policy_name, len(self.by_dpid),
                         sum(len(sf.flows) + 1 for sf in self.by_dpid.values()), RUNTIME)
        host, _, port = os.environ.get("ZCUBE_REST", "127.0.0.1:8080").rpartition(":")
        self.rest = make_server(host, int(port), self.rest_app, handler_class=QuietHandler)
        hub.spawn(self.rest.serve_forever)

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def on_switch_features(self, ev):
        dp = ev.msg.datapath
        sf = self.by_dpid.get(dp.id)
        if sf is None:
            self.logger.warning("zcube: unknown switch %016x connected; leaving it empty", dp.id)
            return
        self.datapaths[dp.id] = dp
        self.installed.pop(dp.id, None)
        self.install(dp, sf)

    @set_ev_cls(ofp_event.EventOFPStateChange, [MAIN_DISPATCHER, DEAD_DISPATCHER])
    def on_state_change(self, ev):
        dp = ev.datapath
        if ev.state == DEAD_DISPATCHER and dp.id in self.datapaths:
            self.datapaths.pop(dp.id, None)
            self.installed.pop(dp.id, None)
            self.logger.info("zcube: %s disconnected", self.by_dpid[dp.id].switch)

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def on_barrier(self, ev):
        dp = ev.msg.datapath
        if dp.id in self.by_dpid and dp.id not in self.installed:
            self.installed[dp.id] = time.time()
            sf = self.by_dpid[dp.id]
            self.logger.info("zcube: %s (%016x): %d flows, %d groups installed", sf.switch,
                             dp.id, len(sf.flows) + 1, len(sf.groups))

    def install(self, dp, sf):
        """Replace everything on the switch with the computed state, then a barrier."""
        ofp, parser = dp.ofproto, dp.ofproto_parser
        dp.send_msg(parser.OFPFlowMod(dp, command=ofp.OFPFC_DELETE, table_id=ofp.OFPTT_ALL,
                                      out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY,
                                      match=parser.OFPMatch()))
        dp.send_msg(parser.OFPGroupMod(dp, command=ofp.OFPGC_DELETE, group_id=ofp.OFPG_ALL))
        for ports, gid in sorted(sf.groups.items(), key=lambda x: x[1]):
            buckets = [parser.OFPBucket(weight=1, watch_port=ofp.OFPP_ANY,
                                        watch_group=ofp.OFPG_ANY,
                                        actions=[parser.OFPActionOutput(p)]) for p in ports]
            dp.send_msg(parser.OFPGroupMod(dp, command=ofp.OFPGC_ADD, type_=ofp.OFPGT_SELECT,
                                           group_id=gid, buckets=buckets))
        for f in sf.flows:
            fields = {"eth_type": 0x0800, "ipv4_dst": f.dst}
            if f.src:
                fields["ipv4_src"] = f.src
            action = (parser.OFPActionOutput(f.ports[0]) if len(f.ports) == 1
                      else parser.OFPActionGroup(sf.groups[f.ports]))
            self._add(dp, f.priority, parser.OFPMatch(**fields), [action])
        self._add(dp, PRIO_MISS, parser.OFPMatch(), [])          # drop: nothing floods
        dp.send_msg(parser.OFPBarrierRequest(dp))

    @staticmethod
    def _add(dp, priority, match, actions):
        ofp, parser = dp.ofproto, dp.ofproto_parser
        inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)] if actions else []
        dp.send_msg(parser.OFPFlowMod(dp, cookie=COOKIE, priority=priority, match=match,
                                      instructions=inst))

    def rest_app(self, environ, start_response):
        """GET /zcube/status, /zcube/flows/<switch>, /zcube/ports/<switch>; JSON answers."""
        parts = environ.get("PATH_INFO", "").strip("/").split("/")
        code, body = "404 Not Found", {"error": "unknown path"}
        if environ.get("REQUEST_METHOD") != "GET":
            code, body = "405 Method Not Allowed", {"error": "read-only"}
        elif parts == ["zcube", "status"]:
            code, body = "200 OK", self.status()
        elif len(parts) == 3 and parts[0] == "zcube" and parts[1] in ("flows", "ports"):
            stats = self.stats(parts[2], parts[1])
            code, body = (("200 OK", stats) if stats is not None
                          else ("404 Not Found", {"error": f"{parts[2]} not connected"}))
        data = json.dumps(body).encode()
        start_response(code, [("Content-Type", "application/json"),
                              ("Content-Length", str(len(data)))])
        return [data]

    def status(self) -> dict:
        return {"runtime": RUNTIME,
                "switches": {sf.switch: {"dpid": "%016x" % dpid,
                                         "connected": dpid in self.datapaths,
                                         "installed": dpid in self.installed,
                                         "flows": len(sf.flows) + 1,
                                         "groups": len(sf.groups)}
                             for dpid, sf in sorted(self.by_dpid.items())}}

    def stats(self, switch: str, kind: str):
        sf = self.switch_flows.get(switch)
        dp = self.datapaths.get(sf.dpid) if sf else None
        if dp is None:
            return None
        parser = dp.ofproto_parser
        if kind == "flows":
            msg = parser.OFPFlowStatsRequest(dp)
            replies = ofctl_api.send_msg(self, msg, reply_cls=parser.OFPFlowStatsReply,
                                         reply_multi=True)
            return [{"priority": s.priority, "match": dict(s.match.items()),
                     "packets": s.packet_count, "bytes": s.byte_count}
                    for r in replies for s in r.body]
        msg = parser.OFPPortStatsRequest(dp, 0, dp.ofproto.OFPP_ANY)
        replies = ofctl_api.send_msg(self, msg, reply_cls=parser.OFPPortStatsReply,
                                     reply_multi=True)
        return [{"port": s.port_no, "rx_packets": s.rx_packets, "tx_packets": s.tx_packets,
                 "rx_bytes": s.rx_bytes, "tx_bytes": s.tx_bytes}
                for r in replies for s in r.body]
