"""Agreement statistics against hand-computed values; PPI coverage on a simulated biased judge."""

import json

import numpy as np
import pytest

from calibration.agreement.ppi import classical_mean, ppi_mean
from calibration.agreement.stats import (
    AgreementReport,
    agreement,
    expected_calibration_error,
)

LABELS = [1, 0, 1, 1, 0, 0, 1, 0]
SCORES = [0.9, 0.2, 0.6, 0.4, 0.7, 0.1, 0.8, 0.3]


def test_binary_statistics_match_hand_computation():
    report = agreement(LABELS, SCORES, n_bootstrap=200)
    # decisions at 0.5: [1,0,1,0,1,0,1,0] -> TP=3, FN=1, FP=1, TN=3
    assert report.value("accuracy") == pytest.approx(6 / 8)
    assert report.value("balanced_accuracy") == pytest.approx(0.75)
    # kappa = (po - pe) / (1 - pe), po = .75, pe = .5 * .5 + .5 * .5 = .5
    assert report.value("cohen_kappa") == pytest.approx(0.5)
    assert report.confusion_matrix == [[3, 1], [1, 3]]
    # ROC-AUC: positive scores .9 .6 .4 .8 vs negatives .2 .7 .1 .3 -> 4 + 3 + 3 + 4 = 14 of 16 pairs right
    assert report.value("roc_auc") == pytest.approx(14 / 16)
    brier = np.mean((np.array(SCORES) - np.array(LABELS)) ** 2)
    assert report.value("brier") == pytest.approx(brier)
    assert report.value("mae") == pytest.approx(np.mean(np.abs(np.array(SCORES) - np.array(LABELS))))
    low, high = report.stats["accuracy"]["low"], report.stats["accuracy"]["high"]
    assert 0 <= low <= report.value("accuracy") <= high <= 1


def test_ece_by_hand():
    # two bins: scores .1 (labels 0, 0) and .9 (labels 1, 0): |0 - .1| * 2/4 + |.5 - .9| * 2/4 = .25
    assert expected_calibration_error([0, 0, 1, 0], [0.1, 0.1, 0.9, 0.9], n_bins=10) == pytest.approx(0.25)


def test_ordinal_uses_quadratic_kappa_and_correlations():
    human = [1, 2, 3, 4, 5, 3]
    judge = [1, 2, 3, 5, 4, 3]
    report = agreement(human, judge, kind="ordinal", n_bootstrap=100)
    from sklearn.metrics import cohen_kappa_score

    assert report.value("quadratic_kappa") == pytest.approx(cohen_kappa_score(human, judge, weights="quadratic"))
    # tied ranks [1, 2, 3.5, 5, 6, 3.5] vs [1, 2, 3.5, 6, 5, 3.5]: Pearson of ranks = 16 / 17
    assert report.value("spearman") == pytest.approx(16 / 17)
    assert report.value("accuracy") == pytest.approx(4 / 6)


def test_undefined_statistics_are_none_not_nan_and_report_round_trips():
    report = agreement([1, 1, 1], [0.9, 0.8, 0.7], n_bootstrap=50)
    assert report.value("roc_auc") is None
    again = AgreementReport.from_dict(json.loads(report.to_json()))
    assert again.to_dict() == report.to_dict()
    assert "roc_auc" in str(report) and "n/a" in str(report)
    with pytest.raises(ValueError, match="not finite"):
        agreement([1, 0], [0.5, float("nan")])
    with pytest.raises(ValueError, match="kind"):
        agreement([1, 0], [1, 0], kind="nominal")


def simulated(rng, n, true_rate=0.3):
    y = (rng.random(n) < true_rate).astype(float)
    # a biased judge: says "yes" too often, and is noisy
    score = np.clip(0.25 + 0.5 * y + rng.normal(0, 0.2, n), 0, 1)
    return y, score


