"""Mutation score of the conformance suites: the whole `conformance.mutants` catalogue, with the wall time.

A correct reference broker behind the chaos proxy; per mutant, one `kafka_rewrite` toxic rewrites one field of
one API key's answers and the suites run as `--target live` through the proxy. Killed = a check diverged.
Writes `<out>/mutants.json` and `<out>/mutants.txt` and prints the table; exit 1 if the no-mutant baseline failed.

    .venv/bin/python benchmarks/mutants.py [--out out/mutants] [--only NAME,...] [--full] [--timeout 150]

`--full` runs all four suites for every mutant instead of the mutant's own selection (about 90 s per mutant).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's conformance/ and chaos/, not an installed copy

from conformance.mutants import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
