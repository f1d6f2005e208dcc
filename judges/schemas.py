"""JSON schemas of judge outputs made safe for constrained decoding (in-process llama.cpp and served LMs)."""

from __future__ import annotations

from typing import Any


def bounded_schema(schema: Any, max_string_chars: int, max_items: int, max_enum_ints: int = 256) -> Any:
    """A copy of a JSON schema whose every string, array and integer is bounded.

    A small model under a grammar can keep a string (or a list, or an integer's digits) going until
    ``max_tokens`` runs out, and the truncated JSON does not parse. Bounding them in the grammar makes
    every completion end as valid JSON: strings get ``maxLength``, arrays ``maxItems`` (a schema's own,
    tighter bound is kept; its minimums are never cut), and an integer with both ``minimum`` and
    ``maximum`` (pydantic ``ge``/``le``) becomes an ``enum`` of its values.
    """
    if isinstance(schema, list):
        return [bounded_schema(item, max_string_chars, max_items, max_enum_ints) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: bounded_schema(value, max_string_chars, max_items, max_enum_ints) for key, value in schema.items()}
    kind = out.get("type")
    if kind == "string" and not {"enum", "const", "format", "pattern"} & out.keys():
        out["maxLength"] = max(min(out.get("maxLength", max_string_chars), max_string_chars), out.get("minLength", 0))
    elif kind == "array":
        out["maxItems"] = max(min(out.get("maxItems", max_items), max_items), out.get("minItems", 0))
    elif kind == "integer" and "minimum" in out and "maximum" in out and "enum" not in out:
        low, high = int(out.pop("minimum")), int(out.pop("maximum"))
        if high - low < max_enum_ints:
            out["enum"] = list(range(low, high + 1))
        else:
            out.update(minimum=low, maximum=high)
    return out
