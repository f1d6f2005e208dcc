"""LMs behind HTTP (OpenAI, vLLM, Ollama, a llama.cpp server, a LiteLLM proxy ...): limits and retries.

``ServedLM`` is a ``dspy.LM`` (any LiteLLM model string, unchanged) that owns what a judge run against a
provider needs:

* at most ``max_concurrency`` requests in flight and at most ``max_rps`` started per second, per endpoint
  (model + api base), shared by every ServedLM for that endpoint in the process;
* transient failures (429, 5xx, connection resets, timeouts, a reply that is not JSON or is cut short, an
  empty completion) retried up to ``retries`` times with jittered exponential backoff that never comes
  sooner than the provider's ``Retry-After``, inside a retry budget per endpoint (``retry_budget`` retries
  per successful call, plus ``min_retries``), so a failing provider is not hammered;
* permanent failures (bad request, authentication, billing, unknown model) raised at once as
  ``PermanentLMError``, which ``evaluate`` turns into one clear stop; a prompt longer than the context
  window is the item's own failure (``ContextWindowExceededError``), not retried;
* the key: ``api_key`` or ``api_key_env`` (the variable's name; the value is read here and never shown);
* a length limit the server obeys: with an ``api_base`` (a self-hosted OpenAI-compatible server),
  ``max_tokens`` is also sent under that name, since DSPy sends OpenAI's ``max_completion_tokens``,
  which llama.cpp's server ignores;
* structured output on servers DSPy does not know: ``response_schema="json_schema"`` for servers taking
  OpenAI's ``{"type": "json_schema", ...}`` (OpenAI, vLLM, SGLang, LM Studio), ``"json_object"`` for
  llama.cpp's servers (``{"type": "json_object", "schema": ...}``, compiled to a grammar there), with
  every string and list in the schema bounded (``judges.lm.schemas.bounded_schema``) so an answer always
  closes; ``dspy.JSONAdapter`` then asks for the signature's schema.

DSPy's own retries are switched off (``num_retries=0``) so that every attempt passes through here once.
An empty completion is retried with DSPy's cache bypassed (DSPy has already cached the empty answer; a
rerun of the same request meets it again and retries again).

Must not run a model in-process (``judges.lm.engine``) or choose which LM a judge uses (``judges.lm.resolve``).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import re
import threading
import time
from collections import Counter
from typing import Any

import dspy
from dspy.utils.exceptions import (
    ContextWindowExceededError,
    LMAuthError,
    LMBillingError,
    LMConfigurationError,
    LMInvalidRequestError,
    LMLockTimeoutError,
    LMProviderError,
    LMRateLimitError,
    LMServerError,
    LMTimeoutError,
    LMTransportError,
    LMUnsupportedFeatureError,
)

from judges.lm.schemas import bounded_schema

#: Failures worth another attempt: the provider or the network, not the request.
TRANSIENT = (LMRateLimitError, LMServerError, LMTimeoutError, LMTransportError, LMLockTimeoutError)
#: Failures no retry can fix and that concern every request: stop the run.
PERMANENT = (LMAuthError, LMBillingError, LMInvalidRequestError, LMConfigurationError, LMUnsupportedFeatureError)


#: The longest Retry-After honoured (seconds); a provider asking for more is waited on this long.
MAX_RETRY_AFTER = 300.0


class PermanentLMError(RuntimeError):
    """The LM refused in a way no retry fixes (bad request, authentication, billing, unknown model)."""


class EmptyCompletionError(RuntimeError):
    """The LM answered 200 with nothing in it."""


class RetryBudgetExhausted(RuntimeError):
    """Too many retries for this endpoint compared with its successful calls."""


def failure_kind(error: BaseException) -> str:
    """"transient", "permanent" or "item" (the request's own problem: fail it, do not retry, go on)."""
    if isinstance(error, ContextWindowExceededError):
        return "item"
    if isinstance(error, PERMANENT):
        return "permanent"
    if isinstance(error, (*TRANSIENT, EmptyCompletionError)):
        return "transient"
    if type(error) is LMProviderError:  # a reply that is not JSON or is cut short: the transport, not the request
        return "transient"
    return "item"


class EndpointLimits:
    """Concurrency, request rate and retry budget of one endpoint, shared by threads."""

    def __init__(self, max_concurrency: int, max_rps: float | None, retry_budget: float, min_retries: int):
        self.slots = threading.BoundedSemaphore(max_concurrency)
        self.max_rps, self.retry_budget, self.min_retries = max_rps, retry_budget, min_retries
        self._lock = threading.Lock()
        self._next_start = 0.0
        self.stats: Counter = Counter()

    def acquire(self) -> None:
        """Wait for a free slot, then for the next start time the rate allows."""
        self.slots.acquire()
        if self.max_rps:
            with self._lock:
                now = time.monotonic()
                start = max(now, self._next_start)
                self._next_start = start + 1.0 / self.max_rps
            if start > now:
                time.sleep(start - now)

    def release(self) -> None:
        self.slots.release()

    def spend_retry(self) -> bool:
        """Take one retry from the budget: ``min_retries + retry_budget * successful calls``."""
        with self._lock:
            allowed = self.min_retries + self.retry_budget * self.stats["succeeded"]
            if self.stats["retries"] + 1 > allowed:
                self.stats["retries_refused"] += 1
                return False
            self.stats["retries"] += 1
            return True

    def count(self, key: str) -> None:
        with self._lock:
            self.stats[key] += 1


_LIMITS: dict[tuple[str, str], EndpointLimits] = {}
_LIMITS_LOCK = threading.Lock()


def endpoint_limits(model: str, api_base: str | None, **settings: Any) -> EndpointLimits:
    """The shared limits of ``model`` at ``api_base`` (created with ``settings`` on first use)."""
    key = (model, api_base or "")
    with _LIMITS_LOCK:
        if key not in _LIMITS:
            _LIMITS[key] = EndpointLimits(**settings)
        return _LIMITS[key]


def forget_endpoint_limits() -> None:
    """Drop every endpoint's shared limits and counters: the next ``ServedLM`` of an endpoint starts afresh
    (tests and benchmarks that reuse a port with other settings)."""
    with _LIMITS_LOCK:
        _LIMITS.clear()


def _empty(outputs: Any) -> bool:
    """An answer without text or tool calls: DSPy's list of outputs, or an ``lm15.Response`` (a Request call)."""
    if hasattr(outputs, "finish_reason") and hasattr(outputs, "text"):  # lm15.Response
        text = outputs.text
        return isinstance(text, str) and not text.strip() and not getattr(outputs, "tool_calls", None)
    if not isinstance(outputs, list) or not outputs:
        return False
    texts = [o.get("text") if isinstance(o, dict) else o for o in outputs]
    tools = [o.get("tool_calls") for o in outputs if isinstance(o, dict)]
    return all(isinstance(t, str) and not t.strip() for t in texts) and not any(tools)


#: MLflow's model URI spelling, ``<provider>:/<model>`` (``openai:/gpt-4o-mini``), read as LiteLLM's
#: ``<provider>/<model>``; ``://`` (a URL) is not one.
MLFLOW_MODEL_URI = re.compile(r"^(?P<provider>[A-Za-z][\w.-]*):/(?!/)(?P<model>.+)$")


def litellm_model(model: str) -> str:
    """``model`` as LiteLLM spells it: MLflow's ``openai:/gpt-4o-mini`` becomes ``openai/gpt-4o-mini``; any other
    string is returned as it is."""
    found = MLFLOW_MODEL_URI.match(model)
    return f"{found['provider']}/{found['model']}" if found else model


class ServedLM(dspy.LM):
    """A ``dspy.LM`` for an LM behind HTTP, with per-endpoint limits and retries (see the module docstring).

    ``ServedLM("openai/gpt-4o-mini")``; ``ServedLM("openai/smollm2", api_base="http://127.0.0.1:8000/v1",
    api_key_env="MY_KEY", max_concurrency=16, max_rps=10)``. Every other keyword goes to ``dspy.LM``.
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        max_concurrency: int = 16,
        max_rps: float | None = None,
        retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        retry_budget: float = 0.5,
        min_retries: int = 20,
        request_timeout: float | None = 120.0,
        response_schema: str | None = None,
        max_string_chars: int = 400,
        max_items: int = 16,
        **kwargs: Any,
    ):
        if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 1:
            raise ValueError(f"ServedLM: max_concurrency must be a positive int, got {max_concurrency!r}")
        if max_rps is not None and not (isinstance(max_rps, (int, float)) and max_rps > 0):
            raise ValueError(f"ServedLM: max_rps must be a positive number or None, got {max_rps!r}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"ServedLM: retries must be an int >= 0, got {retries!r}")
        if response_schema not in (None, "json_schema", "json_object"):
            raise ValueError(f"ServedLM: response_schema must be None, 'json_schema' or 'json_object', got "
                             f"{response_schema!r}")
        if api_key_env is not None:
            if api_key is not None:
                raise ValueError("ServedLM: give api_key or api_key_env, not both")
            if not os.environ.get(api_key_env):
                raise ValueError(f"ServedLM: the environment variable {api_key_env} (api_key_env) is not set")
            api_key = os.environ[api_key_env]
        client = {k: v for k, v in (("api_base", api_base), ("api_key", api_key)) if v is not None}
        if request_timeout is not None:
            client["timeout"] = request_timeout
        super().__init__(litellm_model(model), num_retries=0, **client, **kwargs)
        self.api_base, self.api_key_env = api_base, api_key_env
        self.max_concurrency, self.max_rps, self.retries = max_concurrency, max_rps, retries
        self.backoff, self.max_backoff, self.request_timeout = backoff, max_backoff, request_timeout
        self.retry_budget, self.min_retries = retry_budget, min_retries
        self.response_schema, self.max_string_chars, self.max_items = response_schema, max_string_chars, max_items
        self._random = random.Random()

    def config(self) -> dict[str, Any]:
        """The settings that rebuild this LM in another process (``ServedLM(**config)``, e.g. on Ray workers):
        never the key itself. A key given as ``api_key`` cannot travel; ``api_key_env`` can (each process
        reads the variable from its own environment)."""
        if self.kwargs.get("api_key") and not self.api_key_env:
            raise ValueError("ServedLM: a key given as api_key cannot be sent to other processes; give "
                             "api_key_env=NAME and set NAME where they run")
        extra = {k: v for k, v in self.kwargs.items() if k not in ("api_key", "api_base", "timeout", "num_retries")
                 and v is not None}
        return {"model": self.model, "api_base": self.api_base, "api_key_env": self.api_key_env,
                "max_concurrency": self.max_concurrency, "max_rps": self.max_rps, "retries": self.retries,
                "backoff": self.backoff, "max_backoff": self.max_backoff, "retry_budget": self.retry_budget,
                "min_retries": self.min_retries, "request_timeout": self.request_timeout,
                "response_schema": self.response_schema, "max_string_chars": self.max_string_chars,
                "max_items": self.max_items, "cache": self.cache, **extra}

    @property
    def supports_response_schema(self) -> bool:
        return True if self.response_schema else super().supports_response_schema

    @property
    def supported_params(self) -> set[str]:
        return super().supported_params | ({"response_format"} if self.response_schema else set())

    def _response_format(self, fmt: Any) -> Any:
        """The adapter's structured-output format as this server takes it, every string and list bounded."""
        if self.response_schema is None or fmt is None:
            return fmt
        if isinstance(fmt, type) and hasattr(fmt, "model_json_schema"):
            schema = fmt.model_json_schema()
        elif isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            schema = (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema")
        else:
            return fmt  # plain JSON mode: as it is
        schema = bounded_schema(schema, self.max_string_chars, self.max_items)
        if self.response_schema == "json_object":
            return {"type": "json_object", "schema": schema}
        return {"type": "json_schema", "json_schema": {"name": "output", "schema": schema, "strict": False}}

    @property
    def limits(self) -> EndpointLimits:
        return endpoint_limits(self.model, self.api_base, max_concurrency=self.max_concurrency, max_rps=self.max_rps,
                               retry_budget=self.retry_budget, min_retries=self.min_retries)

    def __repr__(self) -> str:  # never the key
        return f"ServedLM({self.model!r}, api_base={self.api_base!r})"

    def delay(self, error: BaseException, attempt: int) -> float:
        """Seconds before retry ``attempt + 1``: exponential with jitter (half to all of the step), never
        sooner than the provider's ``Retry-After``."""
        step = min(self.max_backoff, self.backoff * 2**attempt)
        wait = step * (0.5 + 0.5 * self._random.random())
        hint = getattr(error, "retry_after", None)
        if isinstance(hint, (int, float)) and hint > 0:  # the provider's word, not capped by max_backoff
            wait = max(wait, min(float(hint), MAX_RETRY_AFTER) * (1.0 + 0.1 * self._random.random()))
        return wait

    def __call__(self, prompt=None, *, messages=None, **kwargs):
        """DSPy's call, with limits and retries: a prompt string, a ``dspy.lm15.Request`` (DSPy's request API,
        what DSPy 3.5 keeps), or the ``messages=`` DSPy 3.4's adapters still pass (forwarded only when given, so
        a DSPy without that argument is never sent it)."""
        if messages is not None:
            kwargs["messages"] = messages
        if "response_format" in kwargs:
            kwargs["response_format"] = self._response_format(kwargs["response_format"])
        if self.api_base and kwargs.get("cache", self.cache):
            kwargs["rollout_id"] = self._endpoint_rollout(kwargs.get("rollout_id", self.kwargs.get("rollout_id")))
        limit = kwargs.get("max_tokens", self.kwargs.get("max_tokens"))
        if self.api_base and limit is not None:
            # DSPy sends OpenAI's newer max_completion_tokens, which llama.cpp's and other self-hosted servers
            # ignore: without max_tokens a small model rambles until its context is full (4,000 tokens, minutes)
            kwargs["extra_body"] = {**(kwargs.get("extra_body") or {}), "max_tokens": limit}
        limits = self.limits
        attempt = 0
        while True:
            limits.acquire()
            try:
                limits.count("attempts")
                outputs = super().__call__(prompt, **kwargs)
                error: BaseException | None = None
                if _empty(outputs):
                    error = EmptyCompletionError(f"[{self.model}] the LM answered with an empty completion")
                    kwargs = {**kwargs, "cache": False}  # the empty answer is cached: ask the LM itself again
            except Exception as exc:  # classified below; anything unknown is re-raised as it is
                outputs, error = None, exc
            finally:
                limits.release()
            if error is None:
                limits.count("succeeded")
                return outputs
            limits.count(f"failed.{type(error).__name__}")
            kind = failure_kind(error)
            if kind == "permanent":
                raise PermanentLMError(f"{type(error).__name__}: {error}") from error
            if kind != "transient" or attempt >= self.retries:
                error.retried_by_served_lm = attempt  # evaluate() does not retry it again
                raise error
            if not limits.spend_retry():
                error.retried_by_served_lm = attempt
                raise RetryBudgetExhausted(
                    f"[{self.model}] retry budget exhausted ({limits.stats['retries']} retries for "
                    f"{limits.stats['succeeded']} successful calls); last error {type(error).__name__}: {error}"
                ) from error
            time.sleep(self.delay(error, attempt))
            attempt += 1

    def _endpoint_rollout(self, rollout_id: Any) -> int:
        """A ``rollout_id`` that also names this LM's endpoint. DSPy's disk cache leaves ``api_base`` out of its
        key, so two servers under one model string would share answers; ``rollout_id`` is the one setting DSPy
        puts in the key and never sends. The caller's own rollout still gives entries of their own."""
        self._warned_zero_temp_rollout = True  # DSPy's "no effect at temperature 0" is not about this id
        digest = hashlib.sha256(f"{self.api_base}\x00{rollout_id!r}".encode()).digest()
        return int.from_bytes(digest[:7], "big")

    async def acall(self, prompt=None, *, messages=None, **kwargs):
        if messages is not None:
            kwargs["messages"] = messages
        return await asyncio.to_thread(self.__call__, prompt, **kwargs)
