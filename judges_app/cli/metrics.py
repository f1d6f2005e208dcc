"""`dspy-judges metrics`: every metric, its sample type and fields, whether it needs an LM or embeddings.

Must not construct or run metrics: it lists the catalogue.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from judges.metrics.base import snake_case
from judges.metrics.catalogue import family_of, metric_classes
from judges_app.cli.common import add_debug_option, required_params


def metric_rows() -> list[dict[str, Any]]:
    rows = []
    for name, cls in metric_classes().items():
        rows.append({"name": name, "class": cls.__name__, "family": family_of(cls),
                     "sample": cls.sample_type.__name__, "required_fields": list(cls.required_fields),
                     "needs_lm": bool(cls.needs_lm), "needs_embeddings": bool(cls.needs_embeddings),
                     "required_params": required_params(cls),
                     "alias_of": None if snake_case(cls.__name__) == name else snake_case(cls.__name__)})
    return rows


def run(args) -> int:
    rows = metric_rows()
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'metric':<42} {'sample':<17} {'LM':<3} {'emb':<3} required fields")
    for r in rows:
        extra = f"  (params: {', '.join(r['required_params'])})" if r["required_params"] else ""
        extra += f"  (= {r['alias_of']})" if r["alias_of"] else ""
        print(f"{r['name']:<42} {r['sample']:<17} {'yes' if r['needs_lm'] else '-':<3} "
              f"{'yes' if r['needs_embeddings'] else '-':<3} {', '.join(r['required_fields'])}{extra}")
    print(f"\n{len(rows)} metrics. Use a name with `dspy-judges evaluate DATA -m NAME`; "
          "give constructor parameters as NAME:{json}.")
    return 0


def add_parser(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("metrics", help=summary)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    add_debug_option(p)
    p.set_defaults(run=run)
