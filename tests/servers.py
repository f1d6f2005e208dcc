"""Loopback HTTP servers for tests and benchmarks: a real OpenAI-compatible server (llama-cpp-python's,
serving the embedded GGUF), an OpenAI-compatible mock endpoint with scripted replies and a fixed latency,
and a fault-injecting proxy to put in front of any endpoint. All bind to 127.0.0.1 on a free port; the mock
and the proxy are stdlib (``http.server``) in a background thread and count what they saw.

    with MockOpenAI(latency=0.2) as mock, FaultProxy(mock.url, rate=0.2, seed=7) as proxy:
        lm = ServedLM("openai/mock", api_base=proxy.url + "/v1", api_key="none")
        ...
        proxy.counts          # requests, faults by kind, delivered completions and their tokens
"""

from __future__ import annotations

import http.client
import json
import math
import random
import re
import select
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from judges.lm.threads import usable_cores

#: Values a scripted judge gives for each output field a DSPy signature may ask for.
CANNED = {"claims": ["the claim"], "reason": "scripted", "verdict": True, "rating": 4, "equivalent": True,
          "reference_explanation": "r", "candidate_explanation": "c", "user_goal": "know", "outcome": "knows",
          "achieved": True, "useful": True, "noncommittal": False, "questions": ["Is it so?"],
          "answers": [True], "keyphrases": ["key"], "entities": ["Paris"], "sentences": ["It is so."]}


def asked_fields(prompt: str) -> list[str]:
    """The output fields a ChatAdapter / JSONAdapter prompt asks for, in order."""
    tail = prompt.split("Respond with the corresponding output fields")[-1]
    found = re.findall(r"`\[\[ ## (\w+) ## \]\]`", tail)
    if found:
        return [f for f in found if f != "completed"]
    tail = prompt.split("Respond with a JSON object")[-1]
    return re.findall(r"`(\w+)`", tail)


def scripted_reply(prompt: str) -> dict[str, Any]:
    """Field values for whatever a judge step asks: verdicts are one supported verdict per claim given."""
    out: dict[str, Any] = {}
    for name in asked_fields(prompt):
        if name == "verdicts":
            claims = re.findall(r'"([^"]+)"', prompt.split("[[ ## claims ## ]]")[-1].split("[[")[0]) or ["the claim"]
            out[name] = [{"claim": c, "reason": "r", "supported": True} for c in claims]
        elif name in CANNED:
            out[name] = CANNED[name]
    return out


def schema_instance(schema: dict[str, Any], root: dict[str, Any] | None = None) -> Any:
    """A small valid instance of a JSON schema ($refs, objects, arrays of one item, strings, numbers, bools,
    enums): what a scripted LM answers to a prompt that carries the schema its answer must follow."""
    root = root or schema
    if "$ref" in schema:
        return schema_instance(root.get("$defs", root.get("definitions", {})).get(schema["$ref"].split("/")[-1], {}), root)
    for combined in ("anyOf", "oneOf", "allOf"):
        if combined in schema:
            options = [o for o in schema[combined] if o.get("type") != "null"] or schema[combined]
            return schema_instance(options[0], root)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type", "object")
    if kind == "object":
        return {name: schema_instance(prop, root) for name, prop in (schema.get("properties") or {}).items()}
    if kind == "array":
        return [schema_instance(schema.get("items") or {"type": "string"}, root)]
    return {"string": "scripted", "integer": 1, "number": 1.0, "boolean": True, "null": None}.get(kind, "scripted")


def schema_in_prompt(prompt: str) -> dict[str, Any] | None:
    """The last whole JSON schema a prompt quotes (Ragas and similar libraries put the output schema in the
    text): outermost objects only, so a schema's own ``$defs`` are never taken for the schema."""
    decoder = json.JSONDecoder()
    found_last, position = None, 0
    while (start := prompt.find("{", position)) != -1:
        try:
            found, end = decoder.raw_decode(prompt, start)
        except ValueError:
            position = start + 1
            continue
        if isinstance(found, dict) and ("properties" in found or "$defs" in found) and found.get("type", "object") == "object":
            found_last = found
        position = end
    return found_last


