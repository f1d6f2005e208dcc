"""What every subcommand shares: the usage error, metric and data loading by name, MLflow on/off, options.

Owns: what every command shares (options, dataset and LM arguments, errors). Must not hold a command.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import math
import os
import re
from pathlib import Path
from typing import Any

from calibration.data import loaders
from calibration.data.labelled import LabelledSet
from judges.data.dataset import EvaluationDataset
from judges.lm.files import EMBEDDED
from judges.lm.resolve import lm_label, resolve_lm
from judges.lm.served import ServedLM
from judges.metrics.base import Metric
from judges.metrics.catalogue import metric_classes
from judges_app.cli.arg_types import (  # noqa: F401  (the commands import them from here)
    MAX_BOOTSTRAP,
    MAX_TIMEOUT,
    bootstrap_count,
    column_map,
    label_range,
    label_words,
    positive_int,
    positive_number,
    seed_value,
    share,
    sizes_list,
    table_file,
    timeout_seconds,
)

BUILTIN_SETS = {
    "begin-slice": "60 BEGIN dialogue turns bundled with the package (faithfulness; binary)",
    "begin": "BEGIN from shared/data (faithfulness / groundedness; binary)",
    "begin-wow": "BEGIN's Wizard-of-Wikipedia part (held out from the shipped verifier's training; binary)",
    "evouna": "EVOUNA NQ answers of FiD, ChatGPT, GPT-3.5 (answer correctness; binary)",
    "summeval": "SummEval consistency (summary rubric; ordinal 1-5)",
    "cranfield": "Cranfield query-document relevance (context relevance)",
    "tau-bench": "tau-bench airline trajectories (agent goal; binary reward)",
}
BUILTIN_LOADERS = {
    "begin-slice": loaders.load_begin_slice,
    "begin": loaders.load_begin,
    "begin-wow": lambda: loaders.load_begin(parts=("wow",)),
    "evouna": lambda: loaders.load_evouna(systems=("fid", "chatgpt", "gpt35")),
    "summeval": loaders.load_summeval,
    "cranfield": loaders.load_cranfield,
    "tau-bench": loaders.load_tau_bench,
}


class UsageError(Exception):
    """Bad arguments or input: reported in one line and exit code 2."""


def output_folder(path: str | Path) -> Path:
    """``--out``: a folder made if missing, refused when it is a file, a symbolic link (outputs would land
    wherever it points) or not writable: one line naming the path, before any work."""
    path = Path(path)
    if path.is_symlink():
        raise UsageError(f"--out {path} is a symbolic link (to {os.readlink(path)}); give the folder itself")
    if path.exists() and not path.is_dir():
        raise UsageError(f"--out {path} is a file; give a folder (it is made if missing)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"--out {path}: cannot make the folder ({err.strerror})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"--out {path} is not writable")
    return path


class CommandFailed(Exception):
    """The command ran but its result cannot be trusted (e.g. the judge failed on too many items):
    reported in one line and exit code 1, after whatever was written and printed."""


#: A served LM's request timeout and retries unless the command is told otherwise (``ServedLM``'s defaults).
SERVED_REQUEST_TIMEOUT = inspect.signature(ServedLM.__init__).parameters["request_timeout"].default
SERVED_RETRIES = inspect.signature(ServedLM.__init__).parameters["retries"].default


def check_bootstrap_memory(n_bootstrap: int, n_items: int, budget: int = 2 * 1024**3) -> None:
    """Refuse (``UsageError``, exit 2) before any judge runs a bootstrap whose resamples would not fit in
    ``budget`` bytes: all resamples are drawn at once, a few float64 matrices of resamples x items."""
    need = 4 * 8 * n_bootstrap * max(n_items, 1)
    if need > budget:
        raise UsageError(f"--n-bootstrap {n_bootstrap:,} on {n_items:,} items would take about {need / 1024**3:.1f} GB "
                         f"of memory (the budget is {budget / 1024**3:.0f} GB); give fewer resamples")


# ------------------------------------------------------------------------------------------------
# Metrics by name
# ------------------------------------------------------------------------------------------------
def dataset_name(data: str) -> str:
    """A short name for a labelled-set argument: a built-in set's name, or a file's stem (for output paths)."""
    return data if data in BUILTIN_SETS else Path(data).stem


def required_params(cls: type) -> list[str]:
    """The constructor parameters a metric class cannot be built without (e.g. AspectCritic's name)."""
    return [p.name for p in inspect.signature(cls.__init__).parameters.values()
            if p.default is inspect.Parameter.empty and p.name != "self"
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def build_metric(spec: str, *, lm: Any = None, embeddings: Any = None, args: Any = None) -> Metric:
    """``name`` or ``name:{json constructor params}``, e.g. ``aspect_critic:{"name": "polite", ...}``, or the
    path of a compiled judge saved by ``calibrate`` (``compiled_<judge>_<optimizer>.json``); any of them
    after ``ALIAS=`` runs under that name (two of one kind in one run: ``-m rouge_l=rouge_score``
    ``-m 'rouge_1=rouge_score:{"rouge_type": "rouge1"}'``). With the command's ``args``, a compiled judge is
    checked against the LM the command runs (``--lm``, default embedded): a warning, or with ``--strict`` a
    usage error, when it was compiled with another."""
    alias = re.match(r"([A-Za-z0-9_][A-Za-z0-9_.\-]*)=", spec)  # before any ':' or '{': never inside the JSON
    if alias and not Path(spec).is_file():  # a compiled judge's path may hold an '=' of its own
        metric = build_metric(spec[alias.end():], lm=lm, embeddings=embeddings, args=args)
        try:
            return metric.named(alias.group(1))
        except ValueError as err:
            raise UsageError(str(err)) from None
    if spec.partition(":")[0] not in metric_classes() and path_problem(spec):  # a directory, a device ...
        raise UsageError(f"{path_problem(spec)}: give a compiled judge .json file or a metric name")
    if spec.endswith(".json") and Path(spec).is_file():
        from calibration.fitting.compiled import CompiledJudge  # scikit-learn: imported for a compiled judge only

        try:
            compiled = CompiledJudge.load(spec, lm=lm, embeddings=embeddings, strict=getattr(args, "strict", False))
            if args is not None and compiled.needs_lm:
                compiled.check_lm(lm_label(getattr(args, "lm", None) or EMBEDDED))
            return compiled
        except ValueError as err:
            raise UsageError(f"{spec}: {err}") from None
    name, _, params_text = spec.partition(":")
    classes = metric_classes()
    if name not in classes:
        raise UsageError(f"unknown metric {name!r}; `dspy-judges metrics` lists them (e.g. {', '.join(list(classes)[:4])})")
    try:
        params = json.loads(params_text) if params_text else {}
    except json.JSONDecodeError as err:
        raise UsageError(f"metric {name!r}: parameters after ':' must be a JSON object ({err.msg})") from None
    if not isinstance(params, dict):
        raise UsageError(f"metric {name!r}: parameters after ':' must be a JSON object")
    cls = classes[name]
    accepted = inspect.signature(cls.__init__).parameters
    for resource, value in (("lm", lm), ("embeddings", embeddings)):
        if value is not None and resource in accepted:
            params.setdefault(resource, value)
    try:
        return cls(**params)
    except TypeError as err:
        missing = [r for r in required_params(cls) if r not in params]
        hint = f"; it needs {missing}, e.g. {name}:" + json.dumps({m: "..." for m in missing}) if missing else ""
        raise UsageError(f"metric {name!r}: {err}{hint}") from None
    except ValueError as err:  # a setting out of range: the constructor's message names it
        raise UsageError(f"metric {name!r}: {err}") from None


# ------------------------------------------------------------------------------------------------
# Data
# ------------------------------------------------------------------------------------------------
def path_problem(path: str | Path) -> str | None:
    """What keeps ``path`` from being read as a file, in words (None: a regular file, or nothing there)."""
    file = Path(path)
    if not file.exists():
        return None
    if file.is_dir():
        return f"{path} is a directory, not a file"
    if not file.is_file():
        target = f" (a link to {os.path.realpath(file)})" if file.is_symlink() else ""
        return f"{path}{target} is not a regular file (a device, pipe or socket)"
    return None


def load_dataset(path: str, limit: int | None, reference_separator: str | None = None,
                 id_column: str | None = None) -> EvaluationDataset:
    file = Path(path)
    if path_problem(file):
        raise UsageError(path_problem(file))
    if not file.is_file():
        raise UsageError(f"dataset file not found: {path}")
    loaders = {".jsonl": EvaluationDataset.from_jsonl, ".csv": EvaluationDataset.from_csv}
    if file.suffix not in loaders:
        raise UsageError(f"{path}: give a .jsonl or .csv file (one sample per line / row)")
    try:
        dataset = loaders[file.suffix](file, reference_separator=reference_separator, id_column=id_column)
    except (ValueError, UnicodeDecodeError) as err:  # a row that is not a sample: the message names row and field
        raise UsageError(f"{path}: {err}") from None
    if len(dataset) == 0:
        raise UsageError(f"{path} holds no samples")
    for field_name, count in dataset.plain_text_lists.items():
        print(f"{path}: {count} '{field_name}' cells were plain text, each read as a list of one text", flush=True)
    if limit:
        ids = dataset.ids
        dataset = EvaluationDataset(dataset.samples[:limit])
        dataset.ids = ids[:limit] if ids else None
    return dataset


def load_labelled(source: str, *, label_column: str, label_kind: str,
                  label_range: tuple[float, float] | None = None, reference_separator: str | None = None,
                  columns: dict[str, str] | None = None, label_map: dict[str, float] | None = None,
                  id_column: str | None = None) -> LabelledSet:
    """A built-in labelled set by name, or a labelled .jsonl / .csv file whose labels are all checked
    against ``label_kind`` (and ``label_range``) here, before any judge runs; ``columns``, ``label_map`` and
    ``id_column`` read a file as it is (``LabelledSet.from_records``), and what they decided for many rows is
    said once."""
    if source in BUILTIN_LOADERS:
        try:
            return BUILTIN_LOADERS[source]()
        except FileNotFoundError as err:
            raise UsageError(f"{source}: {err}") from None
    file = Path(source)
    if path_problem(file):
        raise UsageError(path_problem(file))
    if not file.is_file():
        raise UsageError(f"{source!r} is neither a labelled file (.jsonl/.csv) nor one of {list(BUILTIN_LOADERS)}")
    loaders = {".jsonl": LabelledSet.from_jsonl, ".csv": LabelledSet.from_csv}
    if file.suffix not in loaders:
        raise UsageError(f"{source}: give a .jsonl or .csv file with sample fields and a '{label_column}' column")
    try:
        data = loaders[file.suffix](file, label=label_column, kind=label_kind, name=file.stem, label_range=label_range,
                                    reference_separator=reference_separator, columns=columns, label_map=label_map,
                                    id_column=id_column)
    except (ValueError, UnicodeDecodeError) as err:
        raise UsageError(str(err)) from None
    for note in data.notes:
        print(f"{source}: {note}", flush=True)
    return data


def cli_lm(args) -> Any:
    """The judge LM the options describe: None (the default), the embedded model, a .gguf file, or a
    ``ServedLM`` for a model string with ``--api-base`` / ``--api-key-env`` / limits. Checked now, before any
    work: a served LM option without a model string, or an unset key variable, is a usage error."""
    served = args.api_base or args.api_key_env or args.response_schema
    if args.lm is None or args.lm == EMBEDDED or args.lm.endswith(".gguf"):
        if served:
            raise UsageError("--api-base / --api-key-env / --response-schema need --lm MODEL (a LiteLLM model string "
                             "such as openai/NAME)")
        return resolve_lm(args.lm) if args.lm else None
    try:
        return ServedLM(args.lm, api_base=args.api_base, api_key_env=args.api_key_env,
                        max_concurrency=args.max_concurrency, max_rps=args.max_rps, response_schema=args.response_schema,
                        request_timeout=getattr(args, "request_timeout", SERVED_REQUEST_TIMEOUT))
    except ValueError as err:
        raise UsageError(f"--lm {args.lm}: {err}") from None


def lm_params(args) -> dict[str, Any]:
    """What MLflow logs about the LM: model and API base; never the key (only its variable's name)."""
    return {"lm": args.lm or "embedded", "api_base": args.api_base, "api_key_env": args.api_key_env,
            "max_concurrency": args.max_concurrency, "max_rps": args.max_rps, "response_schema": args.response_schema,
            "request_timeout": getattr(args, "request_timeout", SERVED_REQUEST_TIMEOUT)}


def read_prices(path: str | None) -> dict[str, dict[str, float]] | None:
    """The ``--prices`` JSON file: {"model": {"input": $ per 1M tokens, "output": ...}}."""
    if not path:
        return None
    try:
        prices = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise UsageError(f"--prices {path}: {err}") from None
    def bad_entry(price: Any) -> bool:
        return not isinstance(price, dict) or set(price) - {"input", "output"} or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
            for v in price.values())

    bad = [m for m, p in prices.items() if bad_entry(p)] if isinstance(prices, dict) else ["(not an object)"]
    if bad:
        raise UsageError(f'--prices {path}: expected {{"model": {{"input": $ per 1M tokens, "output": ...}}}} with '
                         f"numbers >= 0; bad entries {bad}")
    return prices


# ------------------------------------------------------------------------------------------------
# MLflow on / off
# ------------------------------------------------------------------------------------------------
def check_tracking(args) -> None:
    """Refuse to start when MLflow could not log the run (a read-only folder, a server that is down),
    before any work rather than after it."""
    if not args.no_mlflow:
        from judges_app.tracking import tracking_problem  # MLflow: imported for a run that logs to it only

        problem = tracking_problem(args.runs_dir)
        if problem:
            raise UsageError(f"{problem}; pass --no-mlflow, another --runs-dir or MLFLOW_TRACKING_URI")


def tracking(args, experiment: str, run_name: str, params: dict[str, Any]):
    """The command's MLflow run, or nothing with ``--no-mlflow``."""
    if args.no_mlflow:
        return contextlib.nullcontext()
    from judges_app.tracking import tracked_run

    return tracked_run(experiment, run_name, params=params, run_dir=args.runs_dir, autolog=not args.no_traces)


def log_after_printing(args, log: Any) -> str | None:
    """Run ``log()`` (MLflow logging at the end of a command whose results are already written and printed);
    a failure becomes a message for the caller to report after the results, not instead of them."""
    if args.no_mlflow:
        return None
    try:
        log()
    except Exception as err:  # the results stand; logging them is what failed
        return f"logging to MLflow failed ({type(err).__name__}: {err}); the results above are written to disk"
    return None


def mlflow_note(args) -> None:
    if not args.no_mlflow:
        from judges_app.tracking import default_tracking_uri

        print(f"MLflow run logged to {default_tracking_uri(args.runs_dir)}")


# ------------------------------------------------------------------------------------------------
# Options several subcommands take
# ------------------------------------------------------------------------------------------------
def add_common_options(parser: argparse.ArgumentParser, lm: bool = True) -> None:
    if lm:
        parser.add_argument("--lm", default=None, help="judge LM: 'embedded' (default: SmolLM2-135M in-process), a "
                            ".gguf path, or any LiteLLM model string such as openai/gpt-4o-mini")
        parser.add_argument("--api-base", default=None, help="the served LM's base URL, e.g. http://127.0.0.1:8000/v1 "
                            "(an OpenAI-compatible server: vLLM, Ollama, llama.cpp, a LiteLLM proxy)")
        parser.add_argument("--api-key-env", default=None, metavar="NAME",
                            help="the environment variable holding the API key (read from it; never printed or logged)")
        parser.add_argument("--max-concurrency", type=positive_int, default=16,
                            help="requests in flight to the served LM at most (default 16)")
        parser.add_argument("--max-rps", type=positive_number, default=None,
                            help="requests started per second at most (default: no limit)")
        parser.add_argument("--request-timeout", type=timeout_seconds, default=SERVED_REQUEST_TIMEOUT,
                            metavar="SECONDS",
                            help=f"how long one request to the served LM may take (default {SERVED_REQUEST_TIMEOUT:g} s); "
                                 f"a timed-out request is tried {SERVED_RETRIES} more times, so a server that never "
                                 f"answers holds an item up to {SERVED_RETRIES + 1} times this")
        parser.add_argument("--strict", action="store_true",
                            help="refuse a compiled judge file compiled and calibrated with another LM than --lm "
                                 "(default: a warning)")
        parser.add_argument("--response-schema", choices=("json_schema", "json_object"), default=None,
                            help="ask the served LM for the output's JSON schema: json_schema for OpenAI-style "
                                 "servers (vLLM, SGLang ...), json_object for llama.cpp servers (grammar); "
                                 "default: ChatAdapter text, or what DSPy knows of the model")
    parser.add_argument("--runs-dir", default="runs", help="where outputs and the MLflow SQLite store go (default: runs)")
    parser.add_argument("--no-mlflow", action="store_true", help="do not log this run to MLflow")
    parser.add_argument("--no-traces", action="store_true", help="log to MLflow but without DSPy traces")
    add_debug_option(parser)


def add_label_scale_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--label-kind", default="binary", choices=("binary", "ordinal", "continuous"),
                        help="binary (0/1, true/false), ordinal (whole numbers) or continuous; every label is "
                             "checked before any LM call")
    parser.add_argument("--label-range", type=label_range, default=None, metavar="LOW,HIGH",
                        help="the label scale, e.g. 1,5 (default: the lowest and highest label in the file)")


