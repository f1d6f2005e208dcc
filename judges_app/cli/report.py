"""`dspy-judges report`: an HTML page with plots from a calibration run or an evaluate output.

Must not compute anything a report shows (``calibration.agreement.report``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from calibration.agreement.report import write_report
from judges_app.cli.common import UsageError, add_debug_option, output_folder


def run(args) -> int:
    source = Path(args.source)
    if not source.is_file():
        raise UsageError(f"not a file: {args.source} (give a calibration_run.json, samples.jsonl or a run file)")
    out = output_folder(args.out or source.parent / "report")
    try:
        page = write_report(source, out)
    except ValueError as err:
        raise UsageError(str(err)) from None
    print(f"wrote {page} and its plots; open it in a browser")
    return 0


def add_parser(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("report", help=summary)
    p.add_argument("source", help="calibration_run.json, or samples.jsonl / run.jsonl from evaluate")
    p.add_argument("--out", default=None, help="output folder (default: <source folder>/report)")
    add_debug_option(p)
    p.set_defaults(run=run)
