"""MLflow's UI in a real browser: our judges' columns beside a person's label in a real ``mlflow server``'s
traces list, read by headless Chromium (Playwright driving the system's Chromium: nothing is downloaded).

The traces list cuts a column's name at its default width (about 14 characters): the judges' and the person's
columns must all be there, and every Feedback name we can make (each catalogue judge, raw, calibrated,
optimised, aligned) must show whole in a real header cell of that width. Needs Chromium (``apt-get install chromium``); without it the test
is skipped on a developer's machine and fails in CI (``CI`` set), where it must run.
"""

import os
import shutil
import sys
from pathlib import Path

import mlflow
import pytest

from calibration.fitting.calibrators import Calibrator
from calibration.fitting.compiled import CompiledJudge
from judges import ExactMatch, NonLLMStringSimilarity
from judges.metrics.catalogue import metric_classes
from judges_app.mlflow_scorers import ALIGNED, CALIBRATED, COMPILED, as_mlflow_scorer, short_name

sys.path.insert(0, str(Path(__file__).parent))
from test_mlflow_native import all_traces, experiment, traced  # noqa: E402

CHROMIUM = next((found for name in ("chromium", "chromium-browser", "google-chrome")
                 if (found := shutil.which(name))), None)


def browser_or_skip():
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the MLflow UI test: install Chromium (apt-get install chromium)")
        pytest.skip("no Chromium on this machine (apt-get install chromium); CI runs this test")
    return pytest.importorskip("playwright.sync_api")


@pytest.mark.xdist_group("mlflow_server")
def test_the_traces_list_shows_each_judge_and_the_person_in_columns_apart(mlflow_server, monkeypatch, tmp_path):
    playwright = browser_or_skip()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.url)
    mlflow.set_tracking_uri(mlflow_server.url)
    try:
        experiment_id = experiment("ui")
        for i in range(3):
            traced(f"q{i}", f"answer {i}", expected="answer 0", feedback=bool(i % 2), name="human_sim")
        similarity = NonLLMStringSimilarity()
        calibrated = CompiledJudge(similarity, Calibrator("platt", binary=True).fit([0.1, 0.2, 0.9, 0.8], [0, 0, 1, 1]))
        scorers = [as_mlflow_scorer(similarity), as_mlflow_scorer(calibrated),
                   as_mlflow_scorer(ExactMatch(), threshold=0.5)]
        mlflow.genai.evaluate(data=all_traces("ui"), scorers=scorers)
        names = [s.name for s in scorers] + ["human_sim"]
        assert names == ["nollm_sim", "nollm_sim_cal", "exact", "human_sim"]
        every = sorted({short_name(n, mark) for n in metric_classes() for mark in ("", CALIBRATED, COMPILED, ALIGNED)})
        with playwright.sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(f"{mlflow_server.url}/#/experiments/{experiment_id}/traces")
                calibrated_column = page.locator("[role=columnheader]", has_text="nollm_sim_cal").first
                calibrated_column.wait_for(timeout=60_000)
                calibrated_column.scroll_into_view_if_needed()
                for button in page.get_by_role("button", name="Got it").all():  # a first-visit tip over the table
                    button.click()
                page.screenshot(path=str(tmp_path / "traces.png"))
                headers = [text.strip() for text in page.locator("[role=columnheader]").all_inner_texts()]
                cut = page.evaluate(CUT_IN_HEADER, ["nollm_sim_cal", every])
            finally:
                browser.close()
    finally:
        mlflow.set_tracking_uri(None)
    for name in names:
        assert name in headers, f"{name} has no column in the traces list ({headers})"
    assert cut["shown"] is True, "the calibrated column's own name is cut"
    assert cut["cut"] == [], f"Feedback names cut in MLflow's traces list: {cut['cut']}"


#: In the header cell of the column ``start``, put each name of ``names`` where its text is and say which do not
#: fit (the cell's ellipsis element scrolls): the width and fonts are the UI's own.
CUT_IN_HEADER = """([start, names]) => {
    const cell = [...document.querySelectorAll('[role=columnheader]')].find(c => c.textContent.trim() === start);
    const box = [...cell.querySelectorAll('*')].find(e => getComputedStyle(e).textOverflow === 'ellipsis');
    const walker = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
    let text = null;
    while (walker.nextNode()) { if (walker.currentNode.nodeValue.trim() === start) text = walker.currentNode; }
    const shown = box.scrollWidth <= box.clientWidth;
    const cut = [];
    for (const name of names) { text.nodeValue = name; if (box.scrollWidth > box.clientWidth) cut.push(name); }
    text.nodeValue = start;
    return {shown, cut};
}"""

