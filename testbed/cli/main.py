"""The ``zcube`` command: a few verbs over one Fabric.

    zcube topo   FABRIC [options] --format json|dot|svg|png|summary|clab|simai
    zcube routes FABRIC [options] --policy P [--check] [--traffic T]
    zcube cost   FABRIC [options] [--vs FABRIC2] [--json]
    zcube up     FABRIC [options] [--policy P] [--link-mbps R] [--cli] [--json]
    zcube clean
    zcube workload FABRIC [options] [--model M] [--placement P] [--arrivals trace|poisson]
    zcube run    SCENARIO.yaml [-o DIR] [--backend emulation|model]
    zcube compare DIR [DIR ...]
    zcube report DIR
    zcube crossval SCENARIO.yaml [-o DIR] [--backends emulation,ns3,model]
    zcube demo   [-o DIR]

FABRIC is a builder (zcube, roft, fattree) with its options, or a fabric JSON file written
by ``zcube topo ... --format json``.  Exit status: 0 done, 1 a check or a run failed, 2 bad
input, 3 an expectation failed, 4 one not judged, 130 interrupted (docs/reference.md).
"""
from __future__ import annotations

import argparse
import sys

from testbed.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_CHECK_FAILED,
    Parser,
    add_fabric_args,
    fabric_from_args,
    number,
    one_line,
)
from testbed.errors import UsageError
from topologies import FabricError


def cmd_workload(args) -> int:
    from testbed.cli.common import in_range
    from testbed.cli.workload import cmd_workload as run_workload
    from testbed.experiment.scenario.limits import LINK_MBPS
    in_range("--link-mbps", args.link_mbps, *LINK_MBPS)
    return run_workload(args, fabric_from_args(args))


def make_parser() -> Parser:
    from testbed.cli import demo, fabric, run, up_args, workload
    p = Parser(prog="zcube", description=__doc__.split("\n\n")[0].replace("``", ""),
               epilog="Run 'zcube VERB --help' for the options of a verb.",
               formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="verb", metavar="VERB", parser_class=Parser)
    sub.required = True
    fabric.add_parsers(sub)
    up_args.add_parsers(sub)
    workload.add_parser(sub, add_fabric_args, number).set_defaults(func=cmd_workload)
    run.add_parsers(sub, number)
    demo.add_parser(sub)
    return p


def main(argv=None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (FabricError, UsageError) as err:
        print(f"zcube {args.verb}: error: {one_line(str(err))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return 0
    except OSError as err:
        print(f"zcube {args.verb}: error: {one_line(str(err.filename or ''))}: {err.strerror}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("zcube: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - the last resort: one line, the rest in a file
        print(f"zcube {args.verb}: internal error: {one_line(f'{type(err).__name__}: {err}')} "
              f"(traceback in {_log_traceback()}; please report it)", file=sys.stderr)
        return EXIT_CHECK_FAILED


def _log_traceback() -> str:
    """Write the exception being handled, with its traceback, to a new log file; its path.
    Whatever the run started has been ended by then: every backend session and emulation
    ends what it started in ``finally`` blocks the exception passed through."""
    import tempfile
    import traceback
    fd, path = tempfile.mkstemp(prefix="zcube-error-", suffix=".log")
    with open(fd, "w") as f:
        f.write(f"zcube {' '.join(sys.argv[1:])}\n")
        traceback.print_exc(file=f)
    return path


if __name__ == "__main__":
    sys.exit(main())