def test_ppi_interval_covers_the_true_mean_about_95_percent_despite_judge_bias():
    rng = np.random.default_rng(0)
    true_rate, covered, widths, naive_covered = 0.3, 0, [], 0
    repeats = 400
    for _ in range(repeats):
        y_lab, f_lab = simulated(rng, 80, true_rate)
        _, f_unl = simulated(rng, 2000, true_rate)
        estimate = ppi_mean(y_lab, f_lab, f_unl)
        covered += estimate.low <= true_rate <= estimate.high
        widths.append(estimate.width)
        naive = f_unl.mean()  # the judge's own mean is biased (about .4 here)
        naive_covered += abs(naive - true_rate) < 0.02
    assert 0.92 <= covered / repeats <= 0.98
    assert naive_covered == 0
    classical = classical_mean(simulated(np.random.default_rng(1), 80, true_rate)[0])
    assert np.mean(widths) < classical.width  # the unlabelled set buys a narrower interval


def test_ppi_power_tuning_falls_back_when_the_judge_is_useless():
    rng = np.random.default_rng(3)
    y = (rng.random(60) < 0.5).astype(float)
    estimate = ppi_mean(y, rng.random(60), rng.random(1000))
    assert estimate.lam < 0.3
    with pytest.raises(ValueError, match="labels"):
        ppi_mean([1, 0], [0.5], [0.1, 0.2])


def test_numpy_statistics_match_scikit_learn_and_scipy():
    from scipy import stats
    from sklearn import metrics

    rng = np.random.default_rng(3)
    for trial in range(30):
        n = int(rng.integers(5, 40))
        y = rng.integers(0, 2, n).astype(float)
        s = np.round(rng.random(n), 1)  # rounded: ties on purpose
        if len(set(y)) < 2 or np.std(s) == 0:
            continue
        report = agreement(y, s, n_bootstrap=1)
        d = (s >= 0.5).astype(int)
        assert report.value("roc_auc") == pytest.approx(metrics.roc_auc_score(y, s))
        assert report.value("accuracy") == pytest.approx(metrics.accuracy_score(y, d))
        assert report.value("balanced_accuracy") == pytest.approx(metrics.balanced_accuracy_score(y, d))
        kappa = metrics.cohen_kappa_score(y, d)
        assert report.value("cohen_kappa") == (None if np.isnan(kappa) else pytest.approx(kappa))
        assert report.value("brier") == pytest.approx(metrics.brier_score_loss(y, s))
        assert report.value("spearman") == pytest.approx(stats.spearmanr(y, s)[0])
        assert report.value("pearson") == pytest.approx(stats.pearsonr(y, s)[0])
        assert report.value("kendall") == pytest.approx(stats.kendalltau(y, s)[0])
        assert report.value("mae") == pytest.approx(metrics.mean_absolute_error(y, s))
    cosines = agreement([0, 1, 0, 1], [-0.2, 0.8, 0.1, 0.9], n_bootstrap=10)
    assert cosines.value("brier") is None and cosines.value("ece") is None and cosines.value("roc_auc") == 1.0


def test_the_bootstrap_computes_every_resample_at_once_with_the_values_of_one_at_a_time():
    """``agreement`` and ``compare`` compute most statistics on all resamples at once (rows of a matrix); each
    resample's value is the one the statistic gives alone, None where it is undefined (one class, a constant
    side, scores outside [0, 1]): ties, tiny sets and every label kind."""
    from calibration.agreement.resampled import batched_statistics, on_resamples
    from calibration.agreement.stats import statistic_functions

    rng = np.random.default_rng(5)
    cases = []
    for n in (2, 3, 5, 12, 40):
        y = rng.integers(0, 2, n).astype(float)
        cases += [("binary", y, np.round(rng.random(n), 1)), ("binary", y, rng.random(n) * 1.4 - 0.2),
                  ("binary", np.ones(n), np.round(rng.random(n), 1)),
                  ("ordinal", rng.integers(1, 6, n).astype(float), np.round(rng.random(n) * 4 + 1, 1)),
                  ("continuous", np.round(rng.random(n), 1), rng.random(n))]
    for kind, y, s in cases:
        statistics, batched = statistic_functions(kind, 0.5), batched_statistics(kind, 0.5, y)
        assert {"spearman", "pearson", "kendall", "mae"} <= set(batched) <= set(statistics)
        draws = rng.integers(0, len(y), size=(300, len(y)))
        for name in batched:
            together = on_resamples(name, statistics[name], batched, y, s, draws)
            alone = [statistics[name](y[d], s[d]) for d in draws]
            assert [v is None for v in together] == [v is None for v in alone], (kind, len(y), name)
            assert [v for v in together if v is not None] == pytest.approx([v for v in alone if v is not None],
                                                                            abs=1e-12), (kind, len(y), name)
    assert set(batched_statistics("binary", 0.5, np.array([0.0, 1.0]))) == set(statistic_functions("binary", 0.5))


