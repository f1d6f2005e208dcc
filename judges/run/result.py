"""The result of ``evaluate()``: its records, and everything derived from them.

    result.summary()          # per metric: mean, std, quantiles, failures, undefined, tokens, cost, latency
    result.to_pandas()        # one row per sample, a column per metric
    result.failures           # (sample, metric, reason) of every sample that could not be scored

Owns: ``EvaluationResult`` (summary, tables, files) and ``RunStopped`` (a run the LM refused, with what
finished). Must not score anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from judges.run.usage import usage_cost


class RunStopped(RuntimeError):
    """The LM refused in a way no retry fixes (``PermanentLMError``: bad request, authentication ...): the
    run stopped early. Finished items are recorded (and in the run file); rerun to resume once it is fixed."""

    def __init__(self, message: str, result: EvaluationResult | None = None):
        super().__init__(message)
        self.result = result


@dataclass
class EvaluationResult:
    """Per-(sample, metric) records plus the run's wall time; everything else is derived from them.
    ``unrecorded``: per metric, paid LM calls no record holds (``judges.run.usage.unrecorded_usage``)."""

    records: list[dict[str, Any]]
    metric_names: list[str]
    n_samples: int
    wall_seconds: float
    price_table: dict[str, dict[str, float]] = field(default_factory=dict)
    unrecorded: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Each sample's id in the user's data (their id column), written beside its position in the exports.
    ids: list[str] | None = None

    def _by_metric(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r["metric"] == name]

    @property
    def failures(self) -> list[tuple[int, str, str]]:
        return [(r["sample"], r["metric"], r["error"]) for r in self.records if r.get("error")]

    def scores(self, name: str) -> list[float | None]:
        """The metric's score per sample (None where it failed)."""
        table: list[float | None] = [None] * self.n_samples
        for r in self._by_metric(name):
            table[r["sample"]] = r.get("score")
        return table

    def cost(self, record: dict[str, Any]) -> float | None:
        return usage_cost(record.get("usage") or {}, self.price_table)

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per metric: n, mean/std/min/quartiles/max over defined scores, failures, undefined, degraded (scored
        from fewer steps or judges than designed; failures too under ``on_degraded="fail"``), LM calls
        (paid for, over every run of the run file) and cached calls (answered by DSPy's cache: free now, but
        an interrupted earlier run may have paid for them), tokens, cost (None without prices), latency
        p50/p95 (s); plus an ``_overall`` entry. Calls, tokens and cost include ``unrecorded_calls``: paid
        calls that no record holds (items in flight when a run was killed, calls after an item's timeout,
        attempts a ``retry_failed`` run replaced)."""
        out: dict[str, dict[str, Any]] = {}
        for name in self.metric_names:
            records = self._by_metric(name)
            ok = [r for r in records if r.get("score") is not None and not r.get("undefined_reason")]
            values = np.array([r["score"] for r in ok], dtype=float)
            latencies = np.array([r["latency_s"] for r in records if r.get("latency_s") is not None], dtype=float)
            extra = self.unrecorded.get(name, {})
            extra_tokens = extra.get("by_model", {})
            costs = [self.cost(r) for r in records] + [usage_cost(extra_tokens, self.price_table)]
            stats: dict[str, Any] = {
                "n": len(records),
                "scored": len(ok),
                "failures": sum(1 for r in records if r.get("error")),
                "undefined": sum(1 for r in records if r.get("undefined_reason")),
                "degraded": sum(1 for r in records if r.get("degraded")),
                "mean": float(values.mean()) if len(values) else None,
                "std": float(values.std()) if len(values) else None,
            }
            for label, q in (("min", 0), ("p25", 25), ("median", 50), ("p75", 75), ("max", 100)):
                stats[label] = float(np.percentile(values, q)) if len(values) else None
            stats.update(
                lm_calls=sum(r.get("lm_calls", 0) for r in records) + extra.get("lm_calls", 0),
                unrecorded_calls=extra.get("lm_calls", 0),
                cached_calls=sum(r.get("cached_calls", 0) for r in records),
                input_tokens=sum(u.get("prompt_tokens", 0) for r in records for u in (r.get("usage") or {}).values())
                + sum(u["prompt_tokens"] for u in extra_tokens.values()),
                output_tokens=sum(u.get("completion_tokens", 0) for r in records for u in (r.get("usage") or {}).values())
                + sum(u["completion_tokens"] for u in extra_tokens.values()),
                cost=None if any(c is None for c in costs) else float(sum(costs)),
                latency_p50=float(np.percentile(latencies, 50)) if len(latencies) else None,
                latency_p95=float(np.percentile(latencies, 95)) if len(latencies) else None,
            )
            out[name] = stats
        out["_overall"] = {
            "samples": self.n_samples,
            "wall_seconds": self.wall_seconds,
            "samples_per_second": self.n_samples / self.wall_seconds if self.wall_seconds > 0 else None,
            "failures": len(self.failures),
        }
        return out

    def to_pandas(self):
        """One row per sample: ``<metric>`` score columns, ``<metric>__error`` where something failed."""
        import pandas as pd

        rows = [{"sample": i, **({"id": self.ids[i]} if self.ids else {})} for i in range(self.n_samples)]
        for r in self.records:
            rows[r["sample"]][r["metric"]] = r.get("score")
            if r.get("error"):
                rows[r["sample"]][f"{r['metric']}__error"] = r["error"]
        return pd.DataFrame(rows).set_index("sample")

    def to_jsonl(self, path: str | Path) -> Path:
        """Every record, intermediates included, one JSON object per line."""
        path = Path(path)
        with open(path, "w", encoding="utf-8") as handle:
            for r in sorted(self.records, key=lambda r: (r["sample"], self.metric_names.index(r["metric"]))):
                if self.ids:
                    r = {"sample": r["sample"], "id": self.ids[r["sample"]], **r}
                handle.write(json.dumps(r, ensure_ascii=False, default=str) + "\n")
        return path

    def to_csv(self, path: str | Path) -> Path:
        path = Path(path)
        self.to_pandas().to_csv(path)
        return path

    def __repr__(self) -> str:
        means = ", ".join(
            f"{n}={s['mean']:.3f}" if s["mean"] is not None else f"{n}=n/a"
            for n, s in self.summary().items() if n != "_overall"
        )
        return f"EvaluationResult({self.n_samples} samples: {means}; {len(self.failures)} failures)"
