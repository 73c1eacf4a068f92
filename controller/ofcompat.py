"""One import point for the OpenFlow framework, Ryu 4.34 or os-ken (its maintained fork),
chosen by ``ZCUBE_OF_RUNTIME``; :func:`patch_eventlet` restores what Ryu 4.34 needs from
newer eventlet."""
import importlib
import os


def patch_eventlet() -> None:
    try:
        import eventlet.wsgi
    except ImportError:
        return
    if not hasattr(eventlet.wsgi, "ALREADY_HANDLED"):
        eventlet.wsgi.ALREADY_HANDLED = object()


def runtime() -> str:
    wanted = os.environ.get("ZCUBE_OF_RUNTIME")
    if wanted:
        return wanted
    for name, module in (("ryu", "ryu"), ("os-ken", "os_ken")):
        if importlib.util.find_spec(module) is not None:
            return name
    raise ImportError("neither ryu nor os-ken is installed (make setup installs both)")


RUNTIME = runtime()
_PKG = "ryu" if RUNTIME == "ryu" else "os_ken"
if RUNTIME == "ryu":
    patch_eventlet()


def _mod(name):
    return importlib.import_module(f"{_PKG}.{name}")


app_manager = _mod("base.app_manager")
ofp_event = _mod("controller.ofp_event")
handler = _mod("controller.handler")
ofproto_v1_3 = _mod("ofproto.ofproto_v1_3")
hub = _mod("lib.hub")
ofctl_api = _mod("app.ofctl.api")
set_ev_cls = handler.set_ev_cls
CONFIG_DISPATCHER = handler.CONFIG_DISPATCHER
MAIN_DISPATCHER = handler.MAIN_DISPATCHER
DEAD_DISPATCHER = handler.DEAD_DISPATCHER
