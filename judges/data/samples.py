"""Evaluation samples: one single-turn RAG/QA interaction or one multi-turn agent conversation.

The field names follow Ragas (``user_input``, ``retrieved_contexts``, ``response``, ``reference`` ...)
so that datasets users already have load unchanged. Every sample is a pydantic model: a wrong type or an
unknown field raises :class:`SampleValidationError`, whose message names the field.

Owns: the sample and message models and their validation. Must not score anything.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)


def problem_lines(problems: Sequence[tuple[int | None, str, str]], where: Callable[[int | None], str],
                  shown: int = 3) -> list[str]:
    """Sample problems as lines, one per field and message rather than one per row: where it happens (``where``
    names a sample index; the first ``shown`` of them) and how many more."""
    by_kind: dict[tuple[str, str], list[int | None]] = {}
    for index, field, message in problems:
        by_kind.setdefault((field, message), []).append(index)
    lines = []
    for (field, message), indices in by_kind.items():
        more = f" (and {len(indices) - shown} more)" if len(indices) > shown else ""
        lines.append(f"{', '.join(where(i) for i in indices[:shown])}{more}, field '{field}': {message}")
    return lines


class SampleValidationError(ValueError):
    """A sample (or a dataset row) does not have the shape a sample type or a metric needs.

    ``problems`` is a list of ``(index, field, message)``; ``index`` is the sample's position in its
    dataset (None for a lone sample) and ``field`` is the offending field name.
    """

    def __init__(self, problems: list[tuple[int | None, str, str]], *, metric: str | None = None):
        self.problems = list(problems)
        self.metric = metric
        who = f"{metric}: " if metric else ""
        lines = problem_lines(self.problems, lambda i: "sample" if i is None else f"sample {i}")
        super().__init__("\n".join(who + line for line in lines) if lines else "invalid sample")


def _describe_pydantic_error(error: ValidationError) -> list[tuple[str, str]]:
    out = []
    for item in error.errors():
        loc = ".".join(str(part) for part in item.get("loc", ())) or "<sample>"
        message = item.get("msg", "invalid value")
        if item.get("type") == "extra_forbidden":
            message = "unknown field (see judges.LEGACY_COLUMNS for accepted older names)"
        elif "input" in item and item.get("type") != "missing":
            shown = repr(item["input"])
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            message = f"{message} (got {type(item['input']).__name__} {shown})"
        out.append((loc, message))
    return out


_SURROGATE = re.compile("[\ud800-\udfff]")


def _unicode_problem(value: Any) -> str | None:
    """Why ``value`` (or a string inside it) is not text that can be written out, else None. JSON's
    ``"\\ud800"`` escapes decode to lone surrogates, which no file or terminal can encode."""
    if isinstance(value, str):
        found = _SURROGATE.search(value)
        return None if found is None else (f"is not valid Unicode text: a lone surrogate U+{ord(found.group()):04X} "
                                           f"at position {found.start()}")
    if isinstance(value, (list, tuple)):
        return next((p for p in map(_unicode_problem, value) if p), None)
    if isinstance(value, dict):
        return next((p for p in map(_unicode_problem, [*value.keys(), *value.values()]) if p), None)
    return None


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, str_strip_whitespace=False)

    @field_validator("*", mode="after")
    @classmethod
    def _valid_unicode(cls, value: Any) -> Any:
        problem = _unicode_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @classmethod
    def parse(cls, data: Any, *, index: int | None = None):
        """Build from a mapping (or return an instance as is); errors name the field and the index."""
        if isinstance(data, cls):
            return data
        if not isinstance(data, dict):
            raise SampleValidationError(
                [(index, "<sample>", f"expected a dict or {cls.__name__}, got {type(data).__name__}")]
            )
        try:
            return cls.model_validate(data)
        except ValidationError as err:
            raise SampleValidationError(
                [(index, loc, msg) for loc, msg in _describe_pydantic_error(err)]
            ) from None


class ToolCall(_Model):
    """A tool (function) call made by an agent."""

    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class HumanMessage(_Model):
    content: str
    type: Literal["human"] = "human"

    def pretty_repr(self) -> str:
        return f"Human: {self.content}"


class AIMessage(_Model):
    content: str = ""
    tool_calls: list[ToolCall] | None = None
    type: Literal["ai"] = "ai"

    def pretty_repr(self) -> str:
        lines = [f"AI: {self.content}"] if self.content else ["AI:"]
        for call in self.tool_calls or []:
            lines.append(f"  Tool call: {call.name}({json.dumps(call.args, ensure_ascii=False, sort_keys=True)})")
        return "\n".join(lines)


class ToolMessage(_Model):
    content: str
    type: Literal["tool"] = "tool"

    def pretty_repr(self) -> str:
        return f"Tool result: {self.content}"


Message = Annotated[Union[HumanMessage, AIMessage, ToolMessage], Field(discriminator="type")]


class _Sample(_Model):
    #: Fields that hold lists; CSV and Arrow store them as JSON text.
    json_fields: ClassVar[tuple[str, ...]] = ()

    def missing_fields(self, required: tuple[str, ...] | list[str], allow_empty: tuple[str, ...] = ()) -> list[str]:
        """The required fields that are absent (None) or empty (``""``, ``[]``); fields named in
        ``allow_empty`` only need to be present."""
        missing = []
        for name in required:
            value = getattr(self, name, None)
            empty = isinstance(value, (str, list, dict)) and len(value) == 0
            if value is None or (empty and name not in allow_empty):
                missing.append(name)
        return missing

    def to_dict(self, *, exclude_none: bool = True) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=exclude_none)


#: At most this many reference alternatives are shown to an LLM judge (EVOUNA has answers with 185 aliases).
MAX_PROMPT_ALTERNATIVES = 20


class SingleTurnSample(_Sample):
    """One question/answer interaction, optionally with retrieval (RAG).

    ``reference`` is one reference answer, or a list of acceptable alternatives ("June Carter Cash",
    "June Cash" ...): every reference-based metric then uses the best alternative, and LLM judges are shown
    the alternatives as such (``reference_for_prompt``).
    """

    user_input: str | None = None
    retrieved_contexts: list[str] | None = None
    reference_contexts: list[str] | None = None
    retrieved_context_ids: list[str | int] | None = None
    reference_context_ids: list[str | int] | None = None
    response: str | None = None
    multi_responses: list[str] | None = None
    reference: str | list[str] | None = None
    rubrics: dict[str, str] | None = None
    reference_topics: list[str] | None = None

    json_fields: ClassVar[tuple[str, ...]] = (
        "retrieved_contexts",
        "reference_contexts",
        "retrieved_context_ids",
        "reference_context_ids",
        "multi_responses",
        "rubrics",
        "reference_topics",
    )


    @field_validator("reference", mode="after")
    @classmethod
    def _one_alternative_is_a_string(cls, value: Any) -> Any:
        """A list of one alternative is that alternative; alternatives must be text."""
        if isinstance(value, list):
            if len(value) == 1:
                return value[0]
        return value

    def reference_alternatives(self) -> list[str]:
        """The acceptable reference answers: ``[reference]`` for one, the list for alternatives, [] for none."""
        if self.reference is None:
            return []
        return [self.reference] if isinstance(self.reference, str) else list(self.reference)

    def closest_reference(self, text: str) -> str | None:
        """The alternative whose words ``text`` covers best (ties: the first), for steps that decompose one
        reference into claims or entities: the response's answer, or what the contexts support."""
        alternatives = self.reference_alternatives()
        if len(alternatives) <= 1:
            return alternatives[0] if alternatives else None
        words = set(re.findall(r"\w+", text.casefold()))

        def covered(alternative: str) -> float:
            tokens = re.findall(r"\w+", alternative.casefold())
            return sum(t in words for t in tokens) / len(tokens) if tokens else 0.0

        return max(alternatives, key=covered)

    def reference_for_prompt(self, limit: int = MAX_PROMPT_ALTERNATIVES) -> str | None:
        """The reference as an LLM judge reads it: the answer itself, or the alternatives listed as such."""
        alternatives = self.reference_alternatives()
        if self.reference is None or isinstance(self.reference, str):
            return self.reference
        shown = alternatives[:limit]
        more = f" (and {len(alternatives) - limit} more)" if len(alternatives) > limit else ""
        return "Any of these acceptable answers: " + "; ".join(f"({i}) {a}" for i, a in enumerate(shown, 1)) + more


