"""JSON schemas of judge outputs made safe for constrained decoding, and JSON answers cut short mended.

Owns: bounding a schema so every grammar-constrained completion closes (``bounded_schema``), per-call
constraints on output fields (``output_constraints``), and closing a cut-off answer (``salvage_json``).
Used by the in-process engine and by served LMs with a response schema. Must not call an LM.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from typing import Any

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



def current_output_constraints() -> dict[str, dict[str, Any]]:
    """The constraints set by the innermost ``output_constraints`` block (empty outside any)."""
    return _OUTPUT_CONSTRAINTS.get()



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
