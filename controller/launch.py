"""Start the controller app under Ryu 4.34 or os-ken, listening on loopback only, as
``ryu-manager controller/ryu_app.py`` would, with the eventlet work-around Ryu 4.34 needs.

    python -m controller.launch --fabric fabric.json [--policy zcube] [--runtime ryu|os-ken]
                                [--of-port 6653] [--rest-port 8080] [--host 127.0.0.1]
"""
import argparse
import importlib
import logging
import os


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m controller.launch",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--fabric", default=None,
                   help="fabric JSON written by 'zcube topo --format json' (needed by the "
                        "default app)")
    p.add_argument("--app", default="controller.ryu_app",
                   help="app module to run (default controller.ryu_app; e.g. "
                        "ryu.app.simple_switch_13 for a stock baseline)")
    p.add_argument("--policy", default="",
                   help="routing policy (default: zcube on zcube fabrics, else ecmp)")
    p.add_argument("--runtime", choices=["ryu", "os-ken"], default=None,
                   help="OpenFlow framework (default: ryu if installed, else os-ken)")
    p.add_argument("--of-port", type=int, default=6653, help="OpenFlow listening port (6653)")
    p.add_argument("--rest-port", type=int, default=8080, help="REST listening port (8080)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address both listeners bind (default 127.0.0.1)")
    args = p.parse_args(argv)
    if args.app == "controller.ryu_app" and not args.fabric:
        p.error("--fabric is required for controller.ryu_app")
    if args.fabric:
        os.environ["ZCUBE_FABRIC"] = os.path.abspath(args.fabric)
    os.environ["ZCUBE_POLICY"] = args.policy
    os.environ["ZCUBE_REST"] = f"{args.host}:{args.rest_port}"
    if args.runtime:
        os.environ["ZCUBE_OF_RUNTIME"] = args.runtime
    from controller import ofcompat
    pkg = ofcompat._PKG
    ofcompat.hub.patch(thread=False)
    cfg = importlib.import_module(f"{pkg}.cfg")
    importlib.import_module(f"{pkg}.controller.controller")     # registers --ofp-* options
    cfg.CONF(args=["--ofp-listen-host", args.host, "--ofp-tcp-listen-port", str(args.of_port)],
             project=pkg)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    # the ofctl service answers the REST stats requests (ofctl api.send_msg)
    ofcompat.app_manager.AppManager.run_apps([args.app, f"{pkg}.app.ofctl.service"])


if __name__ == "__main__":
    main()
