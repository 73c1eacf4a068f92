"""The live view's server (``--web``): the page, the fabric's drawing, JSON under ``/api/``,
server-sent events at ``/events``, and with ``--web-control`` the POSTs that fail and restore
elements, let through only for this server's Host, no other Origin and the printed URL's token
(:mod:`controller.httpguard`).
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from controller.httpguard import HEADER, Guard, new_token
from testbed.core.live_state import Live, current

EVENT_MIN_GAP_S = 0.25         # at most four messages a second per client
KEEPALIVE_S = 10.0
IDLE_SAMPLE_S = 1.0            # the view's own link windows between workloads
MAX_BODY = 64 * 1024


class HttpError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def parse_address(text: str) -> tuple[str, int]:
    """``PORT`` or ``HOST:PORT`` -> ``(host, port)`` (host 127.0.0.1 unless given)."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]") if sep else "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--web wants PORT or HOST:PORT (a port from 0 to 65535), got {text!r}")
    return host or "127.0.0.1", int(port)


class LiveServer:
    """``with LiveServer(host, port) as server:`` serves ``live`` while the block runs."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, live: Live = current,
                 control: bool = False):
        self.live, self.control = live, control
        self.closing = threading.Event()
        self.drawn: tuple = (None, "")       # (fabric, its SVG)
        self._cpu = 0.0
        self._cpu_lock = threading.Lock()
        self.httpd = ThreadingHTTPServer((host, port), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.owner = self
        self.host, self.port = self.httpd.server_address[:2]
        self.token = new_token()
        self.guard = Guard(self.port, self.token, (host, self.host))
        self._threads = [threading.Thread(target=self.httpd.serve_forever, daemon=True,
                                          name="zcube-web"),
                         threading.Thread(target=self._sample_idle, daemon=True,
                                          name="zcube-web-sampler")]

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    @property
    def page_url(self) -> str:
        """The URL to print: with control on, it holds the token the page's POSTs need."""
        return f"{self.url}?token={self.token}" if self.control else self.url

    @property
    def cpu_s(self) -> float:
        """CPU seconds the server's threads have spent so far."""
        with self._cpu_lock:
            return self._cpu

    def charge(self, seconds: float) -> None:
        with self._cpu_lock:
            self._cpu += seconds

    def __enter__(self):
        self.live.server = self
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def stop(self) -> None:
        if self.closing.is_set():
            return
        self.closing.set()
        self.live.update()                 # wakes every event stream, which then ends
        self.httpd.shutdown()
        self.httpd.server_close()
        for t in self._threads:
            t.join(timeout=5)
        if getattr(self.live, "server", None) is self:
            self.live.server = None

    def _sample_idle(self) -> None:
        """One-second link windows while no run's sampler publishes (bring-up, idle
        ``zcube up``): the datapath's counters, as the run's sampler reads them."""
        from testbed.emulation.link_sampler import LinkSampler
        sampler = last = last_t = None
        while not self.closing.wait(IDLE_SAMPLE_S):
            start = time.thread_time()
            emu = self.live.emu
            try:
                if emu is None or self.live.sampling:
                    sampler = None                 # start again from fresh counters
                    continue
                if sampler is None or sampler.emu is not emu:
                    sampler = LinkSampler(emu, IDLE_SAMPLE_S)
                    last, last_t = sampler.read(), time.time()
                    continue
                now, now_t = sampler.read(), time.time()
                self.live.publish_links(sampler.window(last, now, now_t - last_t,
                                                       now_t - self.live.get("started")),
                                        "idle")
                last, last_t = now, now_t
            except Exception:                      # a fabric going down under the sampler
                sampler = None
            finally:
                self.charge(time.thread_time() - start)


