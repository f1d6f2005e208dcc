"""fit(): compiling with a scripted LM where demos matter, calibrators, JSON save/load without pickle."""

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from calibration.agreement.stats import agreement
from calibration.data.labelled import LabelledSet
from calibration.fitting.calibrators import Calibrator
from calibration.fitting.compiled import CompiledJudge
from calibration.fitting.fit import fit, judge_scores
from judges import AspectCritic, Faithfulness, SingleTurnSample

sys.path.insert(0, str(Path(__file__).parent))
from scripted import scripted_lm  # noqa: E402


def demo_sensitive_lm():
    """Says "yes" to everything unless the prompt carries demos; with demos it answers correctly
    (a response saying "good" has the aspect). Built so that compiling is what fixes the judge."""

    def respond(prompt):
        responses = [r for r in re.findall(r"\[\[ ## response ## \]\]\n(.*?)\n", prompt) if r != "{response}"]
        has_demos = len(responses) > 1
        verdict = ("good" in responses[-1]) if has_demos else True
        return {"reason": "scripted", "verdict": str(verdict)}

    return scripted_lm(respond)


def synthetic(n, offset=0):
    rows = [{"response": f"item {i + offset}: {'good' if i % 2 else 'bad'}", "label": i % 2} for i in range(n)]
    return LabelledSet.from_records(rows, name="synthetic")


def critic(lm):
    return AspectCritic(name="good", definition="Does the response say the item is good?", lm=lm)


def test_compiling_with_bootstrap_improves_agreement_where_demos_matter():
    lm = demo_sensitive_lm()
    train, test = synthetic(12), synthetic(20, offset=100)
    before = agreement(test.labels, judge_scores(critic(lm), test)[0], n_bootstrap=50).value("accuracy")
    compiled = fit(critic(lm), train, optimizer="bootstrap", calibrator=None, max_demos=2)
    after = agreement(test.labels, judge_scores(compiled, test)[0], n_bootstrap=50).value("accuracy")
    assert before == pytest.approx(0.5) and after == 1.0
    assert compiled.report["demos"] == {"judge_aspect": 2}


def test_other_optimizers_and_unknown_ones():
    lm = demo_sensitive_lm()
    compiled = fit(critic(lm), synthetic(8), optimizer="random_search", calibrator=None, num_candidates=2)
    assert judge_scores(compiled, synthetic(6, offset=50))[0].tolist() == [0.0, 1.0] * 3
    with pytest.raises(ValueError, match="optimizer="):
        fit(critic(lm), synthetic(4), optimizer="nope")
    with pytest.raises(ValueError, match="reflection_lm"):
        fit(critic(lm), synthetic(4), optimizer="gepa")


def test_calibrators():
    rng = np.random.default_rng(0)
    labels = (rng.random(300) < 0.4).astype(float)
    raw = np.clip(0.55 + 0.3 * labels + rng.normal(0, 0.15, 300), 0, 1)  # overconfident, shifted
    iso = Calibrator("isotonic", binary=True).fit(raw, labels)
    assert np.all(np.diff(iso.predict(np.linspace(0, 1, 50))) >= -1e-12)  # monotone
    platt = Calibrator("platt", binary=True).fit(raw, labels)
    from sklearn.metrics import brier_score_loss

    assert brier_score_loss(labels, platt.predict(raw)) < brier_score_loss(labels, raw)
    useful = labels + rng.normal(0, 0.1, 300)  # a cheap signal that knows the label
    stacked = Calibrator("stacked", binary=True, features=["token_overlap"]).fit(raw, labels, useful[:, None])
    assert stacked.features == ["token_overlap"] and "kept" in stacked.note
    noise = rng.normal(0, 1, 300)
    dropped = Calibrator("stacked", binary=True, features=["token_overlap"]).fit(raw, labels, noise[:, None])
    assert dropped.features == [] and "dropped" in dropped.note
    again = Calibrator.from_dict(json.loads(json.dumps(stacked.to_dict())))
    assert np.allclose(again.predict(raw[:5], useful[:5, None]), stacked.predict(raw[:5], useful[:5, None]))
    # A judge no better than chance beside a signal that knows the label: the judge's score is dropped.
    coin = rng.random(300)
    blind = Calibrator("stacked", binary=True, features=["token_overlap", "claim_count"]).fit(
        coin, labels, np.column_stack([useful, noise]))
    assert not blind.use_raw and blind.features == ["token_overlap"] and "not used" in blind.note
    assert np.allclose(blind.predict(rng.random(5), useful[:5, None]), blind.predict(np.zeros(5), useful[:5, None]))
    reloaded = Calibrator.from_dict(json.loads(json.dumps(blind.to_dict())))
    assert not reloaded.use_raw and np.allclose(reloaded.predict(coin[:5], useful[:5, None]),
                                                blind.predict(coin[:5], useful[:5, None]))
    with pytest.raises(ValueError, match="one label class"):
        Calibrator("platt", binary=True).fit([0.1, 0.2], [1, 1])
    with pytest.raises(ValueError, match="calibrator="):
        Calibrator("spline", binary=True)