def chat_text(fields: dict[str, Any], json_mode: bool) -> str:
    if json_mode:
        return json.dumps(fields)
    return "".join(f"[[ ## {k} ## ]]\n{json.dumps(v) if isinstance(v, (list, dict)) else v}\n\n"
                   for k, v in fields.items()) + "[[ ## completed ## ]]"


def completion(model: str, text: str, prompt_tokens: int) -> dict[str, Any]:
    completion_tokens = len(text.split())
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


class _Server:
    """A ThreadingHTTPServer on 127.0.0.1:<free port> in a daemon thread; a context manager."""

    handler: type[BaseHTTPRequestHandler]

    def __enter__(self):
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self.handler)
        self._httpd.daemon_threads = True
        self._httpd.owner = self
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._httpd.shutdown()
        self._httpd.server_close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))


class MockOpenAI(_Server):
    """``POST /v1/chat/completions`` answering every DSPy judge step with valid fields after ``latency``
    seconds; ``GET /v1/models``. Counts requests and tokens (one token per whitespace-separated word):
    ``counts["requests"]`` are the completions it answered. ``extra(prompt)`` gives seconds more for some
    prompts; ``math.inf`` holds the request until ``release()`` (or the server closes), then answers 503
    without counting it (``counts["released"]``): a call the LM never answered."""

    def __init__(self, latency: float = 0.2, model: str = "mock", extra=None):
        self.latency, self.model, self.extra = latency, model, extra
        self.released = threading.Event()
        self.lock = threading.Lock()
        self.counts: Counter = Counter()
        self.in_flight = 0
        self.starts: list[float] = []  # when each request arrived (monotonic)

    def release(self) -> None:
        """Let held requests go (each answers 503, uncounted); later requests are held no more."""
        self.extra = None
        self.released.set()

    def __exit__(self, *exc):
        self.released.set()
        super().__exit__(*exc)

    class handler(_Handler):
        def do_GET(self):
            self._send(200, json.dumps({"object": "list", "data": [{"id": self.server.owner.model}]}).encode())

        def do_POST(self):
            owner = self.server.owner
            request = json.loads(self._body() or b"{}")
            if self.path.rstrip("/").endswith("/embeddings"):
                return self._embeddings(owner, request)
            prompt = "\n".join(str(m.get("content") or "") for m in request.get("messages", []))
            with owner.lock:
                owner.in_flight += 1
                owner.counts["max_in_flight"] = max(owner.counts["max_in_flight"], owner.in_flight)
                owner.starts.append(time.monotonic())
            wait = owner.extra(prompt) if owner.extra is not None else 0.0
            try:
                time.sleep(owner.latency)
                if wait == math.inf:
                    owner.released.wait()
                elif wait:
                    time.sleep(wait)
            finally:
                with owner.lock:
                    owner.in_flight -= 1
            if wait == math.inf:
                with owner.lock:
                    owner.counts["released"] += 1
                return self._send(503, b'{"error": {"message": "released"}}')
            json_mode = (request.get("response_format") or {}).get("type") in ("json_object", "json_schema")
            fields = scripted_reply(prompt)
            schema = None if fields else schema_in_prompt(prompt)
            text = json.dumps(schema_instance(schema)) if schema is not None else chat_text(fields, json_mode)
            body = completion(owner.model, text, len(prompt.split()))
            with owner.lock:
                owner.counts["requests"] += 1
                owner.counts["prompt_tokens"] += body["usage"]["prompt_tokens"]
                owner.counts["completion_tokens"] += body["usage"]["completion_tokens"]
            self._send(200, json.dumps(body).encode())

        def _embeddings(self, owner, request):
            """Deterministic 16-dimensional vectors from the text's hash (``POST /v1/embeddings``)."""
            texts = request.get("input")
            texts = [texts] if isinstance(texts, str) else list(texts or [])
            data = []
            for i, text in enumerate(texts):
                rng = random.Random(str(text))
                data.append({"object": "embedding", "index": i, "embedding": [rng.uniform(-1, 1) for _ in range(16)]})
            tokens = sum(len(str(t).split()) for t in texts)
            with owner.lock:
                owner.counts["embedding_requests"] += 1
                owner.counts["embedding_tokens"] += tokens
            self._send(200, json.dumps({"object": "list", "data": data, "model": owner.model,
                                        "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}).encode())


#: The faults a FaultProxy injects, each at ``rate / len(FAULTS)`` per request.
FAULTS = ("rate_limited", "server_error", "reset", "slow", "cut_body", "not_json", "empty_completion")
#: A well-formed completion whose content is not what was asked (no field parses): the LM answered and was
#: paid, the item fails. Injected only when asked (``kinds=`` or ``schedule=``): no retry fixes it.
GARBAGE = "garbage"
#: Faults that a client cannot recover from by retrying; injected only when asked (``permanent=``).
PERMANENT = {"bad_request": 400, "unauthorized": 401}


class FaultProxy(_Server):
    """Forwards ``/v1/*`` to ``upstream`` and, at a seeded ``rate``, answers instead with a fault drawn from
    ``kinds`` (default ``FAULTS``): 429 with ``Retry-After``, 500/503, a connection reset, a reply slower
    than ``slow_seconds``, a body cut mid-JSON, a 200 that is not JSON, an empty completion; and, when
    asked, ``GARBAGE`` (a delivered completion whose content parses as nothing). ``schedule={n: kind}`` injects ``kind`` on the n-th request (1-based), including the permanent ones
    (``"bad_request"`` 400, ``"unauthorized"`` 401). ``counts`` holds requests, faults by kind,
    ``delivered`` (intact completions the client was still there to take, a slow one included; by fault in
    ``delivered.<kind>``) and their prompt/completion tokens, and ``client_gone`` (replies whose client had
    hung up)."""

    def __init__(self, upstream: str, *, rate: float = 0.2, seed: int = 0, kinds: tuple[str, ...] = FAULTS,
                 schedule: dict[int, str] | None = None, retry_after: float = 0.05, slow_seconds: float = 5.0):
        self.upstream = urlsplit(upstream)
        self.rate, self.kinds, self.schedule = rate, tuple(kinds), dict(schedule or {})
        self.retry_after, self.slow_seconds = retry_after, slow_seconds
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.counts: Counter = Counter()

    def _decide(self) -> str | None:
        with self.lock:
            self.counts["requests"] += 1
            number = self.counts["requests"]
            if number in self.schedule:
                return self.schedule[number]
            roll = self.random.random()
        if roll < self.rate:
            return self.kinds[int(roll / self.rate * len(self.kinds)) % len(self.kinds)]
        return None

    def _forward(self, method: str, path: str, body: bytes, headers) -> tuple[int, bytes]:
        connection = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=600)
        try:
            connection.request(method, path, body=body or None,
                               headers={k: v for k, v in headers.items() if k.lower() in ("content-type", "authorization")})
            answer = connection.getresponse()
            return answer.status, answer.read()
        finally:
            connection.close()

    class handler(_Handler):
        def do_GET(self):
            status, body = self.server.owner._forward("GET", self.path, b"", self.headers)
            self._send(status, body)

        def do_POST(self):
            proxy, body = self.server.owner, self._body()
            fault = proxy._decide()
            if fault is not None:
                with proxy.lock:
                    proxy.counts[f"fault.{fault}"] += 1
            if fault in PERMANENT:
                message = {"error": {"message": f"injected {fault}", "type": "invalid_request_error"}}
                return self._send(PERMANENT[fault], json.dumps(message).encode())
            if fault == "rate_limited":
                return self._send(429, b'{"error": {"message": "slow down"}}',
                                  {"Retry-After": f"{proxy.retry_after:g}"})
            if fault == "server_error":
                return self._send(random.choice([500, 503]), b'{"error": {"message": "upstream trouble"}}')
            if fault == "reset":
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()  # RST instead of an answer
                self.close_connection = True
                return None
            if fault == "slow":
                time.sleep(proxy.slow_seconds)
            status, answer = proxy._forward("POST", self.path, body, self.headers)
            if fault == "cut_body":
                return self._send(status, answer[: len(answer) // 2])
            if fault == "not_json":
                return self._send(200, b"<html><body>502 Bad Gateway (from a cache in between)</body></html>")
            if fault == GARBAGE and status == 200:
                data = json.loads(answer)
                data["choices"][0]["message"]["content"] = "}}]] no fields here, only noise {{["
                answer = json.dumps(data).encode()  # delivered intact, usage and all
            if fault == "empty_completion" and status == 200:
                data = json.loads(answer)
                data["choices"][0]["message"]["content"] = ""
                answer = json.dumps(data).encode()  # delivered intact as JSON, with its usage: it cost tokens
            # A client that gave up waiting (its own timeout: a slow fault, or a loaded machine) has hung up, and
            # a reply written now reaches no one: counted as ``client_gone``, never as delivered. A reply is
            # counted before it is written (so no client can see it uncounted) and uncounted if the write fails.
            gone = self._client_gone()
            if not gone:
                self._count(status, fault, answer, +1)
                try:
                    self._send(status, answer)
                except (BrokenPipeError, ConnectionResetError):
                    self._count(status, fault, answer, -1)
                    gone = True
            if gone:
                self.close_connection = True
                with proxy.lock:
                    proxy.counts["client_gone"] += 1

        def _count(self, status: int, fault: str | None, answer: bytes, sign: int) -> None:
            if status != 200:
                return
            proxy, usage = self.server.owner, json.loads(answer).get("usage") or {}
            with proxy.lock:
                proxy.counts["delivered"] += sign
                if fault is not None:  # an empty or garbage completion, or a slow one, that reached the client
                    proxy.counts[f"delivered.{fault}"] += sign
                proxy.counts["prompt_tokens"] += sign * usage.get("prompt_tokens", 0)
                proxy.counts["completion_tokens"] += sign * usage.get("completion_tokens", 0)

        def _client_gone(self) -> bool:
            """Whether the client has closed its end. An HTTP/1.1 client sends nothing while it waits for its
            reply, so a readable socket here is its end of file (or a reset)."""
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            try:
                return self.connection.recv(1, socket.MSG_PEEK) == b""
            except OSError:
                return True


class LlamaServer:
    """``python -m llama_cpp.server`` serving ``model_path`` as ``alias`` on a free loopback port, its output
    in ``log``; waits (bounded) until ``/v1/models`` answers; stopped on exit (terminate, then kill)."""

    def __init__(self, model_path: str | Path, log: str | Path, *, alias: str = "smollm2", n_ctx: int = 4096,
                 n_threads: int | None = None, startup_seconds: float = 180.0):
        self.model_path, self.log, self.alias = Path(model_path), Path(log), alias
        self.n_ctx, self.startup_seconds = n_ctx, startup_seconds
        self.n_threads = n_threads or usable_cores()  # a server on a pinned test worker: that worker's cores

    def __enter__(self):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_base, self.model = self.url + "/v1", f"openai/{self.alias}"
        self._handle = open(self.log, "w")
        self.process = subprocess.Popen(
            # the server's models load as the engine's do (weight_repacking: llama.cpp's AMX path crashes)
            [sys.executable, "-c", "import runpy\nfrom judges.lm.engine import weight_repacking\n"
             "with weight_repacking():\n    runpy.run_module('llama_cpp.server', run_name='__main__')",
             "--model", str(self.model_path), "--host", "127.0.0.1", "--port", str(self.port),
             "--model_alias", self.alias, "--n_ctx", str(self.n_ctx), "--n_threads", str(self.n_threads),
             "--n_threads_batch", str(self.n_threads)],
            stdout=self._handle, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.startup_seconds
        while True:
            if self.process.poll() is not None:
                self.__exit__()
                raise RuntimeError(f"llama_cpp.server exited ({self.process.returncode}); log {self.log}:\n"
                                   f"{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url + "/v1/models", timeout=2):
                    return self
            except OSError:
                if time.monotonic() > deadline:
                    self.__exit__()
                    raise RuntimeError(f"llama_cpp.server did not answer within {self.startup_seconds:g} s; log "
                                       f"{self.log}:\n{self.log.read_text()[-3000:]}") from None
                time.sleep(0.5)

    def __exit__(self, *exc):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._handle.close()
