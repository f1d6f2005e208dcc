"""How an exported metric finds a sample's fields in DSPy's ``(example, pred)`` (``FieldResolver``).

Typed program outputs are read by one rule (``as_text``): a number becomes its shortest text (``3``, not
``3.0``; ``0.1``), a bool ``True`` / ``False``, a dict or pydantic model compact JSON; a list fills a field of
texts (contexts) item by item, is read as alternatives where a field takes them (``reference``) and is
joined one item a line where a field takes one text (``response``).

Owns: the field lookup and the text rule. Must not score (``judges.metrics.export``).
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from judges.data.samples import SampleValidationError


class FieldNotFoundError(SampleValidationError):
    """A sample field no source in ``(example, pred)`` holds (``FieldResolver.resolve``)."""


#: Where a sample field is looked up in ``(example, pred)`` when the field map does not say.
DEFAULT_FIELD_SOURCES: dict[str, tuple[str, ...]] = {
    "user_input": ("example.user_input", "example.question", "pred.user_input"),
    "response": ("pred.response", "pred.answer", "pred.output"),
    "retrieved_contexts": (
        "pred.retrieved_contexts",
        "pred.contexts",
        "pred.context",
        "example.retrieved_contexts",
        "example.contexts",
        "example.context",
    ),
    "reference": ("example.reference", "example.answer", "example.ground_truth"),
    "reference_contexts": ("example.reference_contexts",),
}


_ABSENT = object()


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip()) or (
        isinstance(value, (list, tuple, dict)) and len(value) == 0)


def as_text(value: Any) -> str:
    """A typed program output as the text a metric reads (the rule in the module docstring)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        number = float(value)
        return str(int(number)) if number.is_integer() and abs(number) < 1e16 else repr(number)
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    elif hasattr(value, "toDict"):
        value = value.toDict()
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return str(value)


class FieldResolver:
    """Builds a sample from a DSPy ``(example, pred)`` pair following a field map."""

    def __init__(self, sample_type: type, field_map: Mapping[str, str | Sequence[str]] | None = None):
        self.sample_type = sample_type
        self.sources: dict[str, tuple[str, ...]] = {}
        for name in sample_type.model_fields:
            default = DEFAULT_FIELD_SOURCES.get(name, (f"pred.{name}", f"example.{name}"))
            self.sources[name] = default
        if field_map is not None and not isinstance(field_map, Mapping):
            raise ValueError(f"field_map must be a mapping of sample fields to 'example.<attr>' / 'pred.<attr>' "
                             f"paths, got {type(field_map).__name__}")
        for name, spec in (field_map or {}).items():
            if name not in sample_type.model_fields:
                raise ValueError(f"field_map: '{name}' is not a {sample_type.__name__} field")
            specs = (spec,) if isinstance(spec, str) else tuple(spec)
            for path in specs:
                if not isinstance(path, str) or not path.startswith(("example.", "pred.")):
                    raise ValueError(f"field_map['{name}'] = {path!r}: paths start with 'example.' or 'pred.'")
            self.sources[name] = specs

    @staticmethod
    def _lookup(obj: Any, attr: str) -> Any:
        """``obj``'s ``attr``, or ``_ABSENT`` when it has no such key or attribute (None is a value)."""
        if obj is None:
            return _ABSENT
        if isinstance(obj, Mapping):
            return obj.get(attr, _ABSENT)
        try:
            if hasattr(obj, "keys") and attr in obj.keys():
                return obj[attr]
        except (KeyError, TypeError):
            pass
        try:
            return getattr(obj, attr, _ABSENT)
        except Exception:  # a Prediction raises for unknown attributes in some DSPy versions
            return _ABSENT

    def resolve(self, example: Any, pred: Any, required: Sequence[str] = ()) -> tuple[Any, list[str]]:
        """The sample, and the required fields the program left empty: present on ``pred`` (an attribute
        the field map points at) but None or empty, with no non-empty source before them. A required field
        that no source has at all is a misconfiguration: ``FieldNotFoundError`` naming where it looked; a value
        of the wrong type is a ``SampleValidationError`` naming the field."""
        objects = {"example": example, "pred": pred}
        data: dict[str, Any] = {}
        empty_outputs: list[str] = []
        for name, paths in self.sources.items():
            seen_empty_output = False
            for path in paths:
                owner, _, attr = path.partition(".")
                value = self._lookup(objects[owner], attr)
                if value is _ABSENT:
                    continue
                if _is_empty(value):
                    if owner == "pred":
                        seen_empty_output = True
                        continue
                    if value is None:
                        continue
                data[name] = self._coerce(name, value)
                break
            if name not in data and seen_empty_output and name in required:
                empty_outputs.append(name)
        missing = [name for name in required if name not in data and name not in empty_outputs]
        if missing:
            raise FieldNotFoundError([(None, name, self._not_found(name)) for name in missing])
        for name in empty_outputs:
            data[name] = [] if self._kind(name) in ("texts", "list") else ""
        return self.sample_type.parse(data), empty_outputs

    def _not_found(self, name: str) -> str:
        """Where ``name`` was looked for and how to point at it: at the example for a field read from the
        example (a reference, a question), at the prediction for one the program writes."""
        owners = {path.partition(".")[0] for path in self.sources[name]}
        where = " or ".join(f"'{owner}.<attribute>'" for owner in ("pred", "example") if owner in owners)
        producer = "the program never produces it" if owners == {"pred"} else (
            "neither the example nor the program has it" if len(owners) > 1 else "the example does not have it")
        return (f"not found: looked at {', '.join(self.sources[name])}; {producer}; say where it is with "
                f"field_map={{'{name}': {where}}}")

    def sample(self, example: Any, pred: Any, required: Sequence[str] = ()):
        """The sample a metric scores for ``(example, pred)`` (see ``resolve``)."""
        return self.resolve(example, pred, required)[0]

    def _kind(self, name: str) -> str:
        """How a field takes text: "texts" (a list of texts), "alternatives" (a text or a list of them),
        "text" (one text), "list" (messages, ids: taken as they are) or "other" (taken as it is)."""
        annotation = str(self.sample_type.model_fields[name].annotation).replace(" ", "")
        if annotation.startswith("list[str]"):
            return "texts"
        if annotation.startswith("str|list[str]"):
            return "alternatives"
        if annotation.startswith("str"):
            return "text"
        return "list" if annotation.startswith("list") else "other"

    def _coerce(self, name: str, value: Any) -> Any:
        kind = self._kind(name)
        if kind in ("list", "other"):
            return value.toDict() if hasattr(value, "toDict") else value
        if isinstance(value, (list, tuple)):
            texts = [as_text(item) for item in value]
            if kind == "text":
                return "\n".join(texts)
            return texts
        text = as_text(value)
        return [text] if kind == "texts" else text