def test_ece_interval_is_moved_by_the_bootstrap_bias_and_an_undefined_brier_says_why():
    """A well-calibrated scorer on 120 items: ECE's percentile interval missed its own estimate in 7 of 40 sets
    (a resample's repeated items make ECE look worse); the bias-shifted one holds it in all 40."""
    import calibration.agreement.stats as stats

    rng = np.random.default_rng(1)
    sets = []
    for _ in range(40):
        s = rng.random(120)
        sets.append(((rng.random(120) < s).astype(int), s))
    shifted = [stats.agreement(y, s, n_bootstrap=1000, seed=t).stats["ece"] for t, (y, s) in enumerate(sets)]
    assert all(e["low"] <= e["value"] <= e["high"] and e["ci"] == "bias-shifted" for e in shifted)
    percentile = 0
    for t, (y, s) in enumerate(sets):
        samples = np.random.default_rng(t).integers(0, 120, size=(1000, 120))
        values = [stats.expected_calibration_error(y[d], s[d]) for d in samples]
        low = np.quantile(values, 0.025)
        percentile += stats.expected_calibration_error(y, s) < low
    assert percentile >= 3  # the percentile interval does miss: what the shift is for
    cosine = stats.agreement([0, 1, 0, 1], [-0.2, 0.9, 0.1, 0.8], n_bootstrap=50)
    assert cosine.stats["brier"]["value"] is None
    assert cosine.stats["brier"]["undefined"] == "scores outside [0, 1] are not probabilities"


def test_delong_matches_scikit_learn_s_aucs_and_holds_its_level_and_holm_steps_down():
    from sklearn.metrics import roc_auc_score

    from calibration.agreement.pairs import delong_test, holm

    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    a, b = y + rng.normal(0, 0.8, 200), y + rng.normal(0, 1.2, 200)
    found = delong_test(y, a, b)
    assert found["auc_a"] == pytest.approx(roc_auc_score(y, a)) and found["auc_b"] == pytest.approx(roc_auc_score(y, b))
    assert delong_test(y, a, a)["p"] == 1.0
    rejected = 0
    for _ in range(200):  # two scorers alike: about 5% of tests reject at 0.05
        y = rng.integers(0, 2, 100)
        rejected += delong_test(y, y + rng.normal(0, 1, 100), y + rng.normal(0, 1, 100))["p"] < 0.05
    assert 2 <= rejected <= 20
    assert holm([0.01, 0.04, 0.03, None]) == pytest.approx([0.03, 0.06, 0.06, None])


def test_fleiss_kappa_and_krippendorff_alpha_give_the_textbook_values():
    """Fleiss (1971)'s 10 items x 14 raters: 0.210; Krippendorff's own nominal example (3 coders, gaps): 0.691."""
    from calibration.agreement.raters import consensus, fleiss_kappa, krippendorff_alpha

    table = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1], [7, 7, 0, 0, 0],
             [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    ratings = np.array([[c for c, n in enumerate(row) for _ in range(n)] for row in table], dtype=float)
    assert fleiss_kappa(ratings) == pytest.approx(0.210, abs=5e-4)
    nan = np.nan
    coders = np.array([[nan, nan, nan, nan, nan, 3, 4, 1, 2, 1, 1, 3, 3, nan, 3],
                       [1, nan, 2, 1, 3, 3, 4, 3, nan, nan, nan, nan, nan, nan, nan],
                       [nan, nan, 2, 1, 3, 4, 4, nan, 2, 1, 1, 3, 3, nan, 4]])
    assert krippendorff_alpha(coders.T, "nominal") == pytest.approx(0.691, abs=5e-4)
    assert consensus(np.array([[1, 0, 1], [0, 0, nan], [1, 0, nan]]), "nominal").tolist() == [1, 0, 1]
