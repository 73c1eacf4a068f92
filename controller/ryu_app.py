"""The OpenFlow 1.3 app: installs the testbed's computed routes on every switch, proactively,
routes around failures, pins connections, and answers a small REST API
(:meth:`ZCubeController.rest_app`); the routing logic is all in the pure modules."""
import contextlib
import json
import os
import time
from dataclasses import asdict
from wsgiref.simple_server import WSGIRequestHandler, make_server

from controller.flowdiff import diff_switch
from controller.flows import COOKIE, PRIO_MISS
from controller.httpguard import TOKEN_ENV, Guard
from controller.ofcompat import (
    CONFIG_DISPATCHER,
    DEAD_DISPATCHER,
    MAIN_DISPATCHER,
    RUNTIME,
    app_manager,
    hub,
    ofctl_api,
    ofp_event,
    ofproto_v1_3,
    set_ev_cls,
)
from controller.pin_sender import PinSending
from controller.reroute import OFPPR_ADD, Rerouter, port_is_down
from topologies.fabric import FabricError, load_fabric


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass


class ZCubeController(PinSending,
                      app_manager.RyuApp if RUNTIME == "ryu" else app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]
    rest_guard = Guard(8080, "")      # the constructor's: ZCUBE_REST's address, the token

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        fabric = load_fabric(os.environ["ZCUBE_FABRIC"])
        self.rerouter = Rerouter(fabric, os.environ.get("ZCUBE_POLICY") or None)
        self.names = {sw.dpid: sw.name for sw in fabric.switches}
        self.datapaths = {}           # dpid -> datapath
        self.installed = {}           # dpid -> time the barrier after install came back
        self.to_install = {}          # dpid -> datapath that connected, waiting for its flows
        self.scheduled = False        # something went down or up: a reroute is asked for
        self.working = False          # the sending green thread runs
        self.barriers = set()         # (dpid, xid) the latest reroute still waits for
        self.barriers_of = 0          # ... and its number
        self.pending = None           # the mods of the bundle being built, if one is
        self.bundles = 0              # bundle ids handed out
        self.repin, self.pin_barriers = set(), set()      # pins to send, to be confirmed
        self.started = time.time()
        self.logger.info("zcube: %s, policy %s: %d switches, %d flows to install (%s)",
                         fabric.name, self.rerouter.policy_name, len(self.names),
                         sum(len(sf.flows) + 1 for sf in self.rerouter.flows.values()), RUNTIME)
        host, _, port = os.environ.get("ZCUBE_REST", "127.0.0.1:8080").rpartition(":")
        self.rest = make_server(host, int(port), self.rest_app, handler_class=QuietHandler)
        self.rest_guard = Guard(self.rest.server_port, os.environ.get(TOKEN_ENV, ""), (host,))
        hub.spawn(self.rest.serve_forever)

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def on_switch_features(self, ev):
        dp = ev.msg.datapath
        if dp.id not in self.names:
            self.logger.warning("zcube: unknown switch %016x connected; leaving it empty", dp.id)
            return
        self.datapaths[dp.id] = dp
        self.installed.pop(dp.id, None)
        self.to_install[dp.id] = dp
        self.scheduled |= self.rerouter.switch_back(dp.id)
        self.wake()

    @set_ev_cls(ofp_event.EventOFPStateChange, [MAIN_DISPATCHER, DEAD_DISPATCHER])
    def on_state_change(self, ev):
        dp = ev.datapath
        if ev.state == DEAD_DISPATCHER and dp.id in self.datapaths:
            self.datapaths.pop(dp.id, None)
            self.installed.pop(dp.id, None)
            self.to_install.pop(dp.id, None)
            self.logger.info("zcube: %s disconnected", self.names[dp.id])
            self.confirmed(dp.id)                # its barriers will not come back
            self.pin_confirmed(dp.id)
            self.scheduled |= self.rerouter.switch_gone(dp.id)
            self.wake()

    @set_ev_cls(ofp_event.EventOFPPortStatus, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def on_port_status(self, ev):
        msg = ev.msg
        down = port_is_down(msg.reason, msg.desc.state, msg.desc.config)
        if self.rerouter.port_status(msg.datapath.id, msg.desc.port_no, down):
            self.logger.info("zcube: %s port %d %s", self.names[msg.datapath.id],
                             msg.desc.port_no, "down" if down else "up")
            self.scheduled = True
            self.wake()

    @set_ev_cls(ofp_event.EventOFPPortDescStatsReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def on_port_desc(self, ev):
        """The port states a switch reports when it connects (the framework asks for them)."""
        msg = ev.msg
        states = {p.port_no: port_is_down(OFPPR_ADD, p.state, p.config) for p in msg.body}
        self.scheduled |= self.rerouter.ports_seen(msg.datapath.id, states)
        self.wake()

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def on_barrier(self, ev):
        dp = ev.msg.datapath
        if dp.id in self.names and dp.id not in self.installed:
            self.installed[dp.id] = time.time()
            sf = self.rerouter.flows[self.names[dp.id]]
            self.logger.info("zcube: %s (%016x): %d flows, %d groups installed", sf.switch,
                             dp.id, len(sf.flows) + 1, len(sf.groups))
        self.confirmed(dp.id, ev.msg.xid)
        self.pin_confirmed(dp.id, ev.msg.xid)

    def confirmed(self, dpid, xid=None):
        """A barrier of the latest reroute came back (xid None: all of that switch's)."""
        before = len(self.barriers)
        self.barriers = {b for b in self.barriers
                         if not (b[0] == dpid and (xid is None or b[1] == xid))}
        if before and not self.barriers:
            self.rerouter.installed(self.barriers_of)
            self.logger.info("zcube: reroute installed: %s", self.rerouter.last)

    # -- sending: one green thread, so the mods for one switch never interleave -----------
    def wake(self):
        if (self.to_install or self.scheduled or self.repin) and not self.working:
            self.working = True
            hub.spawn(self.work)

    def work(self):
        """The one green thread that sends everything, so the mods for one switch never
        interleave: full installs for switches that connected, then a reroute if one is asked for
        (after the events that arrived together are recorded, so they make one), until
        none is left."""
        try:
            while self.to_install or self.scheduled or self.repin:
                installs, self.to_install = self.to_install, {}
                for dp in installs.values():
                    self.install(dp)
                if self.scheduled:
                    hub.sleep(0)          # yield: events that arrived together are recorded
                    self.scheduled = False
                    self.send_reroute()
                if self.repin:
                    self.send_pins()
        finally:
            self.working = False

    def send_reroute(self):
        before = self.rerouter.reroutes
        diffs = self.rerouter.reroute()
        if self.rerouter.reroutes == before:
            return                    # nothing new failed or came back
        # (a reroute that changes no flow is confirmed at once, below)
        last = self.rerouter.last
        self.barriers, self.barriers_of = set(), last["number"]
        repinned = set(last["repinned"])
        for name in sorted(set(diffs) | repinned):
            dp = self.datapaths.get(self.rerouter.flows[name].dpid)
            # a switch not connected, or waiting for its install, gets everything then
            if dp is not None and dp.id not in self.to_install:
                with self.bundle(dp):
                    if name in diffs:
                        self.send_diff(dp, diffs[name])
                    if name in repinned:
                        self.send_switch_pins(dp, name)
                self.barriers.add((dp.id, self.barrier(dp)))
        self.logger.info("zcube: reroute %d around %s: %d flow mods, %d group mods on %d "
                         "switches, computed in %.3f s", last["number"],
                         self.rerouter.table.failed.describe(self.rerouter.fabric),
                         last["flow_mods"], last["group_mods"], len(diffs), last["compute_s"])
        if not self.barriers:
            self.rerouter.installed(last["number"])

    def install(self, dp):
        """Replace everything on the switch with the computed state, in one bundle, then a
        barrier."""
        ofp, parser = dp.ofproto, dp.ofproto_parser
        with self.bundle(dp):
            self._send(dp, parser.OFPFlowMod(dp, command=ofp.OFPFC_DELETE,
                                             table_id=ofp.OFPTT_ALL, out_port=ofp.OFPP_ANY,
                                             out_group=ofp.OFPG_ANY, match=parser.OFPMatch()))
            self._send(dp, parser.OFPGroupMod(dp, command=ofp.OFPGC_DELETE,
                                              group_id=ofp.OFPG_ALL))
            self.send_diff(dp, diff_switch(None, self.rerouter.flows[self.names[dp.id]]))
            self._flow_mod(dp, ofp.OFPFC_ADD, PRIO_MISS, parser.OFPMatch(), [])  # no flood
            self.send_switch_pins(dp, self.names[dp.id], replace=False)
        self.barrier(dp)

    @contextlib.contextmanager
    def bundle(self, dp):
        """The mods sent inside go to the switch as one atomic, ordered bundle (OpenFlow 1.3's
        bundle extension, which Open vSwitch implements): it goes from its old flows to the
        new ones in one step, with no moment in between."""
        self.pending = []
        try:
            yield
        finally:
            msgs, self.pending = self.pending, None
        if not msgs:
            return
        ofp, parser = dp.ofproto, dp.ofproto_parser
        self.bundles += 1
        flags = ofp.ONF_BF_ATOMIC | ofp.ONF_BF_ORDERED
        dp.send_msg(parser.ONFBundleCtrlMsg(dp, self.bundles, ofp.ONF_BCT_OPEN_REQUEST, flags,
                                            []))
        for msg in msgs:
            dp.send_msg(parser.ONFBundleAddMsg(dp, self.bundles, flags, msg, []))
        dp.send_msg(parser.ONFBundleCtrlMsg(dp, self.bundles, ofp.ONF_BCT_COMMIT_REQUEST,
                                            flags, []))

    def _send(self, dp, msg):
        if self.pending is not None:
            self.pending.append(msg)
        else:
            dp.send_msg(msg)

    def send_diff(self, dp, diff):
        """The group and flow mods of a :class:`controller.flowdiff.SwitchDiff`, in its order."""
        ofp, parser = dp.ofproto, dp.ofproto_parser
        for msg in diff.messages():
            if msg[0] == "group":
                command = {"add": ofp.OFPGC_ADD, "modify": ofp.OFPGC_MODIFY,
                           "delete": ofp.OFPGC_DELETE}[msg[1]]
                buckets = [parser.OFPBucket(weight=1, watch_port=ofp.OFPP_ANY,
                                            watch_group=ofp.OFPG_ANY,
                                            actions=[parser.OFPActionOutput(p)])
                           for p in (msg[3] if len(msg) > 3 else ())]
                self._send(dp, parser.OFPGroupMod(dp, command=command, type_=ofp.OFPGT_SELECT,
                                               group_id=msg[2], buckets=buckets))
            elif msg[1] == "delete":
                self._send(dp, parser.OFPFlowMod(dp, command=ofp.OFPFC_DELETE_STRICT,
                                              priority=msg[2], out_port=ofp.OFPP_ANY,
                                              out_group=ofp.OFPG_ANY,
                                              match=self._match(parser, msg[3], msg[4])))
            else:
                kind, arg = msg[5]
                action = (parser.OFPActionOutput(arg) if kind == "output"
                          else parser.OFPActionGroup(arg))
                command = ofp.OFPFC_ADD if msg[1] == "add" else ofp.OFPFC_MODIFY_STRICT
                self._flow_mod(dp, command, msg[2], self._match(parser, msg[3], msg[4]),
                               [action])

    @staticmethod
    def _match(parser, src, dst):
        fields = {"eth_type": 0x0800, "ipv4_dst": dst}
        if src:
            fields["ipv4_src"] = src
        return parser.OFPMatch(**fields)

    def _flow_mod(self, dp, command, priority, match, actions, cookie=COOKIE):
        ofp, parser = dp.ofproto, dp.ofproto_parser
        inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)] if actions else []
        self._send(dp, parser.OFPFlowMod(dp, command=command, cookie=cookie, priority=priority,
                                         match=match, instructions=inst))

    @staticmethod
    def barrier(dp) -> int:
        """Send a barrier; its xid."""
        msg = dp.ofproto_parser.OFPBarrierRequest(dp)
        dp.send_msg(msg)
        return msg.xid

    def rest_app(self, environ, start_response):
        """GET /zcube/status, /zcube/flows/<switch>, /zcube/ports/<switch>,
        /zcube/hosts/<host>; POST /zcube/pins; JSON answers."""
        parts = environ.get("PATH_INFO", "").strip("/").split("/")
        code, body = "404 Not Found", {"error": "unknown path"}
        refused = self.rest_guard.refusal(environ.get("REQUEST_METHOD"),
                                          environ.get("HTTP_HOST"), environ.get("HTTP_ORIGIN"),
                                          environ.get("HTTP_X_ZCUBE_TOKEN"))
        if refused:
            code, body = "403 Forbidden", {"error": refused}
        elif environ.get("REQUEST_METHOD") == "POST" and parts == ["zcube", "pins"]:
            code, body = self.post_pins(environ)
        elif environ.get("REQUEST_METHOD") != "GET":
            code, body = "405 Method Not Allowed", {"error": "GET, or POST /zcube/pins"}
        elif parts == ["zcube", "status"]:
            code, body = "200 OK", self.status()
        elif len(parts) == 3 and parts[:2] == ["zcube", "hosts"]:
            try:
                code, body = "200 OK", asdict(self.rerouter.host_config(parts[2]))
            except FabricError as err:
                code, body = "404 Not Found", {"error": str(err)}
        elif len(parts) == 3 and parts[0] == "zcube" and parts[1] in ("flows", "ports"):
            stats = self.stats(parts[2], parts[1])
            code, body = (("200 OK", stats) if stats is not None
                          else ("404 Not Found", {"error": f"{parts[2]} not connected"}))
        data = json.dumps(body).encode()
        start_response(code, [("Content-Type", "application/json"),
                              ("Content-Length", str(len(data)))])
        return [data]

    def status(self) -> dict:
        flows = self.rerouter.flows
        out = {"runtime": RUNTIME, "bundles": self.bundles,
               "switches": {name: {"dpid": "%016x" % dpid,
                                   "connected": dpid in self.datapaths,
                                   "installed": dpid in self.installed,
                                   "flows": len(flows[name].flows) + 1,
                                   "groups": len(flows[name].groups)}
                            for dpid, name in sorted(self.names.items())}}
        out.update(self.rerouter.status())
        out.update(pins_generation=self.rerouter.pins_generation,
                   pins_installed=self.pins_installed)
        return out

    def stats(self, switch: str, kind: str):
        sf = self.rerouter.flows.get(switch)
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
