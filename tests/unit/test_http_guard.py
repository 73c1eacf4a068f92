"""The controller's REST changes forwarding only for the testbed that started it: a POST
needs the token handed to the controller, from no other origin, and any request must name
the server as its Host (no root, no Ryu running, no switch)."""
import io
import json
import threading
from wsgiref.simple_server import make_server

import pytest

from controller.httpguard import TOKEN_ENV, Guard
from controller.pins import Pin

TOKEN = "s3cret-token"


@pytest.mark.parametrize("host,ok", [
    ("127.0.0.1:8080", True), ("localhost:8080", True), ("LocalHost.:8080", True),
    ("[::1]:8080", True), ("[0:0::1]:8080", True),
    ("127.0.0.1:8081", False), ("127.0.0.1", False), ("evil.example:8080", False),
    ("10.0.0.5:8080", False), ("[::1]", False), ("127.0.0.1:80a", False), ("", False),
    (None, False), ("127.0.0.1:8080@evil.example", False),
])
def test_only_the_servers_own_names_pass_the_host_check(host, ok):
    assert (Guard(8080, TOKEN).host_refusal(host) is None) == ok


def test_a_server_bound_elsewhere_also_answers_to_that_address():
    assert Guard(80, TOKEN, ("10.0.0.5",)).host_refusal("10.0.0.5") is None      # port 80
    assert Guard(80, TOKEN, ("myhost",)).host_refusal("MYHOST:80") is None
    assert Guard(80, TOKEN, ("10.0.0.5",)).host_refusal("10.0.0.6") is not None
    wild = Guard(8080, TOKEN, ("0.0.0.0",))          # bound everywhere: any of its addresses
    assert wild.host_refusal("192.168.1.7:8080") is None
    assert wild.host_refusal("[fe80::1]:8080") is None
    assert wild.host_refusal("rebound.evil.example:8080") is not None


@pytest.mark.parametrize("origin,token,ok", [
    (None, TOKEN, True), ("http://127.0.0.1:8080", TOKEN, True),
    ("http://localhost:8080", TOKEN, True),
    (None, None, False), (None, "", False), (None, "s3cret-tokem", False),
    (None, TOKEN + "x", False), (None, "sécret", False),
    ("http://evil.example", TOKEN, False), ("https://127.0.0.1:8080", TOKEN, False),
    ("http://127.0.0.1:9999", TOKEN, False), ("null", TOKEN, False),
])
def test_a_post_needs_the_token_and_no_foreign_origin(origin, token, ok):
    assert (Guard(8080, TOKEN).post_refusal(origin, token) is None) == ok


def test_a_server_without_a_token_takes_no_post():
    guard = Guard(8080, "")
    assert TOKEN_ENV in guard.post_refusal(None, "")
    assert guard.refusal("GET", "127.0.0.1:8080", None, None) is None
    assert guard.refusal("PUT", "127.0.0.1:8080", None, "") is not None


@pytest.fixture
def app(monkeypatch):
    """The OpenFlow app without its constructor (no Ryu running), whose pins are recorded."""
    ryu_app = pytest.importorskip("controller.ryu_app")
    app = object.__new__(ryu_app.ZCubeController)
    app.rest_guard = Guard(8080, TOKEN)
    app.posted = []

    def post_pins(environ):
        size = int(environ.get("CONTENT_LENGTH") or 0)
        app.posted.append(json.loads(environ["wsgi.input"].read(size)))
        return "200 OK", {"generation": len(app.posted), "pinned_flows": 3}
    app.post_pins = post_pins
    app.status = lambda: {"pins_installed": len(app.posted)}
    return app


def _call(app, method, path, **headers):
    body = b'{"pins": []}'
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "CONTENT_LENGTH": str(len(body)),
               "wsgi.input": io.BytesIO(body), **headers}
    got = []
    out = app.rest_app(environ, lambda code, hdrs: got.append(code))
    return got[0], json.loads(b"".join(out))


@pytest.mark.filterwarnings("ignore")          # eventlet and webob deprecations
@pytest.mark.parametrize("headers", [
    {"HTTP_HOST": "127.0.0.1:8080"},                                          # no token
    {"HTTP_HOST": "127.0.0.1:8080", "HTTP_X_ZCUBE_TOKEN": "guessed"},
    {"HTTP_HOST": "127.0.0.1:8080", "HTTP_X_ZCUBE_TOKEN": TOKEN,
     "HTTP_ORIGIN": "http://evil.example"},                                  # cross-site
    {"HTTP_HOST": "evil.example:8080", "HTTP_X_ZCUBE_TOKEN": TOKEN},         # DNS rebinding
    {"HTTP_X_ZCUBE_TOKEN": TOKEN},                                           # no Host
])
def test_pins_posted_without_the_token_or_from_elsewhere_change_nothing(app, headers):
    code, body = _call(app, "POST", "/zcube/pins", **headers)
    assert code.startswith("403") and body["error"] and app.posted == []


@pytest.mark.filterwarnings("ignore")
def test_pins_posted_with_the_token_are_taken_and_reads_stay_open(app):
    code, body = _call(app, "POST", "/zcube/pins", HTTP_HOST="localhost:8080",
                       HTTP_X_ZCUBE_TOKEN=TOKEN, HTTP_ORIGIN="http://localhost:8080")
    assert code == "200 OK" and body["generation"] == 1 and app.posted == [{"pins": []}]
    assert _call(app, "GET", "/zcube/status", HTTP_HOST="127.0.0.1:8080")[0] == "200 OK"
    code, body = _call(app, "GET", "/zcube/status", HTTP_HOST="evil.example:8080")
    assert code.startswith("403") and "is not this server" in body["error"]


@pytest.mark.filterwarnings("ignore")
def test_the_testbed_posts_pins_with_the_token_it_started_the_controller_with(app):
    from testbed.emulation.pin_requests import post_pins
    with make_server("127.0.0.1", 0, app.rest_app) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            port = server.server_port
            app.rest_guard = Guard(port, TOKEN)

            class Emu:
                rest_port, rest_token = port, TOKEN

                def status(self):
                    return app.status()
            pin = Pin("10.0.0.1", "10.0.0.2", 40000, 9000, ("g0", "a0", "g1"))
            assert post_pins(Emu(), [pin]) == 3
            assert len(app.posted) == 1 and app.posted[0]["pins"][0]["sport"] == 40000
            Emu.rest_token = "another controller's"
            with pytest.raises(OSError, match="403"):
                post_pins(Emu(), [pin])
            assert len(app.posted) == 1
        finally:
            server.shutdown()


def test_the_emulation_hands_its_controller_the_token(monkeypatch, tmp_path):
    from testbed.emulation import emulation as emulation_mod
    emu = emulation_mod.Emulation.__new__(emulation_mod.Emulation)
    emu.runtime = None
    emu.table = type("Table", (), {"policy_name": "zcube"})()
    started = {}

    class Record:
        def path(self, name):
            return str(tmp_path / name)

        def add_pid(self, pid, what):
            pass
    emu.record = Record()
    monkeypatch.setattr(emulation_mod.subprocess, "Popen",
                        lambda cmd, **kw: started.update(kw) or type("P", (), {"pid": 1})())
    emu._launch_controller("fabric.json", (6653, 8080))
    first = emu.rest_token
    assert len(first) >= 32 and started["env"][TOKEN_ENV] == first      # what post_pins sends
    emu._launch_controller("fabric.json", (6653, 8080))                  # a restarted one
    assert started["env"][TOKEN_ENV] == emu.rest_token != first
