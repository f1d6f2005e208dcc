"""Which item to label next: the priority formula, diversity, active vs random selection on a synthetic pool,
and `dspy-judges label` under a person's hands (piped answers, a SIGKILL mid-labelling, a real tmux pane)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from calibration.fitting.active import (
    labelling_priority,
    select_for_labelling,
    selection_order,
)
from calibration.fitting.calibrators import Calibrator

CLI = [sys.executable, "-m", "judges_app.cli"]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


def test_priority_is_uncertainty_and_disagreement_with_the_signal():
    priority = labelling_priority([0.5, 0.9, float("nan"), 0.0], [0.5, 0.1, 0.3, 0.0])
    assert priority.tolist() == pytest.approx([0.5, 0.5, 0.6, 0.0])  # nan: nothing known, p = 0.5
    assert labelling_priority([0.5, 0.75, 1.0]).tolist() == pytest.approx([1.0, 0.5, 0.0])
    with pytest.raises(ValueError, match="2 signal values for 3 items"):
        labelling_priority([0.5, 0.5, 0.5], [0.1, 0.2])


def test_diversity_spreads_the_picks_over_unlike_items():
    priority = [0.9, 0.89, 0.5, 0.1]
    vectors = np.array([[1.0, 0.0], [0.99, 0.01], [0.0, 1.0], [0.7, 0.7]])
    assert select_for_labelling(priority, 3) == [0, 1, 2]
    assert select_for_labelling(priority, 3, vectors=vectors, diversity=0.5) == [0, 2, 1]
    assert select_for_labelling(priority, 2, vectors=vectors, exclude=[0], diversity=0.5) == [2, 1]
    assert select_for_labelling([0.5, 0.5, 0.5], 3) == [0, 1, 2]  # ties: the earlier item first


def test_active_selection_reaches_random_selections_50_label_brier_with_fewer_labels():
    """A synthetic pool where the judge's score orders items well but is uncalibrated (the label flips at
    0.55, with a little noise): labels near the boundary teach Platt scaling most. Mean Brier on 1000 test
    items over 10 seeded pools."""
    brier: dict[tuple[str, int], list[float]] = {}
    for seed in range(10):
        rng = np.random.default_rng(100 + seed)
        x, test_x = rng.uniform(0, 1, 300), rng.uniform(0, 1, 1000)
        y = (x + rng.normal(0, 0.03, 300) > 0.55).astype(int)
        test_y = (test_x + rng.normal(0, 0.03, 1000) > 0.55).astype(int)

        def refit(picked):
            return Calibrator("platt", binary=True).fit(x[picked], y[picked]).predict(x)

        for strategy in ("random", "active"):
            order = selection_order(y, 50, strategy=strategy, probabilities=refit, seed=seed)
            assert len(set(order)) == 50
            for n in (20, 30, 50):
                p = Calibrator("platt", binary=True).fit(x[order[:n]], y[order[:n]]).predict(test_x)
                brier.setdefault((strategy, n), []).append(float(np.mean((p - test_y) ** 2)))
    mean = {k: float(np.mean(v)) for k, v in brier.items()}
    assert mean[("active", 30)] < mean[("random", 50)]
    assert mean[("active", 50)] < mean[("random", 50)]


def test_both_strategies_start_from_the_same_random_items_until_both_labels_are_seen():
    labels = [0] * 9 + [1]
    random_order = selection_order(labels, 10, strategy="random", seed=3)
    active_order = selection_order(labels, 10, strategy="active", probabilities=lambda picked: np.full(10, 0.5), seed=3)
    first = random_order.index(9) + 1
    assert active_order[:max(first, 6)] == random_order[:max(first, 6)]
    with pytest.raises(ValueError, match="needs probabilities"):
        selection_order(labels, 4, strategy="active")


# --- dspy-judges label --------------------------------------------------------------------------------------
def pool_file(tmp_path: Path, n: int = 6) -> Path:
    path = tmp_path / "pool.jsonl"
    rows = [{"response": f"The bridge opened in {1900 + 7 * i}{' and is red' if i % 2 else ''}.",
             "retrieved_contexts": ["The bridge opened in 1921 and is red."]} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def label_cmd(pool: Path, out: Path, budget: int, *extra: str) -> list[str]:
    return CLI + ["label", str(pool), "--judge", "unsupported_specifics", "--budget", str(budget), "--out", str(out),
                  "--diversity", "0", *extra]


def read(out: Path) -> list[dict]:
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


def test_label_appends_each_answer_reasks_bad_ones_and_a_rerun_continues(tmp_path):
    pool, out = pool_file(tmp_path), tmp_path / "labels.jsonl"
    first = subprocess.run(label_cmd(pool, out, 3), input="maybe\n1\nthe year matches\ns\n0\n\nq\n", text=True,
                           capture_output=True, env=ENV, timeout=120)
    assert first.returncode == 0, first.stderr
    assert "type 1 or 0" in first.stdout and "Rerun to go on" in first.stdout
    rows = read(out)
    assert [r["label"] for r in rows] == [1, 0] and rows[0]["rationale"] == "the year matches"
    assert "rationale" not in rows[1] and set(rows[1]) == {"response", "retrieved_contexts", "label"}
    second = subprocess.run(label_cmd(pool, out, 3), input="1\n\n", text=True, capture_output=True, env=ENV,
                            timeout=120)
    assert second.returncode == 0 and "2 labelled; asking for 1 more" in second.stdout
    assert "scoring the pool" not in second.stderr  # the saved ranking is reused
    assert len(read(out)) == 3 and len({r["response"] for r in read(out)}) == 3  # the skipped item came back
    assert "nothing to ask" in subprocess.run(label_cmd(pool, out, 3), input="", text=True, capture_output=True,
                                              env=ENV, timeout=120).stdout
    from calibration.data.labelled import LabelledSet

    assert LabelledSet.from_jsonl(out).rationale(0) == "the year matches"  # calibrate reads the file as it is


def test_a_sigkill_mid_labelling_loses_no_answer_and_a_cut_off_line_is_asked_again(tmp_path):
    pool, out = pool_file(tmp_path), tmp_path / "labels.jsonl"
    process = subprocess.Popen(label_cmd(pool, out, 4), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, text=True, env=ENV)
    process.stdin.write("1\nfirst\n0\n\n")
    process.stdin.flush()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 2):
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)  # while it waits for the third answer
    process.wait(timeout=30)
    assert [r["label"] for r in read(out)] == [1, 0]
    with open(out, "a") as handle:
        handle.write('{"response": "cut off in the midd')  # what a crash inside a write would leave
    rerun = subprocess.run(label_cmd(pool, out, 4), input="1\n\n1\n\n", text=True, capture_output=True, env=ENV,
                           timeout=120)
    assert rerun.returncode == 0 and "cut off" in rerun.stderr and "2 labelled; asking for 2 more" in rerun.stdout
    assert len(read(out)) == 4


def test_ordinal_labels_stay_on_the_scale(tmp_path):
    pool, out = pool_file(tmp_path, 2), tmp_path / "labels.jsonl"
    done = subprocess.run(label_cmd(pool, out, 1, "--label-kind", "ordinal", "--label-range", "1,5"),
                          input="7\n2.5\n4\nok\n", text=True, capture_output=True, env=ENV, timeout=120)
    assert done.returncode == 0 and done.stdout.count("from 1 to 5") == 1 and "whole numbers" in done.stdout
    assert read(out)[0]["label"] == 4
    bad = subprocess.run(label_cmd(pool, out, 1, "--label-range", "1,5"), input="", text=True, capture_output=True,
                         env=ENV, timeout=120)
    assert bad.returncode == 2 and "ordinal or continuous" in bad.stderr


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_label_in_a_tmux_pane_as_a_person_would(tmp_path):
    """The terminal flow in a real terminal: tmux runs the command, keys are typed into its pane."""
    pool, out = pool_file(tmp_path), tmp_path / "labels.jsonl"
    socket, session = f"judges-{uuid.uuid4().hex[:8]}", "label"
    tmux = ["tmux", "-L", socket]
    command = " ".join(label_cmd(pool, out, 2, "--diversity", "0.3"))
    subprocess.run(tmux + ["new-session", "-d", "-s", session, "-x", "160", "-y", "50",
                           f"cd {Path.cwd()} && HF_HUB_OFFLINE=1 {command}; sleep 30"], check=True, env=ENV)

    def pane() -> str:
        return subprocess.run(tmux + ["capture-pane", "-p", "-t", session, "-S", "-200"], capture_output=True,
                              text=True).stdout

    def wait_for(text: str, count: int = 1, seconds: float = 120) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if pane().count(text) >= count:
                return
            time.sleep(0.3)
        raise AssertionError(f"{text!r} did not appear; the pane shows:\n{pane()}")

    try:
        wait_for("label>")
        subprocess.run(tmux + ["send-keys", "-t", session, "m", "Enter"], check=True)  # see it whole
        wait_for("label>", 2)
        subprocess.run(tmux + ["send-keys", "-t", session, "y", "Enter", "the date is right", "Enter"], check=True)
        wait_for("label>", 3)
        assert read(out)[0]["label"] == 1 and read(out)[0]["rationale"] == "the date is right"
        subprocess.run(tmux + ["send-keys", "-t", session, "n", "Enter", "Enter"], check=True)
        wait_for("done: 2 of this pool's items are labelled")
        assert [r["label"] for r in read(out)] == [1, 0]
    finally:
        subprocess.run(tmux + ["kill-server"], capture_output=True)


def test_label_ranks_by_a_compiled_judges_calibrated_scores(tmp_path):
    from calibration.data.labelled import LabelledSet
    from calibration.fitting.fit import fit
    from judges import UnsupportedSpecifics

    rows = [{"response": f"It opened in {1900 + i}.", "retrieved_contexts": ["It opened in 1904."],
             "label": int(i == 4 or i % 3 == 0)} for i in range(12)]
    compiled = fit(UnsupportedSpecifics(), LabelledSet.from_records(rows), optimizer=None, calibrator="platt")
    path = compiled.save(tmp_path / "compiled.json")
    pool, out = pool_file(tmp_path), tmp_path / "labels.jsonl"
    done = subprocess.run(label_cmd(pool, out, 1, "--compiled", str(path)), input="1\n\n", text=True,
                          capture_output=True, env=ENV, timeout=120)
    assert done.returncode == 0, done.stderr
    scores = json.loads(Path(str(out) + ".queue.json").read_text())["score"]
    assert all(0.0 < s < 1.0 for s in scores)  # Platt-calibrated probabilities, not the raw 0/1
    wrong = subprocess.run(label_cmd(pool, tmp_path / "other.jsonl", 1, "--compiled", str(path)) + ["--judge", "exact_match"],
                           input="", text=True, capture_output=True, env=ENV, timeout=120)
    assert wrong.returncode == 2 and "holds the judge unsupported_specifics, not exact_match" in wrong.stderr


def test_a_judge_that_fails_on_every_pool_item_ranks_nothing(tmp_path):
    from argparse import Namespace

    from judges import EvaluationDataset
    from judges.lm.served import PermanentLMError
    from judges_app.cli.common import CommandFailed
    from judges_app.cli.label import ranked_queue

    class Broken:
        name = "broken"

        def __init__(self, error):
            self.error = error

        def score(self, sample):
            raise self.error

    pool = EvaluationDataset([{"response": "a"}, {"response": "b"}])
    args = Namespace(out=tmp_path / "labels.jsonl", compiled=None, judge="broken", diversity=0.0, lm=None)
    with pytest.raises(CommandFailed, match="failed on every pool item; first error: the judge failed: ValueError"):
        ranked_queue(args, Broken(ValueError("no")), pool, pool.to_list(), ["k1", "k2"], set())
    with pytest.raises(CommandFailed, match="the LM refused"):
        ranked_queue(args, Broken(PermanentLMError("401")), pool, pool.to_list(), ["k1", "k2"], set())
    assert not Path(str(args.out) + ".queue.json").exists()
