"""Summaries: SummarizationScore (key content kept, by closed questions; and length; with ``verifier=``,
also whether the summary's sentences are supported by the text).

Owns: the three summarization steps and their formula. Must not compare texts without an LM
(``judges.metrics.text`` does).
"""

from __future__ import annotations

from typing import Any, ClassVar

import dspy

from judges.lm.schemas import output_constraints
from judges.metrics.base import Judge
from judges.metrics.rag.verified import (
    VerifierStep,
    sentence_claims,
    unsupported_feedback,
)


class ExtractKeyphrases(dspy.Signature):
    """List the key phrases of the text: the names, numbers, events and facts a good summary must keep."""

    text: str = dspy.InputField()
    keyphrases: list[str] = dspy.OutputField()


class GenerateClosedQuestions(dspy.Signature):
    """Write yes/no questions about the key phrases whose answer, according to the text, is yes."""

    text: str = dspy.InputField()
    keyphrases: list[str] = dspy.InputField()
    questions: list[str] = dspy.OutputField()


class AnswerFromSummary(dspy.Signature):
    """Answer each question using only the summary: true if the summary says so, false if it does not.
    One answer per question, in order."""

    summary: str = dspy.InputField()
    questions: list[str] = dspy.InputField()
    answers: list[bool] = dspy.OutputField()


class SummarizationScore(VerifierStep, Judge):
    """How much of the text's key content the summary keeps, and how short it is.

    Steps: ``extract_keyphrases`` from the text (``reference_contexts`` joined), ``generate_questions``
    whose answer is yes per the text, ``answer_questions`` from the summary alone (``response``).
    QA = questions the summary answers yes / questions; conciseness = 1 - min(len(summary), len(text)) /
    len(text) in characters. score = (1 - coeff) * QA + coeff * conciseness with ``coeff=0.5`` (Ragas'
    default), or QA alone with ``length_penalty=False``. No question generated: 0.0, with an
    ``undefined_reason``.

    ``verifier="embedded"`` (or a model folder, see ``judges.lm.verifier``) adds a groundedness step the
    LM does not take: each summary sentence is checked against the text by the trained verifier
    (P >= ``threshold`` = supported) and the score is multiplied by groundedness = supported sentences /
    sentences, so a summary that covers the text's questions but adds what the text does not say cannot
    score high. A summary or text outside the verifier's language scores 0.0 with ``out_of_language``
    before any LM call.
    """

    required_fields: ClassVar[tuple[str, ...]] = ("response", "reference_contexts")

    def __init__(self, *, lm: Any = None, length_penalty: bool = True, coeff: float = 0.5,
                 max_questions: int = 10, adapter: Any = None, verifier: str | None = None,
                 supported_label: str | int | None = None, threshold: float = 0.5):
        if not 0.0 <= coeff <= 1.0:
            raise ValueError(f"summarization_score: coeff must be in [0, 1], got {coeff!r}")
        super().__init__(lm=lm, adapter=adapter)
        self._set_verifier(verifier, supported_label, threshold)
        self.needs_verifier = verifier is not None
        self.length_penalty, self.coeff, self.max_questions = length_penalty, coeff, max_questions
        self.extract_keyphrases = dspy.Predict(ExtractKeyphrases)
        self.generate_questions = dspy.Predict(GenerateClosedQuestions)
        self.answer_questions = dspy.Predict(AnswerFromSummary)

    def forward(self, response: str, reference_contexts: list[str]):
        text = "\n".join(reference_contexts)
        if not text.strip():  # blank texts ([""]): nothing to summarise, and conciseness would divide by zero
            return dspy.Prediction(score=0.0, qa_score=None, conciseness=None, keyphrases=[], questions=[], answers=[],
                                   undefined_reason="the text to summarise (reference_contexts) is blank")
        grounded: dict[str, Any] = {}
        if self.verifier is not None:
            verifier = self.verifier_for_text([response, *reference_contexts])
            if isinstance(verifier, dict):
                return dspy.Prediction(score=0.0, qa_score=None, conciseness=None, keyphrases=[], questions=[],
                                       answers=[], verdicts=[], **verifier)
            grounded = self.verify_claims(verifier, sentence_claims(response), reference_contexts)
            rows = grounded["verdicts"]
            grounded["groundedness"] = sum(r["supported"] for r in rows) / len(rows)
        keyphrases = list(dict.fromkeys(k.strip() for k in self.extract_keyphrases(text=text).keyphrases if k.strip()))
        with output_constraints(questions={"maxItems": self.max_questions}):
            questions = [q.strip() for q in self.generate_questions(text=text, keyphrases=keyphrases).questions if q.strip()]
        conciseness = 1.0 - min(len(response), len(text)) / len(text)
        if not questions:
            return dspy.Prediction(score=0.0, qa_score=None, conciseness=conciseness, keyphrases=keyphrases,
                                   questions=[], answers=[], undefined_reason="no question was generated from the text",
                                   **grounded)
        with output_constraints(answers={"minItems": len(questions), "maxItems": len(questions)}):
            answers = [bool(a) for a in self.answer_questions(summary=response, questions=questions).answers]
        answers = (answers + [False] * len(questions))[: len(questions)]
        qa = sum(answers) / len(questions)
        score = (1 - self.coeff) * qa + self.coeff * conciseness if self.length_penalty else qa
        if grounded:
            score *= grounded["groundedness"]
        return dspy.Prediction(score=score, qa_score=qa, conciseness=conciseness, keyphrases=keyphrases,
                               questions=questions, answers=answers, **grounded)

    def feedback(self, result: dspy.Prediction) -> str:
        if result.get("out_of_language"):
            return f"summarization = {result.score:.2f} ({result.undefined_reason})"
        missed = [q for q, a in zip(result.questions, result.answers) if not a]
        text = f"summarization = {result.score:.2f} (QA {result.qa_score}, conciseness {result.conciseness:.2f}"
        if result.get("groundedness") is not None:
            text += f", groundedness {result.groundedness:.2f}"
        text += ")" + ("; the summary does not answer: " + " | ".join(missed) if missed else "")
        return text + (unsupported_feedback(result.verdicts) if result.get("verdicts") else "")
