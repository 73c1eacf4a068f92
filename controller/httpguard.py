"""Who may act on a local HTTP server the testbed starts (the controller's REST, the live
view): the request must name the server in its ``Host``, and a POST must hold the secret
token and come from the server's own origin, so a browser page cannot act."""
from __future__ import annotations

import hmac
import ipaddress
import secrets
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

HEADER = "X-ZCube-Token"
TOKEN_ENV = "ZCUBE_REST_TOKEN"       # how the testbed hands the controller its token
LOOPBACK = ("127.0.0.1", "localhost", "::1")
WILDCARD = ("", "0.0.0.0", "::")


def new_token() -> str:
    return secrets.token_urlsafe(32)


def _name(host: str) -> str:
    """One spelling per host: IP addresses normalised, names lower-case."""
    host = host.strip("[]").rstrip(".").lower()
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


@dataclass(frozen=True)
class Guard:
    """The checks for one server: the port it listens on, the names it was bound to and
    its token (empty: it takes no POST at all)."""

    port: int
    token: str
    bound: tuple = ("127.0.0.1",)

    def _own(self, host: str, port: int | None, default_port: int = 80) -> bool:
        if (port if port is not None else default_port) != self.port:
            return False
        name = _name(host)
        bound = {_name(b) for b in self.bound}
        if name in {_name(h) for h in LOOPBACK} | bound:
            return True
        if not bound & {_name(w) for w in WILDCARD}:
            return False
        # bound to every address: reached by any of its IPs (a rebinding page's Host is a
        # name, never an address) or by the machine's own name
        return _is_ip(name) or name in {_name(socket.gethostname()), _name(socket.getfqdn())}

    def host_refusal(self, host_header: str | None) -> str | None:
        """Why a request with this ``Host`` header is refused (None: it names this server)."""
        try:
            parts = urlsplit("//" + (host_header or ""))
            ok = bool(parts.hostname) and self._own(parts.hostname, parts.port)
        except ValueError:
            ok = False
        return None if ok else f"Host {host_header!r} is not this server"

    def post_refusal(self, origin: str | None, token: str | None) -> str | None:
        """Why a POST with this ``Origin`` and token header is refused (None: it may act)."""
        if origin is not None:
            try:
                parts = urlsplit(origin)
                ok = (parts.scheme == "http" and bool(parts.hostname)
                      and self._own(parts.hostname, parts.port))
            except ValueError:
                ok = False
            if not ok:
                return f"a page from {origin} may not act on this server"
        if not self.token:
            return f"this server was started without a token, so it takes no POST ({TOKEN_ENV})"
        if not hmac.compare_digest((token or "").encode("utf-8", "replace"),
                                   self.token.encode()):
            return f"a POST needs this server's token in the {HEADER} header"
        return None

    def refusal(self, method: str | None, host: str | None, origin: str | None,
                token: str | None) -> str | None:
        """Why a request is refused: its ``Host`` for any, then, for one that may act (not
        GET or HEAD), its ``Origin`` and token (None: serve it)."""
        why = self.host_refusal(host)
        if why or method in ("GET", "HEAD"):
            return why
        return self.post_refusal(origin, token)
