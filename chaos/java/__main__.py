"""`python -m chaos.java build [--verbose]`: build the Java driver (a no-op once built); exit 1 naming what failed."""

from __future__ import annotations

import argparse
import sys
import time

from .build import STAMP, BuildError, build_dir, ensure_driver


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m chaos.java", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the driver into ~/.cache/kct/java-driver/<hash>/ (offline once built)")
    b.add_argument("--verbose", action="store_true", help="show Maven's output")
    args = p.parse_args(argv)
    t0 = time.monotonic()
    cached = (build_dir() / STAMP).exists()
    try:
        built = ensure_driver(quiet=not args.verbose)
    except BuildError as e:
        print(f"chaos.java: {e}", file=sys.stderr)
        return 1
    jar = next((j for j in built.jars() if j.startswith("kafka-clients-")), "?")
    how = "cached" if cached else f"built in {time.monotonic() - t0:.1f}s"
    print(f"Java client driver: {jar} in {built.home} ({how})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