def test_the_stacked_calibrator_does_not_depend_on_how_the_file_orders_the_labels():
    """Forward selection scores each candidate on stratified folds: a file with every 0 first and every 1
    after gives the same calibrator as the same items with the labels interleaved (each class in the same
    order). Unstratified folds would score on folds of one class each."""
    rng = np.random.default_rng(3)
    labels = np.repeat([0.0, 1.0], 30)
    raw = np.clip(0.4 + 0.2 * labels + rng.normal(0, 0.2, 60), 0, 1)
    signals = np.column_stack([labels + rng.normal(0, 0.6, 60), rng.normal(0, 1, 60)])
    interleaved = np.ravel(np.column_stack([np.arange(30), np.arange(30, 60)]))
    for monotone in (True, False):
        fitted = [Calibrator("stacked", binary=True, features=["token_overlap", "claim_count"], monotone=monotone).fit(
            raw[order], labels[order], signals[order]).to_dict() for order in (np.arange(60), interleaved)]
        assert fitted[0]["features"] == fitted[1]["features"] and fitted[0]["note"] == fitted[1]["note"]
        assert np.allclose(fitted[0]["params"]["coef"], fitted[1]["params"]["coef"])


def test_save_load_round_trip_and_tamper_detection(tmp_path):
    lm = demo_sensitive_lm()
    compiled = fit(critic(lm), synthetic(12), optimizer="bootstrap", calibrator="platt", max_demos=2)
    path = compiled.save(tmp_path / "judge.json")
    loaded = CompiledJudge.load(path, lm=lm)
    assert loaded.to_dict() == compiled.to_dict()
    test = synthetic(6, offset=300)
    assert judge_scores(loaded, test)[0].tolist() == judge_scores(compiled, test)[0].tolist()
    assert "pickle" not in path.read_text()
    metric = loaded.as_metric(field_map={"response": "pred.response"})
    import dspy

    value = metric(dspy.Example(), dspy.Prediction(response="item 1: good"))
    assert 0.0 <= value <= 1.0
    # The feedback says the score is calibrated, by what and on what, and gives the judge's own raw score.
    raw = loaded.score({"response": "item 1: good"}).raw_score
    assert value.feedback.startswith(f"good = {float(value):.2f}, calibrated (platt on judge score, fitted on 12 "
                                     "labelled items")
    assert f"from the judge's own score {raw:.2f}. The judge: good" in value.feedback

    data = json.loads(path.read_text())
    data["calibrator"]["params"]["coef"][0] *= -1
    (tmp_path / "tampered.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="modified after it was saved"):
        CompiledJudge.load(tmp_path / "tampered.json")
    data = json.loads(path.read_text())
    data["version"] = 99
    (tmp_path / "future.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="version 99"):
        CompiledJudge.load(tmp_path / "future.json")
    (tmp_path / "junk.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        CompiledJudge.load(tmp_path / "junk.json")


def _resealed(data):
    """``data`` with a checksum that matches again: what anyone can do, since the checksum is no signature."""
    from calibration.fitting.compiled import checksum

    data["checksum"] = checksum({k: v for k, v in data.items() if k != "checksum"})
    return data


@pytest.mark.parametrize("name", ["os.system", "judges.run.run_file.RunFile", "judges.evaluation.RunFile",
                                  "judges_app.cli.main", "judges.metrics.rag.claims.ClaimJudge", "judges.rag._ClaimJudge",
                                  "judges.metrics.base.Judge", "judges.base.Judge", "calibration.compiled.CompiledJudge",
                                  "judges.rag.ClaimJudge", ["judges.rag.Faithfulness"], None])
def test_compiled_judge_loads_only_catalogue_classes_and_calls_nothing_else(tmp_path, name):
    """A file naming RunFile with a chosen path used to create that file during load; judges_app.cli.main ran
    the CLI. Now the class must be one of the catalogue's metric classes before anything is called."""
    data = CompiledJudge(Faithfulness()).to_dict()
    target = tmp_path / "created-by-load.jsonl"
    data["judge"]["class"], data["judge"]["params"] = name, {"path": str(target), "metrics": [], "samples": []}
    with pytest.raises(ValueError, match="refusing to load judge class"):
        CompiledJudge.from_dict(_resealed(data))
    assert not target.exists()


@pytest.mark.parametrize("name, cls", [("faithfulness_platt.json", "Faithfulness"), ("aspect_critic.json", "AspectCritic")])
def test_compiled_judge_files_saved_before_the_library_had_rooms_still_load(name, cls):
    """tests/data holds files saved by the library at 6110d9f, when judges were named ``judges.rag.Faithfulness``:
    they load as the same judge, program and calibrator, and save again under the new class names."""
    import judges

    path = Path(__file__).parent / "data" / name
    saved = json.loads(path.read_text())
    assert saved["judge"]["class"].startswith(("judges.rag.", "judges.custom."))
    compiled = CompiledJudge.load(path)
    assert type(compiled.judge) is getattr(judges, cls)
    assert compiled.judge.get_params() == saved["judge"]["params"]
    assert compiled.calibrator.to_dict() == saved["calibrator"]
    assert compiled.judge.dump_state() == saved["judge"]["program"]
    again = compiled.to_dict()
    assert again["judge"]["class"] == f"{type(compiled.judge).__module__}.{cls}"
    assert again["judge"]["class"].startswith("judges.metrics.")
    assert {k: v for k, v in again.items() if k not in ("judge", "checksum")} == \
        {k: v for k, v in saved.items() if k not in ("judge", "checksum")}


def test_compiled_judge_params_are_checked_against_the_constructor():
    from judges import AspectCritic

    data = CompiledJudge(AspectCritic(name="polite", definition="Is it polite?")).to_dict()
    assert CompiledJudge.from_dict(data).judge.definition == "Is it polite?"
    for params, message in [({"name": "x", "definition": "d", "lm": "openai/evil"}, r"parameters \['lm'\]"),
                            ({"name": "x", "definition": "d", "nope": 1}, r"parameters \['nope'\]"),
                            ({"name": "x"}, r"needs the parameters \['definition'\]"),
                            ("name=x", "must be an object")]:
        changed = json.loads(json.dumps(data))
        changed["judge"]["params"] = params
        with pytest.raises(ValueError, match=message):
            CompiledJudge.from_dict(_resealed(changed))
    for key, value, message in [("calibrator", None, "calibrator: expected an object"),
                                ("label_schema", {"kind": "binary", "low": 1, "high": 0}, "label_schema"),
                                ("judge", "judges.rag.Faithfulness", "'judge' must be an object")]:
        changed = json.loads(json.dumps(data))
        changed[key] = value
        with pytest.raises(ValueError, match=message):
            CompiledJudge.from_dict(_resealed(changed))


def test_a_compiled_file_that_cannot_score_is_refused_at_load_with_a_named_error(tmp_path):
    """From an audit: a NaN calibrator coefficient loaded and failed only after 24 LM calls; a program naming
    an unknown step raised KeyError; a file nested 200k deep raised RecursionError."""
    import math

    from calibration.fitting.calibrators import Calibrator

    calibrator = Calibrator("platt", binary=True).fit([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1])
    data = CompiledJudge(Faithfulness(), calibrator).to_dict()
    assert CompiledJudge.from_dict(json.loads(json.dumps(data))).calibrator.kind == "platt"
    nan = json.loads(json.dumps(data))
    nan["calibrator"]["params"]["coef"][0] = math.nan
    with pytest.raises(ValueError, match=r"calibrator: params\['coef'\]\[0\] = nan is not a finite number"):
        CompiledJudge.from_dict(_resealed(nan))
    unknown = json.loads(json.dumps(data))
    unknown["judge"]["program"] = {"no_such_step": {"demos": [], "signature": {}}}
    with pytest.raises(ValueError, match="its program does not fit Faithfulness"):
        CompiledJudge.from_dict(_resealed(unknown))
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ValueError, match="nested too deeply"):
        CompiledJudge.load(deep)


def test_cheap_signals():
    from calibration.fitting.signals import reference_token_recall, token_overlap

    sample = SingleTurnSample(response="埃菲尔铁塔位于巴黎", retrieved_contexts=["埃菲尔铁塔在法国巴黎"])
    assert token_overlap(sample) == pytest.approx(7 / 9)
    qa = SingleTurnSample(response="It was Wilhelm Röntgen in 1901.", reference=["Wilhelm Conrad Röntgen", "Röntgen"])
    assert reference_token_recall(qa) == 1.0
    assert reference_token_recall(SingleTurnSample(response="Marie Curie", reference="Röntgen")) == 0.0


def test_labeled_few_shot_uses_human_labels_as_demos_of_the_verdict_step():
    lm = demo_sensitive_lm()
    compiled = fit(critic(lm), synthetic(10), optimizer="labeled", calibrator=None, max_demos=4)
    demos = compiled.judge.judge_aspect.demos
    assert len(demos) == 4 and all(d.verdict == ("good" in d.response) for d in demos)
    assert judge_scores(compiled, synthetic(6, offset=70))[0].tolist() == [0.0, 1.0] * 3
    with pytest.raises(ValueError, match="not the output of one step"):
        fit(Faithfulness(lm=lm), LabelledSet.from_records(
            [{"response": "a", "retrieved_contexts": ["b"], "label": i % 2} for i in range(4)]), optimizer="labeled")


def test_label_demos_of_rating_and_dual_judges():
    from judges import AnswerAccuracy, RubricsScore

    demo = RubricsScore().label_demo({"response": "x", "user_input": "q", "retrieved_contexts": None,
                                      "reference": None}, 0.75)
    assert demo["rating"] == 4 and "score 5:" in demo["rubric"]
    demo = AnswerAccuracy().label_demo({"user_input": "q", "response": "a", "reference": "r"}, 0.4)
    assert demo == {"question": "q", "user_answer": "a", "reference_answer": "r", "rating": 2}


def test_stacked_calibrator_fits_sets_smaller_than_five_folds():
    """Found by the fuzz test: 4 continuous labels asked for 5-fold cross-validation and crashed."""
    cal = Calibrator("stacked", binary=False, features=["token_overlap"])
    cal.fit([0.1, 0.5, 0.7, 0.9], [0.0, 0.4, 0.8, 1.0], np.array([[0.0], [0.5], [0.7], [1.0]]))
    assert np.all(np.isfinite(cal.predict([0.3], np.array([[0.3]]))))


def demo_averse_lm():
    """Right without demos; once the prompt carries demos it answers the opposite (a compile that hurts)."""
    import re

    def respond(prompt):
        responses = [r for r in re.findall(r"\[\[ ## response ## \]\]\n(.*?)\n", prompt) if r != "{response}"]
        verdict = "good" in responses[-1]
        return {"reason": "scripted", "verdict": str(verdict if len(responses) == 1 else not verdict)}

    return scripted_lm(respond)


def test_compiling_never_makes_a_judge_worse_in_silence():
    """A held-back share of train checks the compiled program against the shipped one: a compile that hurts is
    refused (keep="better"), reported with both agreements; one that helps is kept."""
    hurt = fit(critic(demo_averse_lm()), synthetic(16), optimizer="labeled", calibrator=None, max_demos=3)
    guard = hurt.report["guard"]
    assert guard["decision"].startswith("shipped kept") and guard["compiled_agreement"] < guard["shipped_agreement"]
    assert hurt.report["demos"] == {"judge_aspect": 0}
    assert judge_scores(hurt, synthetic(6, offset=50))[0].tolist() == [0.0, 1.0] * 3  # still right
    forced = fit(critic(demo_averse_lm()), synthetic(16), optimizer="labeled", calibrator=None, max_demos=3,
                 keep="compiled")
    assert forced.report["guard"]["decision"].startswith("compiled kept") and forced.report["demos"]["judge_aspect"] > 0
    helped = fit(critic(demo_sensitive_lm()), synthetic(16), optimizer="labeled", calibrator=None, max_demos=3)
    assert helped.report["guard"]["decision"].startswith("compiled kept")
    small = fit(critic(demo_sensitive_lm()), synthetic(6), optimizer="labeled", calibrator=None, max_demos=3)
    assert "guard" not in small.report  # too few labels to hold any back


class _MemoCritic(AspectCritic):
    """A critic that, once compiled by ``_Memorise``, scores its own training items with their human labels:
    what a program that learned its training items looks like, in the extreme."""

    memorised: dict = {}

    def _score(self, sample):
        import dspy

        if sample.response in self.memorised:
            return dspy.Prediction(score=float(self.memorised[sample.response]), reason="memorised")
        return super()._score(sample)


class _Memorise:
    """A DSPy-style optimizer instance: the compiled copy memorises the training items' labels."""

    def compile(self, student, *, trainset):
        compiled = student.deepcopy()
        compiled.memorised = {example.response: example.label for example in trainset}
        return compiled


def noisy_lm():
    """Right about "good" on 6 of every 10 items (by item number), wrong on the rest."""

    def respond(prompt):
        response = re.findall(r"\[\[ ## response ## \]\]\n(.*?)\n", prompt)[-1]
        number = int(re.search(r"item (\d+)", response).group(1))
        good = "good" in response
        return {"reason": "scripted", "verdict": str(good if (number * 7) % 10 < 6 else not good)}

    return scripted_lm(respond)


def test_the_calibrator_is_fitted_on_scores_of_items_the_judge_did_not_learn_from():
    """A program that memorised its training items scores them perfectly; a calibrator fitted there trusts its
    score far more than unseen items justify. Cross-fitting fits it on out-of-fold scores instead."""
    lm = noisy_lm()

    def judge():
        return _MemoCritic(name="good", definition="Does the response say the item is good?", lm=lm)

    train, test = synthetic(40), synthetic(60, offset=200)
    leaky = fit(judge(), train, optimizer=_Memorise(), calibrator="platt", keep="compiled", crossfit=0)
    honest = fit(judge(), train, optimizer=_Memorise(), calibrator="platt", keep="compiled", crossfit=3)
    assert "learned from" in leaky.report["calibrator"]["scores"]
    assert honest.report["calibrator"]["scores"] == "out-of-fold scores of the training items"
    assert honest.report["crossfit"]["folds"] == 3 and sum(honest.report["crossfit"]["fold_sizes"]) == 40
    said_yes = leaky.calibrator.predict([1.0])[0], honest.calibrator.predict([1.0])[0]
    assert said_yes[0] > 0.85 and 0.5 < said_yes[1] < 0.8  # the judge is right 60% of the time on unseen items
    brier = [float(np.mean((judge_scores(c, test)[0] - np.asarray(test.labels)) ** 2)) for c in (leaky, honest)]
    assert brier[1] < brier[0]
    shipped = fit(judge(), train, optimizer=None, calibrator="platt")  # nothing learned: no folds needed
    assert "crossfit" not in shipped.report and "nothing was learned" in shipped.report["calibrator"]["scores"]


def test_optimizers_that_do_not_fit_the_judge_are_refused_before_any_work():
    from calibration.fitting.fit import check_optimizer, fitting_optimizers
    from judges import FaithfulnessWithVerifier

    calls = []
    lm = scripted_lm(lambda prompt: calls.append(prompt) or {"reason": "x", "verdict": "True"})
    with pytest.raises(ValueError, match=r"optimizer='labeled' does not fit faithfulness .*: none, bootstrap"):
        fit(Faithfulness(lm=lm), synthetic(8), optimizer="labeled")
    assert calls == []
    verifier = FaithfulnessWithVerifier()
    assert fitting_optimizers(verifier) == [None, "finetune"]
    with pytest.raises(ValueError, match=r"optimizer='bootstrap' does not fit faithfulness_with_verifier \(it has no "
                                         r"LM step to compile\); the optimizers that fit it: none, finetune"):
        check_optimizer(verifier, "bootstrap")
    def labelled(n):
        rows = [{"response": f"r{i}", "retrieved_contexts": [f"c{i}"], "label": i % 2} for i in range(n)]
        return LabelledSet.from_records(rows)

    with pytest.raises(ValueError, match=r"needs at least 53 labelled training items with these settings; here it "
                                         r"trains on 38 of the 50 labelled items after the guard's held-back share "
                                         r"\(19 of the rarer label\), and it needs 40 there"):
        check_optimizer(verifier, "finetune", labelled(50), calibrator=None)
    with pytest.raises(ValueError, match=r"needs at least 60 labelled training items with these settings; here it "
                                         r"trains on 37 of the 56 labelled items in cross-fitting fold 1 of 3"):
        check_optimizer(verifier, "finetune", labelled(56), calibrator="stacked")
    check_optimizer(verifier, "finetune", labelled(56), calibrator=None)
    check_optimizer(verifier, "finetune", labelled(60), calibrator="stacked")
    check_optimizer(verifier, "finetune", labelled(40), guard=0, calibrator=None)  # a fold's fit: nothing held back


def test_items_the_shipped_verifier_trained_on_are_never_used_to_calibrate_or_measure(monkeypatch):
    """The shipped verifier's trained-on list names BEGIN dev turns by hash; fit drops them with a warning."""
    import judges.lm.verifier.files as files
    from calibration.data.labelled import without_shipped_training
    from calibration.fitting.fit import TrainedOnItemsWarning

    assert len(files.trained_on()) > 500  # the CMU-DoG and TopicalChat dev turns
    rows = [{"response": f"the item is {'good' if i % 2 else 'bad'} {i}", "retrieved_contexts": [f"fact {i}"],
             "label": i % 2} for i in range(12)]
    data = LabelledSet.from_records(rows)
    assert without_shipped_training(data) == (data, 0)
    pretend = files.trained_on() | {files.pair_key("fact 3", "the item is good 3"),
                                    files.pair_key("fact  4", "the item is\nbad 4")}  # spaces normalised
    monkeypatch.setattr(files, "trained_on", lambda: pretend)
    kept, dropped = without_shipped_training(data)
    assert dropped == 2 and len(kept) == 10
    assert "the item is good 3" not in [s.response for s in kept.dataset]
    with pytest.warns(TrainedOnItemsWarning, match="left out 2 train items the shipped verifier trained on"):
        compiled = fit(critic(demo_sensitive_lm()), data, optimizer=None, calibrator="platt")
    assert compiled.report["dropped_trained_on"] == {"train": 2} and compiled.report["train_size"] == 10
