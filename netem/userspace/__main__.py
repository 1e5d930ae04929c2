"""`python -m netem.userspace --config FILE --tag gesscale-netem:TAG`: run the delay daemon in the foreground."""

from __future__ import annotations

import argparse
import logging
import sys

from netem.userspace.daemon import DelayDaemon
from netem.userspace.launch import LABEL_PATTERN
from netem.userspace.table import TableError


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, load the link table and serve until SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m netem.userspace", description=__doc__)
    parser.add_argument("--config", required=True, help="the link table (JSON), re-read on SIGHUP")
    parser.add_argument("--tag", required=True, help="gesscale-netem:TAG, how cleanup finds this daemon")
    parser.add_argument("--seed", type=int, default=None, help="seed of jitter and loss draws")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if not LABEL_PATTERN.match(args.tag):
        print(f"--tag {args.tag!r} must look like gesscale-netem:TAG", file=sys.stderr)
        return 2
    try:
        daemon = DelayDaemon(args.config, args.tag, args.seed)
    except TableError as err:
        print(f"link table: {err}", file=sys.stderr)
        return 2
    daemon.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
