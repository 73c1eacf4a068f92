"""The OpenFlow app's side of pinned connections (:mod:`controller.pins`): a mixin of
:class:`controller.ryu_app.ZCubeController` that takes pins over REST, sends each switch
its pinned flows and says when every switch has confirmed them."""
import json

from controller.pins import PIN_COOKIE, PRIO_PIN, Pin

ALL_BITS = 0xFFFFFFFFFFFFFFFF


class PinSending:
    """Expects ``rerouter``, ``datapaths``, ``to_install``, ``bundle``, ``barrier``,
    ``_send``, ``_flow_mod`` and ``wake`` from the app, whose constructor also sets
    ``repin`` and ``pin_barriers`` to empty sets."""

    repin: set            # switches whose pinned flows changed, to send
    pin_barriers: set     # (dpid, xid) of pins sent and not yet confirmed
    pins_sent = 0         # the pin generation sent last (or unchanged from one sent)
    pins_installed = 0    # ... and the latest every switch confirmed

    def post_pins(self, environ) -> tuple[str, dict]:
        """Record the pins a POST holds and have the sending thread install them."""
        try:
            size = int(environ.get("CONTENT_LENGTH") or 0)
            pins = [Pin.parse(p) for p in json.loads(environ["wsgi.input"].read(size))["pins"]]
        except (ValueError, KeyError, TypeError) as err:
            return "400 Bad Request", {"error": str(err)}
        self.repin |= self.rerouter.set_pins(pins)
        generation = self.rerouter.pins_generation
        if self.repin:
            self.wake()
        else:                       # what the switches hold (or are sent) is this generation
            self.pins_sent = generation
            if not self.pin_barriers:
                self.pins_installed = generation
        return "200 OK", {"generation": generation,
                          "pinned_flows": sum(map(len, self.rerouter.pinned.values()))}

    def send_pins(self):
        """The pinned flows of every connected switch whose pins changed, each switch's in one
        bundle (the old ones out, the new ones in), then a barrier each."""
        names, self.repin = self.repin, set()
        self.pins_sent = self.rerouter.pins_generation
        for name in sorted(names):
            dp = self.datapaths.get(self.rerouter.flows[name].dpid)
            if dp is not None and dp.id not in self.to_install:   # (else: with its install)
                with self.bundle(dp):
                    self.send_switch_pins(dp, name)
                self.pin_barriers.add((dp.id, self.barrier(dp)))
        if not self.pin_barriers:
            self.pins_installed = self.pins_sent

    def pin_confirmed(self, dpid, xid=None):
        """A barrier came back (xid None: the switch is gone; its barriers never will)."""
        if self.pin_barriers:
            self.pin_barriers = {b for b in self.pin_barriers
                                 if not (b[0] == dpid and (xid is None or b[1] == xid))}
            if not self.pin_barriers:
                self.pins_installed = self.pins_sent

    def send_switch_pins(self, dp, name: str, replace: bool = True):
        """The switch's current pinned flows, after deleting those it held (``replace``)."""
        ofp, parser = dp.ofproto, dp.ofproto_parser
        if replace:
            self._send(dp, parser.OFPFlowMod(dp, command=ofp.OFPFC_DELETE, cookie=PIN_COOKIE,
                                             cookie_mask=ALL_BITS, table_id=ofp.OFPTT_ALL,
                                             out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY,
                                             match=parser.OFPMatch()))
        for pf in self.rerouter.pinned.get(name, ()):
            p = pf.pin
            match = parser.OFPMatch(eth_type=0x0800, ip_proto=6, ipv4_src=p.src,
                                    ipv4_dst=p.dst, tcp_src=p.sport, tcp_dst=p.dport)
            self._flow_mod(dp, ofp.OFPFC_ADD, PRIO_PIN, match,
                           [parser.OFPActionOutput(pf.port)], cookie=PIN_COOKIE)