class MultiTurnSample(_Sample):
    """A conversation between a user, an AI agent and its tools."""

    user_input: list[Message]
    reference: str | None = None
    reference_tool_calls: list[ToolCall] | None = None
    rubrics: dict[str, str] | None = None
    reference_topics: list[str] | None = None

    json_fields: ClassVar[tuple[str, ...]] = ("user_input", "reference_tool_calls", "rubrics", "reference_topics")

    @model_validator(mode="after")
    def _tool_messages_follow_tool_calls(self) -> MultiTurnSample:
        # A tool result must answer a tool call made earlier in the same AI turn.
        pending = False
        for i, message in enumerate(self.user_input):
            if isinstance(message, AIMessage):
                pending = bool(message.tool_calls)
            elif isinstance(message, ToolMessage):
                if not pending:
                    raise ValueError(
                        f"user_input[{i}] is a ToolMessage, but no AIMessage with tool_calls comes before it"
                    )
            else:
                pending = False
        return self

    def pretty_repr(self, max_message_chars: int | None = None) -> str:
        """The conversation as plain text, one message per line (what judges read); with
        ``max_message_chars`` each message is cut to that length (tool results can be huge)."""
        lines = []
        for message in self.user_input:
            text = message.pretty_repr()
            if max_message_chars is not None and len(text) > max_message_chars:
                text = text[:max_message_chars] + " [...]"
            lines.append(text)
        return "\n".join(lines)

    def tool_calls(self) -> list[ToolCall]:
        """Every tool call the agent made, in order."""
        return [call for m in self.user_input if isinstance(m, AIMessage) for call in m.tool_calls or []]

    def human_messages(self) -> list[HumanMessage]:
        return [m for m in self.user_input if isinstance(m, HumanMessage)]


Sample = Union[SingleTurnSample, MultiTurnSample]
