"""The in-process llama.cpp engine: a DSPy custom engine (``complete(Request) -> Response``) running a
GGUF model with grammar-constrained JSON output.

Owns: ``LlamaCppEngine`` (contexts per prompt family, grammars, retries under tighter bounds, usage and
log-probabilities) and the ``Llama`` subclass it runs (``judge_llama_class``: the fast sampler, decode
threads and drafting wired in). Must not decide which model or LM a judge uses (``judges.lm.resolve``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
from dspy.lm15 import (
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

from judges.lm.sampling import GreedyGrammarSampler, PromptLookup
from judges.lm.schemas import bounded_schema, current_output_constraints, salvage_json
from judges.lm.threads import DecodeThreads, usable_cores

DEFAULT_N_CTX = 4096
DEFAULT_MAX_TOKENS = 1024
_MODEL_PARAMS_LOCK = threading.Lock()


@functools.cache
def cpu_offers_amx() -> bool:
    """Whether this CPU offers AMX int8 tiles (``/proc/cpuinfo``, read once; False where it cannot be read)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as handle:
            return any(line.startswith("flags") and " amx_int8" in line for line in handle)
    except OSError:
        return False


@contextlib.contextmanager
def weight_repacking(enabled: bool | None = None):
    """llama.cpp models loaded inside the block have their weights repacked into its extra buffer types
    (AMX tiles, wider SIMD layouts) when ``enabled``, and kept as the file has them when not; None turns
    repacking off where the CPU offers AMX (``cpu_offers_amx``) and leaves it on elsewhere.

    llama-cpp-python's ``Llama`` has no argument for it (llama.cpp's ``use_extra_bufts``), so the block
    sets it on the model defaults ``Llama`` starts from; loads from other threads wait meanwhile. Why it
    exists: on a Sapphire Rapids VM here the AMX repacked weights crash the first prompt of two or more
    tokens (SIGSEGV in ``ggml_backend_amx_mul_mat``; llama.cpp issue 20824, open, no fix; DSPy's CI met it
    too), while single-token steps run."""
    if enabled is None:
        enabled = not cpu_offers_amx()
    if enabled:  # llama.cpp's own default
        yield
        return
    import llama_cpp.llama_cpp as bindings

    with _MODEL_PARAMS_LOCK:
        defaults = bindings.llama_model_default_params

        def without_extra_buffers():
            params = defaults()
            params.use_extra_bufts = False
            return params

        bindings.llama_model_default_params = without_extra_buffers
        try:
            yield
        finally:
            bindings.llama_model_default_params = defaults


def _message_text(message: Message) -> str:
    text = message.text
    return text if text is not None else ""


@functools.cache
def judge_llama_class():
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
      first (``grammar_best_first``, ``GreedyGrammarSampler``: the same tokens, faster);
      llama.cpp drops to one thread while another program takes the cores (``adaptive_threads``,
      ``DecodeThreads``: its threads otherwise wait on each other, seconds a token);
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
        repack_weights: bool | None = None,
        verbose: bool = False,
    ):
        self.model_path = str(model_path)
        if not Path(self.model_path).is_file():
            raise FileNotFoundError(f"GGUF model file not found: {self.model_path}")
        self.n_ctx = n_ctx
        self.n_threads = n_threads or usable_cores()
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
        if repack_weights is not None and not isinstance(repack_weights, bool):
            raise ValueError(f"LlamaCppEngine: repack_weights must be a bool or None, got {repack_weights!r}")
        self.repack_weights = repack_weights
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
            "repack_weights": self.repack_weights,
        }

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> LlamaCppEngine:
        path = state.get("model_path")
        if not isinstance(path, str):
            raise ValueError("LlamaCppEngine state needs a 'model_path' string")
        return cls(path, **{k: state[k] for k in ("n_ctx", "n_threads", "max_string_chars", "max_items", "prefix_contexts",
                                                  "grammar_best_first", "adaptive_threads", "draft_tokens",
                                                  "flash_attn", "repack_weights")
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
            with weight_repacking(self.repack_weights):
                llama = judge_llama_class()(
                    model_path=self.model_path, n_ctx=self.n_ctx, n_threads=self.n_threads,
                    n_threads_batch=self.n_threads, n_batch=self.n_batch, logits_all=logprobs,
                    flash_attn=self.flash_attn, verbose=self.verbose, grammar_best_first=self.grammar_best_first,
                    decode_threads=self.decode_threads)
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
        constraints = current_output_constraints()
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
