"""The recipe docs/cli.md gives for registering one of our judges for MLflow monitoring: a ``@scorer`` function
that builds our scorer inside its body (MLflow registers it from its source text, so imports go inside)."""

from mlflow.genai.scorers import scorer


@scorer
def exact_match_monitor(inputs, outputs, expectations):
    from judges import ExactMatch
    from judges_app.mlflow_scorers import as_mlflow_scorer

    return as_mlflow_scorer(ExactMatch(), threshold=0.5)(inputs=inputs, outputs=outputs, expectations=expectations)
