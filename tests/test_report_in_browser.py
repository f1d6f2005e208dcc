"""The HTML report as a reader sees it: headless Chromium (Playwright driving the system's Chromium) opens a
report with every binary statistic and the hard slice at 1400 px: its agreement table fits without scrolling
sideways (a reader on a laptop saw it cut after ROC-AUC's neighbours). Skipped without Chromium, failed in CI."""

import sys
from pathlib import Path

import numpy as np

from calibration.agreement.record import CalibrationRun
from calibration.agreement.report import write_report

sys.path.insert(0, str(Path(__file__).parent))
from test_mlflow_ui import CHROMIUM, browser_or_skip  # noqa: E402


def test_the_agreement_table_fits_a_1400_px_window(tmp_path):
    playwright = browser_or_skip()
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 120).tolist()
    scores = {name: np.clip(np.asarray(labels) * 0.5 + rng.random(120) * 0.5, 0, 1).tolist()
              for name in ("baseline: embedding alignment", "baseline: verifier weakest", "judge as shipped",
                           "compiled (labeled)", "compiled (labeled) + stacked calibration")}
    run = CalibrationRun("a long data set name: faithfulness_with_verifier", labels, scores, label_kind="binary")
    run.compute_agreement(n_bootstrap=100, progress=False)
    index = write_report(run, tmp_path / "report")
    with playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(index.as_uri())
            widths = page.evaluate("""() => [...document.querySelectorAll('div.scroll')].slice(0, 1)
                .map(d => [d.scrollWidth, d.clientWidth, d.querySelector('tr').innerText])""")
        finally:
            browser.close()
    (scroll, client, header), = widths
    assert "spearman" in header.lower()
    assert scroll <= client, f"the agreement table needs {scroll} px in a {client} px column: it scrolls sideways"