def add_file_mapping_options(parser: argparse.ArgumentParser) -> None:
    """Options that read a labelled file as it is: its column names, its label words, its id column."""
    parser.add_argument("--columns", type=column_map, default=None, metavar="THEIRS=OURS,...",
                        help="your file's columns as sample fields, e.g. bot_reply=response,knowledge=retrieved_contexts "
                             "(columns not named, other than the label, are left out; said once)")
    parser.add_argument("--labels", type=label_words, default=None, metavar="WORD=NUMBER,...",
                        help="your label words as numbers, e.g. faithful=1,hallucinated=0 (case ignored)")
    parser.add_argument("--id-column", default=None, metavar="NAME",
                        help="the column naming each item, shown in disagreement lists (default: its line in the file)")


def labelled_file_options(args) -> dict[str, Any]:
    """The file-mapping options as ``load_labelled`` keywords."""
    return {"columns": args.columns, "label_map": args.labels, "id_column": args.id_column}


def add_reference_separator_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reference-separator", default=None, metavar="TEXT",
                        help='split each reference on TEXT into acceptable alternatives, e.g. "/" for '
                             '"June Carter Cash/June Cash" (off by default: "9/11" stays whole); a JSON list '
                             "in the reference field is always read as alternatives")


def add_prices_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prices", default=None, help='JSON file of LM prices for the cost column: {"model": '
                        '{"input": $ per 1M tokens, "output": ...}}, models named as in the LM string')


def add_debug_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show full tracebacks")
