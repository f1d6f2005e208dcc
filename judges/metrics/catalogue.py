"""Every metric the library exports, by name: the one registry that the command line, compiled-judge
loading (``calibration.compiled``) and the experiments look metric names up in.

    metric_classes()["faithfulness"]      # -> judges.metrics.rag.answer.Faithfulness
    metric_classes()["context_precision"] # an alias -> LLMContextPrecisionWithReference

Names are the snake-case class names (``metric.name``); Ragas's aliases (``ContextPrecision`` ...) are names
of their own that resolve to the class they stand for.

Must not import anything a caller names: names resolve only to the families' classes.
"""

from __future__ import annotations

import inspect

from judges.metrics import (
    agent,
    custom,
    domain,
    dual_judge,
    grounding,
    rag,
    retrieval,
    text,
    tools,
)
from judges.metrics.base import Metric, snake_case

#: The metric families, one module or folder each (a folder's public names are in its ``__init__``).
FAMILIES = (rag, dual_judge, custom, agent, domain, text, retrieval, tools, grounding)


def metric_classes() -> dict[str, type[Metric]]:
    """Metric name -> class, sorted by name, for every public metric class a family defines (bases such as
    ``ClaimJudge``, which no family exports, are not metrics anyone can score with)."""
    out: dict[str, type[Metric]] = {}
    for family in FAMILIES:
        for export, value in vars(family).items():
            if (not export.startswith("_") and inspect.isclass(value) and issubclass(value, Metric)
                    and _defined_in(value, family.__name__)):
                out.setdefault(snake_case(export), value)
    return dict(sorted(out.items()))


def _defined_in(cls: type, module: str) -> bool:
    return cls.__module__ == module or cls.__module__.startswith(module + ".")


def family_of(cls: type) -> str:
    """The short name of the family that defines ``cls`` (``"rag"`` for Faithfulness, ``"domain"`` for
    LLMSQLEquivalence)."""
    for family in FAMILIES:
        if _defined_in(cls, family.__name__):
            return family.__name__.rsplit(".", 1)[-1]
    raise ValueError(f"{cls.__qualname__} is not defined by a metric family")


def class_names() -> dict[str, type[Metric]]:
    """Dotted class name -> class for every catalogue metric: the current name
    (``judges.metrics.rag.answer.Faithfulness``) and the name it had before the library had rooms
    (``judges.rag.Faithfulness``), which compiled-judge files saved then carry."""
    out: dict[str, type[Metric]] = {}
    for cls in metric_classes().values():
        out[f"{cls.__module__}.{cls.__qualname__}"] = cls
        out.setdefault(f"judges.{family_of(cls)}.{cls.__qualname__}", cls)
    return out


def is_metric_class(cls: object) -> bool:
    """Whether ``cls`` is one of the catalogue's metric classes (not merely something inside the package)."""
    return inspect.isclass(cls) and cls in set(metric_classes().values())
