"""MLflow's evaluation fields (``inputs``, ``outputs``, ``expectations``, the trace) as our sample fields, and
where each field comes from in MLflow, said when one is missing.

``retrieved_contexts`` are the trace's RETRIEVER documents, else ``expectations['retrieved_context']``;
``reference`` is ``expected_response``, else the joined ``expected_facts``; ``user_input`` the question in
``inputs`` and ``response`` the answer in ``outputs`` (a text, or one of the keys below).

Owns: the MLflow field -> sample field mapping. Must not score (``judges_app.mlflow_scorers``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mlflow.entities import SpanType

from judges.data.samples import SampleValidationError

#: Keys of MLflow's ``inputs`` holding the user's question, in the order they are looked at.
QUESTION_KEYS = ("question", "query", "user_input", "input", "prompt")
#: Keys of MLflow's ``outputs`` holding the answer, in the order they are looked at.
ANSWER_KEYS = ("response", "answer", "output", "content", "text")


class MlflowFieldError(ValueError):
    """An MLflow field that holds something we cannot read as a sample field (the message names it)."""


def _text(value: Any) -> str | None:
    """A non-empty string, else None (numbers and other shapes are not text here)."""
    return value if isinstance(value, str) and value.strip() else None


def _last_user_message(messages: Any) -> str | None:
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role") == "user":
            return _text(message.get("content"))
    return None


def question_of(inputs: Any) -> str | None:
    """The user's question in MLflow's ``inputs``: a plain string, a dict's ``question`` / ``query`` /
    ``user_input`` / ``input`` / ``prompt``, or the last user message of ``messages``; None when absent."""
    if isinstance(inputs, str):
        return _text(inputs)
    if not isinstance(inputs, Mapping):
        return None
    for key in QUESTION_KEYS:
        if _text(inputs.get(key)):
            return inputs[key]
        if isinstance(inputs.get(key), list):  # "input": [{"role": "user", ...}] (Responses API)
            found = _last_user_message(inputs[key])
            if found:
                return found
    return _last_user_message(inputs.get("messages"))


def answer_of(outputs: Any) -> str | None:
    """The answer in MLflow's ``outputs``: a string, a dict's ``response`` / ``answer`` / ``output`` /
    ``content`` / ``text``, or an OpenAI-style ``choices[0].message.content``; None when absent. An empty
    answer stays ``""``: a judge scores it as a bad answer (its floor, with an ``undefined_reason``)."""
    if isinstance(outputs, str):
        return outputs
    if not isinstance(outputs, Mapping):
        return None
    for key in ANSWER_KEYS:
        if isinstance(outputs.get(key), str):
            return outputs[key]
    choices = outputs.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        message = choices[0].get("message")
        content = message.get("content") if isinstance(message, Mapping) else None
        return content if isinstance(content, str) else None
    return None


def _document_text(document: Any) -> str | None:
    if isinstance(document, str):
        return _text(document)
    if isinstance(document, Mapping):
        return _text(document.get("page_content")) or _text(document.get("content"))
    return _text(getattr(document, "page_content", None))


def retrieved_documents(trace: Any) -> list[str] | None:
    """The text of every document the trace's RETRIEVER spans returned, in span order; None when the trace
    has no retriever span (or is None)."""
    if trace is None:
        return None
    spans = trace.search_spans(span_type=SpanType.RETRIEVER)
    if not spans:
        return None
    texts = []
    for span in spans:
        outputs = span.outputs if isinstance(span.outputs, list) else [span.outputs]
        texts.extend(text for text in map(_document_text, outputs) if text)
    return texts


def _text_list(value: Any, field: str) -> list[str] | None:
    if value is None:
        return None
    items = value if isinstance(value, list) else [value]
    texts = [_document_text(item) for item in items]
    if not all(texts):
        raise MlflowFieldError(f"expectations['{field}'] must be text or documents, got {value!r}"[:200])
    return texts


def reference_of(expectations: Mapping[str, Any]) -> str | None:
    """``expected_response``, else the ``expected_facts`` joined into one text ("fact 1; fact 2")."""
    if expectations.get("expected_response") is not None:
        value = expectations["expected_response"]
        if not isinstance(value, str):
            raise MlflowFieldError(f"expectations['expected_response'] must be text, got {type(value).__name__}")
        return value
    facts = expectations.get("expected_facts")
    if facts is None:
        return None
    if not isinstance(facts, list) or not all(isinstance(f, str) for f in facts):
        raise MlflowFieldError(f"expectations['expected_facts'] must be a list of texts, got {facts!r}"[:200])
    return "; ".join(facts)


def sample_fields(inputs: Any = None, outputs: Any = None, expectations: Any = None, trace: Any = None) -> dict:
    """``SingleTurnSample`` fields from MLflow's evaluation fields; fields MLflow does not carry are left out.

    ``retrieved_contexts`` are the trace's RETRIEVER documents, else ``expectations['retrieved_context']``;
    ``reference`` is ``expected_response``, else the joined ``expected_facts``; ``reference_contexts`` come
    from ``expectations['reference_contexts']``."""
    expectations = expectations if isinstance(expectations, Mapping) else {}
    contexts = retrieved_documents(trace)
    if contexts is None:
        contexts = _text_list(expectations.get("retrieved_context"), "retrieved_context")
    fields = {"user_input": question_of(inputs), "response": answer_of(outputs), "retrieved_contexts": contexts,
              "reference": reference_of(expectations),
              "reference_contexts": _text_list(expectations.get("reference_contexts"), "reference_contexts")}
    return {name: value for name, value in fields.items() if value is not None}


#: Where each sample field comes from in MLflow, said when it is missing (how to fix the trace or the row).
FIELD_SOURCES = {
    "retrieved_contexts": "a RETRIEVER span in the trace (@mlflow.trace(span_type=\"RETRIEVER\") on the retriever, "
                          "returning the documents), or expectations['retrieved_context'] holding the texts",
    "reference": "expectations['expected_response'] (or expectations['expected_facts'])",
    "reference_contexts": "expectations['reference_contexts'] holding the texts",
    "user_input": f"the question in inputs (a text, or one of the keys {', '.join(QUESTION_KEYS)})",
    "response": f"the answer in outputs (a text, or one of the keys {', '.join(ANSWER_KEYS)})",
}


def missing_field_message(err: SampleValidationError) -> str:
    """``err``'s message, with where MLflow would carry each field it names."""
    hints = [f"{field} comes from {source}" for field, source in FIELD_SOURCES.items() if f"'{field}'" in str(err)]
    return str(err) + (f". In MLflow, {'; '.join(hints)}" if hints else "")
