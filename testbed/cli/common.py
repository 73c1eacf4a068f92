"""What every verb of the CLI shares: one-line errors, number parsing, the fabric options
and building a Fabric from them, and writing output."""
from __future__ import annotations

import argparse
import shlex
import sys
import textwrap

from testbed.errors import UsageError
from topologies import BUILDERS, Fabric, build, load_fabric

EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help that never breaks a line inside a hyphenated word (a scenario's name such as
    ``equal-cost`` is typed as printed)."""

    def _split_lines(self, text, width):
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


# option -> (builder keyword, the builders it belongs to, type, help)
FABRIC_OPTIONS = {
    "--n": ("n", ("zcube",), int, "zcube: switches per group (GPUs = n*n); default 4"),
    "--gpus-per-server": ("gpus_per_server", ("zcube", "roft", "fattree"), int,
                          "GPUs per server; zcube: must divide n (default n); roft: default 4, "
                          "= number of rails; fattree: must divide k/2 (default 1)"),
    "--parallel": ("parallel", ("zcube",), int,
                   "zcube: parallel cables per (A, B) switch pair (default 1)"),
    "--nic-gbps": ("nic_gbps", ("zcube", "roft", "fattree"), float,
                   "NIC bandwidth per GPU in Gb/s (default 400); zcube splits it over 2 ports"),
    "--servers": ("servers", ("roft",), int, "roft: number of servers (default 4)"),
    "--spines": ("spines", ("roft",), int,
                 "roft: spine switches (default: one cable from every leaf to every spine)"),
    "--oversubscription": ("oversubscription", ("roft",), float,
                           "roft: leaf down:up bandwidth ratio, 1 = full bisection (default 1)"),
    "--radix": ("radix", ("roft",), int, "roft: ports per switch (default 64)"),
    "--k": ("k", ("fattree",), int, "fattree: switch radix k, even (default 4)"),
    "--nvlink-gbps": ("nvlink_gbps", ("zcube", "roft", "fattree"), float,
                      "NVLink inside each server, Gb/s per GPU each way: 3600 for an H100's "
                      "900 GB/s; 0, the default, for none (the SimAI export then writes 2880, "
                      "its generator's default)"),
}


def one_line(text: str) -> str:
    """``text`` with every unprintable character (newlines included) escaped, so an error
    that quotes what the user typed stays on one line."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


class Parser(argparse.ArgumentParser):
    """argparse that reports bad input in one line and exits 2, never a traceback."""

    def error(self, message):
        self.exit(EXIT_BAD_INPUT,
                  f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def number(kind):
    def parse(text):
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a {'whole number' if kind is int else 'number'}") from None
    parse.__name__ = kind.__name__
    return parse


def add_fabric_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("fabric", metavar="FABRIC",
                   help=f"builder ({', '.join(BUILDERS)}) or a fabric .json file")
    g = p.add_argument_group("fabric options (each applies to the builders named)")
    for opt, (dest, _, kind, text) in FABRIC_OPTIONS.items():
        g.add_argument(opt, dest=dest, type=number(kind), default=None,
                       metavar="N" if kind is int else "X", help=text)


def add_policy_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--policy", default=None,
                   help="routing policy: zcube, zcube-short, zcube-pxn, pxn (with "
                        "--nvlink-gbps: hand a transfer to the sibling GPU whose NIC is on the "
                        "destination's rail or switch), ecmp, shortest, spray (ecmp's "
                        "paths, each transfer over 16 connections per port pairing; spray:K "
                        "for K; spray:all, model backend only, the even split over every "
                        "path) or module:function, its module in the working folder or on the "
                        "Python path (default: zcube on zcube fabrics, ecmp otherwise)")


