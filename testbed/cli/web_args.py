"""``--web [HOST:]PORT`` and ``--web-control``: the live view beside ``zcube up`` and
``zcube run`` (:mod:`testbed.analysis.live_server`)."""
from __future__ import annotations

import contextlib
import sys

from testbed.errors import UsageError

LOOPBACK = ("127.0.0.1", "localhost")


def add_web_args(p, stop: str) -> None:
    p.add_argument("--web", metavar="[HOST:]PORT", default=None,
                   help="serve a live view of the fabric at http://HOST:PORT/ (host 127.0.0.1 "
                        "unless given; port 0 picks a free one): links coloured by load each "
                        "second, the run's phase, transfers, failures; JSON at /api/fabric, "
                        "/api/links, /api/status and events at /events; " + stop)
    p.add_argument("--web-control", action="store_true",
                   help="with --web: let the page (POST /api/fail, /api/restore) fail and "
                        "restore cables and switches, as the CLI's fail/restore do; the URL "
                        "printed then holds a secret token (?token=...) the page sends with "
                        "each POST (header X-ZCube-Token): open that URL, and share it only "
                        "with whoever may fail elements")


def check_web(args, backend: str | None = "emulation") -> None:
    """One-line errors for the web options, before anything starts."""
    if args.web_control and not args.web:
        raise UsageError("--web-control goes with --web")
    if not args.web:
        return
    from testbed.analysis.live_server import parse_address
    try:
        parse_address(args.web)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if backend != "emulation":
        raise UsageError(f"--web shows an emulated fabric; the {backend} backend has none "
                         f"(use --backend emulation)")


@contextlib.contextmanager
def serving(args):
    """The live view while the block runs (nothing without --web); a port that cannot be
    listened on is a one-line error before anything starts."""
    if not args.web:
        yield None
        return
    from testbed.analysis.live_server import LiveServer, parse_address
    host, port = parse_address(args.web)
    try:
        server = LiveServer(host, port, control=args.web_control)
    except OSError as err:
        raise UsageError(f"--web: cannot listen on {host}:{port}: "
                         f"{err.strerror or err}") from None
    with server:
        if host not in LOOPBACK:
            _log(f"warning: the live view listens on {host}: whoever reaches this machine "
                 f"can watch" + (", and whoever sees the URL's token (sent unencrypted) can "
                                 "fail elements (--web-control)" if args.web_control else ""))
        _log(f"live view: {server.page_url}"
             + (" (control on: click a cable or switch to fail or restore it)"
                if args.web_control else ""))
        yield server


def _log(msg: str) -> None:
    print(f"[zcube] {msg}", file=sys.stderr, flush=True)
