"""Nothing written outside the output folder, nothing lost (the third audit's high findings): a file that is
not a run file is never cut, run files and their locks are never written through a symbolic link, a crash's
garbage last line is trimmed on resume, temporary files cannot be planted, and names never become paths."""

import json
import os
import stat

import pytest

from judges import AspectCritic, CombinedMetric, ExactMatch
from judges.run.records import write_replacing
from judges.run.run_file import RunFile, read_run_records
from judges_app.cli.common import default_output, path_part

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
