"""Every metric the library exports, by name: the one registry that the command line, compiled-judge
loading (``calibration.compiled``) and the experiments look metric names up in.

    metric_classes()["faithfulness"]      # -> judges.rag.Faithfulness
    metric_classes()["context_precision"] # an alias -> LLMContextPrecisionWithReference

Names are the snake-case class names (``metric.name``); Ragas's aliases (``ContextPrecision`` ...) are names
of their own that resolve to the class they stand for.
"""

from __future__ import annotations

import inspect

from judges import agent, custom, domain, dual_judge, grounding, rag, retrieval, text, tools
from judges.base import Metric, snake_case

#: The metric families, one module each.
FAMILIES = (rag, dual_judge, custom, agent, domain, text, retrieval, tools, grounding)


def metric_classes() -> dict[str, type[Metric]]:
    """Metric name -> class, sorted by name, for every public metric class defined in a family module
    (private bases such as ``_ClaimJudge`` are not metrics anyone can score with)."""
    out: dict[str, type[Metric]] = {}
    for module in FAMILIES:
        for export, value in vars(module).items():
            if (not export.startswith("_") and inspect.isclass(value) and issubclass(value, Metric)
                    and value.__module__ == module.__name__):
                out.setdefault(snake_case(export), value)
    return dict(sorted(out.items()))


def is_metric_class(cls: object) -> bool:
    """Whether ``cls`` is one of the catalogue's metric classes (not merely something inside the package)."""
    return inspect.isclass(cls) and cls in set(metric_classes().values())
