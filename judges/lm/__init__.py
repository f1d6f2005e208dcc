"""The models judges run on: LMs (embedded, in-process GGUF, or served over HTTP) and embedders.

    resolve.py     which LM and adapter a judge uses (``resolve_lm``, ``local_lm``, ``judge_context``)
    files.py       the embedded model files inside PyPI packages, and their re-encoding
    engine.py      the in-process llama.cpp engine (``LlamaCppEngine``)
    sampling.py    greedy grammar-constrained sampling, prompt-lookup drafting
    threads.py     decode-thread policy
    schemas.py     JSON schemas bounded for constrained decoding; mending cut-off answers
    served.py      ``ServedLM``: any LiteLLM model string with per-endpoint limits and retries
    embeddings.py  ``Embedder`` and ``resolve_embedder``
    verifier/      ``Verifier``: a trained cross-encoder, P(evidence supports claim), the shipped one and its
                   files, runtime, evidence units and checks (one package)

Must not define metrics or know about samples.
"""

from judges.lm.embeddings import Embedder, default_embeddings, resolve_embedder
from judges.lm.engine import LlamaCppEngine
from judges.lm.files import (
           EMBEDDED,
           embedded_embedder_path,
           embedded_gguf_path,
           embedded_model_file,
)
from judges.lm.resolve import (
    JudgeLMWarning,
    configure_judges,
    judge_context,
    judges_context,
    local_lm,
    resolve_adapter,
    resolve_lm,
)
from judges.lm.schemas import output_constraints
from judges.lm.served import PermanentLMError, ServedLM
from judges.lm.verifier import Verifier, VerifierError, resolve_verifier

__all__ = [
    "configure_judges", "default_embeddings", "EMBEDDED", "embedded_embedder_path", "embedded_gguf_path",
    "embedded_model_file", "Embedder", "judge_context", "JudgeLMWarning", "judges_context", "LlamaCppEngine",
    "local_lm", "output_constraints", "PermanentLMError", "resolve_adapter", "resolve_embedder", "resolve_lm",
    "resolve_verifier", "ServedLM", "Verifier", "VerifierError"
]