def fabric_from_args(args: argparse.Namespace) -> Fabric:
    kind = args.fabric
    given = {opt: getattr(args, dest) for opt, (dest, _, _, _) in FABRIC_OPTIONS.items()
             if getattr(args, dest, None) is not None}
    if kind.endswith(".json"):
        if given:
            raise UsageError(f"{next(iter(given))} does not apply to a fabric file")
        return load_fabric(kind)
    if kind not in BUILDERS:
        raise UsageError(f"unknown fabric {kind!r}; choose one of {', '.join(BUILDERS)} or a "
                         f".json fabric file")
    params = {}
    for opt, value in given.items():
        dest, kinds, _, _ = FABRIC_OPTIONS[opt]
        if kind not in kinds:
            raise UsageError(f"{opt} does not apply to {kind} (it is a {'/'.join(kinds)} option)")
        params[dest] = value
    return build(kind, **params)


def fabric_from_spec(spec: str) -> Fabric:
    """A fabric from a one-string spec such as ``"roft --servers 4 --oversubscription 2"``."""
    p = Parser(prog="--vs", add_help=False)
    add_fabric_args(p)
    try:
        words = shlex.split(spec)
    except ValueError as err:
        raise UsageError(f"--vs {spec!r}: {err}") from None
    return fabric_from_args(p.parse_args(words))


def matched(kind: str, like: Fabric) -> Fabric:
    """A ``kind`` fabric with the same GPUs, GPUs per server and NIC bandwidth as ``like``,
    at full bisection: the fair baseline for a cost comparison."""
    gpus, gps = len(like.hosts), like.params.get("gpus_per_server", 1)
    if kind == "roft":
        return build("roft", servers=max(1, gpus // gps), gpus_per_server=gps,
                     nic_gbps=like.nic_gbps)
    if kind == "zcube":
        n = round(gpus ** 0.5)
        if n * n != gpus:
            raise UsageError(f"no zcube has {gpus} GPUs (it needs a square number)")
        return build("zcube", n=n, gpus_per_server=gps if n % gps == 0 else n,
                     nic_gbps=like.nic_gbps)
    if kind == "fattree":
        k = 2
        while k ** 3 // 4 < gpus:
            k += 2
        return build("fattree", k=k, nic_gbps=like.nic_gbps)
    raise UsageError(f"unknown fabric {kind!r} for --vs")


def emit(args, text: str) -> int:
    if getattr(args, "output", None):
        with open(args.output, "w") as f:
            f.write(text)
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def cc_arg(text: str) -> str:
    """``--tcp-cc``: a congestion control's name."""
    from testbed.core.settings import cc_name
    try:
        return cc_name(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_emulation_args(p, where: str) -> None:
    """The emulation settings a user sets on the command line (testbed/core/settings.py);
    ``where`` says what each replaces."""
    from testbed.core.settings import ECMP_MODES
    p.add_argument("--tcp-cc", type=cc_arg, metavar="NAME", default=None,
                   help=f"emulation: congestion control of the KV connections, {where} "
                        "emulation.tcp_cc (default cubic; e.g. bbr, reno)")
    p.add_argument("--ecmp", choices=ECMP_MODES, default=None,
                   help=f"emulation: {where} emulation.ecmp: pinned (default; each kept-open "
                        "connection on the path the model and ns-3 draw for it) or hash "
                        "(OVS's select groups hash it)")


def emulation_flags(args, settings):
    """``settings`` with ``--tcp-cc`` and ``--ecmp`` in place of its values, and the flags
    as given (empty when neither was)."""
    update = {key: getattr(args, key, None) for key in ("tcp_cc", "ecmp")}
    update = {k: v for k, v in update.items() if v is not None}
    shown = [f"--{k.replace('_', '-')} {v}" for k, v in update.items()]
    return settings.model_copy(update=update), shown


def in_range(flag: str, value, low: float, high: float, low_open: bool = False) -> None:
    """Refuse a flag's value outside [low, high] (``low_open``: above ``low``), naming the
    flag and its limits (``testbed/experiment/scenario/limits.py``)."""
    from testbed.experiment.scenario.limits import number as shown
    ok = value is not None and value == value and (value > low if low_open else value >= low) \
        and value <= high
    if not ok:
        span = (f"above {shown(low)} and at most {shown(high)}" if low_open
                else f"from {shown(low)} to {shown(high)}")
        raise UsageError(f"{flag} must be {span}, got {value:g}")
