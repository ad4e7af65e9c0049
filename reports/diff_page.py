"""The differential report as one HTML page (Jinja2), from the ``diff.json`` that ``python -m conformance.diff``
writes; like every report here it reads a file and never a broker.

    python -m reports diff out/diff/diff.json [--out out/diff/index.html]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")
SCHEMA = "kct-diff/1"


def render(doc: dict[str, Any]) -> str:
    """The page: summary, the field table per API key and version (differing fields first, each with its first
    example), the normalisation and gap tables, conversations left out, what the machine found."""
    if doc.get("schema") != SCHEMA:
        raise ValueError(f"not a differential report ({SCHEMA}): schema {doc.get('schema')!r}")
    apis = []
    for a in doc.get("apis", []):
        fields = sorted(a["fields"], key=lambda f: (-(f["differ"] - f["known"]), -f["differ"], f["field"]))
        for f in fields:
            if f.get("first"):
                f["first_json"] = {k: json.dumps(f["first"].get(k), indent=1, default=str)[:8000]
                                   for k in ("request", "answer_a", "answer_b")}
        apis.append({**a, "fields": fields, "unexplained": sum(1 for f in fields if f["differ"] > f["known"]),
                     "known": sum(1 for f in fields if f["differ"] and f["differ"] == f["known"])})
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"]))
    return env.get_template("diff.html.j2").render(doc=doc, apis=apis)


def write(doc: dict[str, Any], path: str) -> str:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(render(doc))
    return path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="diff.json written by python -m conformance.diff")
    p.add_argument("--out", help="HTML file (default: index.html next to the JSON)")


def run(args: argparse.Namespace) -> int:
    try:
        with open(args.path, encoding="utf-8") as fh:
            doc = json.load(fh)
        out = write(doc, args.out or os.path.join(os.path.dirname(os.path.abspath(args.path)), "index.html"))
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(out)
    return 0
