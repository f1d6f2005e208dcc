"""dspy-judges: score datasets with LLM judges, calibrate judges against human labels, look at the results.

    dspy-judges metrics                                   every metric, its fields, whether it needs an LM
    dspy-judges evaluate data.jsonl -m faithfulness -m rouge_score
    dspy-judges calibrate begin-slice --judge faithfulness --optimizer bootstrap
    dspy-judges agreement runs/calibrate/begin-slice-faithfulness/compiled_faithfulness_bootstrap.json labels.jsonl
    dspy-judges label pool.jsonl --judge faithfulness --budget 20 --out labels.jsonl
    dspy-judges report runs/calibrate/begin-slice-faithfulness/calibration_run.json
    dspy-judges train-verifier --out runs/verifier --install   train the groundedness verifier again

Every evaluate / calibrate run is logged to MLflow (params, metrics with CIs, artifacts, DSPy traces):
by default to runs/mlflow.db (SQLite, no server); set MLFLOW_TRACKING_URI to use a tracking server, or
pass --no-mlflow. See `mlflow ui --backend-store-uri sqlite:///runs/mlflow.db`.

Exit codes: 0 done; 2 bad arguments or input (the message says what to fix); 1 anything else.

Must not hold a command's logic: each command has its module.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
from collections.abc import Sequence

from judges_app.cli.common import CommandFailed, UsageError

#: The subcommands in the order `--help` lists them, with their one-line help. Each has a module here
#: (``add_parser(sub, summary)`` and ``run(args)``), imported only when that command runs: together they pull in
#: MLflow, scikit-learn, matplotlib and torch, and `dspy-judges label` need not wait for all of them.
COMMANDS = {
    "metrics": "list every metric, its required fields, whether it needs an LM or embeddings",
    "evaluate": "score a dataset with metrics: scores table, per-sample JSONL, summary",
    "calibrate": "compile a judge on human labels, calibrate it, report held-out agreement",
    "agreement": "measure a judge (compiled or by name) against new human labels: the drift check",
    "label": "label the pool items that teach the judge most, one by one (terminal)",
    "report": "an HTML page with plots from a calibration run or an evaluate output",
    "train-verifier": "train the groundedness verifier again from scratch (seeded, resumable)",
}


def for_users(doc: str | None) -> str:
    """A module docstring as ``--help`` shows it: without the paragraphs for the code's developers (those that
    open with "Owns:" or "Must not")."""
    paragraphs = (doc or "").strip().split("\n\n")
    return "\n\n".join(p for p in paragraphs if not p.lstrip().startswith(("Owns:", "Must not")))


def parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser, with the arguments of ``command`` (the others listed by name and help)."""
    top = argparse.ArgumentParser(prog="dspy-judges", description=for_users(__doc__),
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    top.add_argument("--debug", action="store_true", help="show full tracebacks")
    sub = top.add_subparsers(dest="command", required=True, metavar="{" + ",".join(COMMANDS) + "}")
    for name, help_line in COMMANDS.items():
        if name == command:
            importlib.import_module(f"judges_app.cli.{name.replace('-', '_')}").add_parser(sub, help_line)
        else:
            sub.add_parser(name, help=help_line)
    return top


def _terminated(signum, frame) -> None:
    """SIGTERM stops a command as Ctrl-C does: the run waits for the items in flight and records their calls."""
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser(next((a for a in argv if not a.startswith("-")), None)).parse_args(argv)
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminated) if in_main_thread else None
    try:
        return args.run(args)
    except UsageError as err:
        print(f"dspy-judges {args.command}: error: {err}", file=sys.stderr)
        return 2
    except CommandFailed as err:
        print(f"dspy-judges {args.command}: failed: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # one line for users; --debug for the traceback
        if args.debug:
            raise
        print(f"dspy-judges {args.command}: failed: {type(err).__name__}: {err} (rerun with --debug for the traceback)",
              file=sys.stderr)
        return 1
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