class _Handler(BaseHTTPRequestHandler):
    server_version = "zcube-live"
    GET = {"/": "_page", "/fabric.svg": "_drawing", "/api/fabric": "_fabric",
           "/api/links": "_links", "/api/status": "_status", "/events": "_events"}
    POST = ("/api/fail", "/api/restore")

    @property
    def owner(self) -> LiveServer:
        return self.server.owner

    def log_message(self, *args):          # the console is the run's, not the server's
        pass

    def do_GET(self):
        self._serve(self._get)

    def do_POST(self):
        self._serve(self._post)

    def _charge(self) -> None:
        """Charge the server with this thread's CPU since the last charge (a stream is
        charged as it goes, so a run ending while a browser watches still counts it)."""
        now = time.thread_time()
        self.owner.charge(now - self._mark)
        self._mark = now

    def _serve(self, what):
        self._mark = time.thread_time()
        try:
            why = self.owner.guard.host_refusal(self.headers.get("Host"))
            if why:
                raise HttpError(403, why)
            what(self.path.split("?")[0])
        except HttpError as err:
            self._json({"error": str(err)}, err.status)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            self._charge()

    def _get(self, path: str):
        if path in self.POST:
            raise HttpError(405, f"{path} takes POST")
        if path not in self.GET:
            raise HttpError(404, f"no such page: {path}")
        getattr(self, self.GET[path])()

    def _page(self):
        from testbed.analysis.live_page import page
        self._send(page(self.owner.control).encode(), "text/html; charset=utf-8")

    def _drawing(self):
        self._send(_svg(self.owner).encode(), "image/svg+xml")

    def _fabric(self):
        fabric = self.owner.live.get("fabric")
        if fabric is None:
            raise HttpError(503, "no fabric is up yet")
        self._json(fabric)

    def _links(self):
        self._json(self.owner.live.links())

    def _status(self):
        self._json(self.owner.live.status())

    def _post(self, path: str):
        if path not in self.POST:
            raise HttpError(405 if path in self.GET else 404, f"{path} takes no POST")
        if not self.owner.control:
            raise HttpError(403, "control is off: start with --web-control to fail and "
                                 "restore elements from the page")
        why = self.owner.guard.post_refusal(self.headers.get("Origin"), self.headers.get(HEADER))
        if why:
            raise HttpError(403, why)
        elements = self._body().get("elements", [])
        if not isinstance(elements, list) or not all(isinstance(e, str) for e in elements):
            raise HttpError(400, "'elements' must be a list of element names")
        if path == "/api/fail" and not elements:
            raise HttpError(400, "name at least one element to fail (a0-b1, g3:1, a2)")
        emu = self.owner.live.emu
        if emu is None:
            raise HttpError(503, "no fabric is up")
        from testbed.emulation.faults import FaultError
        from topologies import FabricError
        try:
            out = (emu.fail if path == "/api/fail" else emu.restore)(*elements)
        except (FabricError, FaultError, ValueError) as err:
            raise HttpError(400, str(err).splitlines()[0]) from None
        self._json(out)

    def _body(self) -> dict:
        size = int(self.headers.get("Content-Length") or 0)
        if size > MAX_BODY:
            raise HttpError(413, f"body over {MAX_BODY} bytes")
        try:
            body = json.loads(self.rfile.read(size) or b"{}")
        except (ValueError, UnicodeDecodeError):
            raise HttpError(400, "the body is not JSON") from None
        if not isinstance(body, dict):
            raise HttpError(400, "the body must be a JSON object")
        return body

    def _events(self):
        live, closing = self.owner.live, self.owner.closing
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        version, sent = -1, 0.0
        while not closing.is_set():
            if live.version != version:
                version = live.version
                msg = json.dumps({"status": live.status(), "links": live.links()})
                self.wfile.write(f"data: {msg}\n\n".encode())
                self.wfile.flush()
                sent = time.time()
                self._charge()
                closing.wait(EVENT_MIN_GAP_S)
                continue
            if time.time() - sent > KEEPALIVE_S:
                self.wfile.write(b": keepalive\n\n")
                self.wfile.flush()
                sent = time.time()
            live.wait(version, timeout=1.0)

    def _json(self, doc, status: int = 200):
        self._send(json.dumps(doc).encode(), "application/json", status)

    def _send(self, body: bytes, ctype: str, status: int = 200):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)


def _svg(server: LiveServer) -> str:
    """The drawing of the fabric now up (drawn once per fabric)."""
    from testbed.analysis.live_page import fabric_svg
    fabric = server.live.fabric
    if fabric is None:
        raise HttpError(503, "no fabric is up yet")
    if server.drawn[0] is not fabric:
        server.drawn = (fabric, fabric_svg(fabric))
    return server.drawn[1]
