"""Nothing written outside the output folder, nothing lost (the third audit's findings): a file that is not a
run file is never cut, run files and their locks are never written through a symbolic link, a crash's garbage
last line is trimmed on resume, temporary files cannot be planted, names never become paths; and the smaller
ones: bounds checked at parse, CSV faults named, a schema over the limit said, Unicode compared composed."""

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from judges import AspectCritic, CombinedMetric, EvaluationDataset, ExactMatch, LLMSQLEquivalence
from judges.data.samples import SampleValidationError
from judges.run.records import write_replacing
from judges.run.run_file import RunFile, read_run_records
from judges_app.cli import main

sys.path.insert(0, str(Path(__file__).parent))
from judges_app.cli.outputs import default_output, path_part

HEADER = {"version": 2, "samples": "abc", "metrics": {"exact_match": {"class": "ExactMatch"}}}


def record(sample, score=1.0):
    return {"sample": sample, "metric": "exact_match", "score": score, "run": "r1"}


def test_a_file_that_is_not_a_run_file_is_refused_and_left_as_it_is(tmp_path):
    for text in ("my notes, one line, no newline", '{"sample": 0, "metric": "m", "score": 1}\n{"sample": 1, "met'):
        notes = tmp_path / "notes.txt"
        notes.write_text(text)
        with pytest.raises(ValueError, match="is not a run file of this library"):
            RunFile(notes, HEADER)
        assert notes.read_text() == text  # not cut, not emptied


def test_a_run_file_or_its_lock_behind_a_symbolic_link_is_refused_and_the_target_untouched(tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_text("precious\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "run.jsonl").symlink_to(target)
    with pytest.raises(ValueError, match="is a symbolic link"):
        RunFile(out / "run.jsonl", HEADER)
    (out / "run.jsonl").unlink()
    (out / "run.jsonl.lock").unlink(missing_ok=True)  # the refused run made its own lock file first
    (out / "run.jsonl.lock").symlink_to(target)
    with pytest.raises(ValueError, match="run.jsonl.lock is a symbolic link"):
        RunFile(out / "run.jsonl", HEADER)
    assert target.read_text() == "precious\n"
    empty = tmp_path / "empty.txt"
    empty.touch()
    (out / "run.jsonl.lock").unlink()
    (out / "run.jsonl").symlink_to(empty)
    with pytest.raises(ValueError, match="is a symbolic link"):
        RunFile(out / "run.jsonl", HEADER)
    assert empty.read_bytes() == b""  # an empty target does not receive the run


def test_a_crash_s_garbage_last_line_is_trimmed_and_every_later_resume_works(tmp_path):
    path = tmp_path / "run.jsonl"
    with RunFile(path, HEADER) as run:
        run.append(record(0))
    with open(path, "ab") as handle:
        handle.write(b"\x00\x00\x00\x00\n")  # what a power cut leaves
    for sample in (1, 2):
        with RunFile(path, HEADER) as run:
            assert set(run.done) == {(s, "exact_match") for s in range(sample)}
            run.append(record(sample))
    header, records = read_run_records(path)
    assert header == HEADER and [r["sample"] for r in records] == [0, 1, 2]
    with open(path, "ab") as handle:
        handle.write(b'{"sample": 3, "metr')  # a kill mid-line
    with RunFile(path, HEADER) as run:
        assert len(run.done) == 3
    assert path.read_bytes().endswith(b"\n") and b'{"sample": 3' not in path.read_bytes()


def test_names_that_read_as_paths_are_refused_where_a_metric_is_made_or_loaded(tmp_path):
    for bad in ("x/../../../elsewhere", "a\\b", ".hidden", "a\x00b", "x" * 101):
        with pytest.raises(ValueError, match="must be at most 100 characters, without '/'"):
            AspectCritic(name=bad, definition="Is it polite?")
    with pytest.raises(ValueError, match="a part's: name"):
        CombinedMetric({"../up": ExactMatch(), "b": ExactMatch()})
    assert AspectCritic(name="polite check", definition="Is it polite?").name == "polite check"
    from calibration.fitting.compiled import CompiledJudge, checksum

    body = CompiledJudge(AspectCritic(name="polite", definition="Is it polite?")).to_dict()
    body["judge"]["params"]["name"] = "x/../../../elsewhere"  # a file someone sends: its checksum recomputed
    body["checksum"] = checksum({k: v for k, v in body.items() if k != "checksum"})
    (tmp_path / "sent.json").write_text(json.dumps(body))
    with pytest.raises(ValueError, match="must be at most 100 characters"):
        CompiledJudge.load(tmp_path / "sent.json")


def test_default_output_folders_and_file_names_stay_inside_the_runs_folder(tmp_path):
    runs = tmp_path / "runs"
    assert path_part("x/../../../elsewhere") == "x_.._.._.._elsewhere"
    assert path_part("..") == path_part("...") == path_part("") == "unnamed"
    assert path_part("begin-slice") == "begin-slice" and path_part("a b") == "a_b"
    for names in (("...",), ("data", "x/../../../elsewhere"), ("../..", "..")):
        folder = default_output(runs, "agreement", *names)
        assert folder.resolve().is_relative_to((runs / "agreement").resolve()) and folder != runs / "agreement"


def test_temporary_files_cannot_be_planted_and_outputs_keep_ordinary_permissions(tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_text("precious\n")
    out = tmp_path / "report.html"
    for guess in (f".report.html.{os.getpid()}.tmp", ".report.html.tmp"):  # the names it used to write
        (tmp_path / guess).symlink_to(target)
    write_replacing(out, lambda file: file.write_text("<p>report</p>"))
    assert out.read_text() == "<p>report</p>" and target.read_text() == "precious\n"
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".report.html.") and not p.is_symlink()]


def run_cli(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as exited:
        code = exited.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["calibrate", "begin-slice", "--n-bootstrap", "10000000"], "--n-bootstrap: expected a whole number from 1 to 100,000"),
    (["agreement", "begin-slice", "--judge", "token_overlap", "--seed", "-1"], "--seed: expected a whole number from 0"),
    (["calibrate", "begin-slice", "--seed", str(2**64)], "--seed: expected a whole number from 0 to 4294967295"),
    (["evaluate", "x.jsonl", "-m", "exact_match", "--timeout", "1e308"], "--timeout: expected a number of seconds"),
])
def test_bounds_are_checked_at_parse(argv, message, capsys):
    code, err = run_cli(argv, capsys)
    assert code == 2 and message in err, err


def test_a_bootstrap_too_large_for_memory_is_refused_before_any_judge_runs():
    from judges_app.cli.common import UsageError, check_bootstrap_memory

    check_bootstrap_memory(100_000, 32)
    with pytest.raises(UsageError, match="would take about 29.8 GB"):
        check_bootstrap_memory(100_000, 10_000)


def test_report_refuses_an_existing_file_or_a_linked_folder_as_out(tmp_path, capsys):
    source = tmp_path / "samples.jsonl"
    source.write_text('{"sample": 0, "metric": "exact_match", "score": 1.0}\n')
    (tmp_path / "taken").write_text("mine")
    code, err = run_cli(["report", str(source), "--out", str(tmp_path / "taken")], capsys)
    assert code == 2 and "is a file" in err and (tmp_path / "taken").read_text() == "mine"
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "elsewhere")
    code, err = run_cli(["report", str(source), "--out", str(tmp_path / "linked")], capsys)
    assert code == 2 and "is a symbolic link" in err and not list((tmp_path / "elsewhere").iterdir())


def test_csv_faults_are_named_with_the_file(tmp_path):
    twice = tmp_path / "twice.csv"
    twice.write_text("response,reference,response\na,b,c\n")
    with pytest.raises(SampleValidationError, match="names the column\\(s\\) 'response' more than once"):
        EvaluationDataset.from_csv(twice)
    huge = tmp_path / "huge.csv"
    huge.write_text("response,reference\n" + "a" * 200_000 + ",b\n")
    with pytest.raises(SampleValidationError, match="huge.csv: near line .*field larger than field limit.*JSONL takes"):
        EvaluationDataset.from_csv(huge)


def test_exact_match_compares_composed_unicode_and_an_oversized_schema_says_so():
    decomposed, composed = "e\u0301te\u0301", "\u00e9t\u00e9"
    assert ExactMatch().score({"response": decomposed, "reference": composed}).score == 1.0
    from judges.metrics.domain.sql import MAX_SQL_BYTES
    from scripted import scripted_lm
    from test_optimizers import placeholder_fields

    judge = LLMSQLEquivalence(lm=scripted_lm(placeholder_fields))
    schema = "CREATE TABLE t (a INT);" + " " * MAX_SQL_BYTES
    result = judge.score({"response": "SELECT a FROM t", "reference": "SELECT a FROM t", "reference_contexts": [schema]})
    assert result.execution_equivalent is None and "the schema was not parsed" in result.execution_note
    assert f"{MAX_SQL_BYTES:,}-byte limit" in result.execution_note


def test_the_served_lm_s_request_timeout_is_shown_and_can_be_changed(capsys):
    from judges_app.cli import parser
    from judges_app.cli.common import cli_lm

    args = parser("evaluate").parse_args(["evaluate", "x.jsonl", "-m", "exact_match", "--lm", "openai/judge", "--api-base",
                                          "http://127.0.0.1:9/v1", "--request-timeout", "5"])
    assert cli_lm(args).request_timeout == 5.0
    with pytest.raises(SystemExit):
        parser("evaluate").parse_args(["evaluate", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "--request-timeout SECONDS" in shown and "(default 120 s)" in shown and "up to 6 times this" in shown


def test_a_second_calibrate_into_one_folder_or_label_on_one_file_is_refused_while_the_first_runs(tmp_path, capsys):
    """One run at a time per calibrate output folder and per labels file: the lock is held (as the first run
    would hold it) and the second command exits 2 naming the holder, before any judge runs."""
    from judges.run.run_file import take_lock

    out = tmp_path / "calibrated"
    out.mkdir()
    held = take_lock(out / ".calibrate.lock", out, "output folder")
    try:
        code, err = run_cli(["calibrate", "begin-slice", "--judge", "faithfulness_with_verifier", "--out", str(out),
                             "--no-mlflow", "--optimizer", "none",
                             "--n-train", "16", "--n-test", "16"], capsys)
    finally:
        os.close(held)
    assert code == 2 and f"output folder {out} is in use by another run (pid {os.getpid()}" in err
    labels = tmp_path / "labels.jsonl"
    pool = tmp_path / "pool.jsonl"
    pool.write_text(json.dumps({"response": "a", "reference": "a"}) + "\n")
    held = take_lock(labels.with_name("labels.jsonl.lock"), labels, "labels file")
    try:
        code, err = run_cli(["label", str(pool), "--judge", "exact_match", "--out", str(labels), "--budget", "1"],
                            capsys)
    finally:
        os.close(held)
    assert code == 2 and f"labels file {labels} is in use by another run" in err and not labels.exists()
