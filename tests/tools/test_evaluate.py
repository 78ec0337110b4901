"""radharmony.evaluate: embeddings and their cache, probes, bootstrap intervals, report metrics."""

import json
import time

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

pytest.importorskip("sklearn")
pytest.importorskip("sacrebleu")
pytest.importorskip("rouge_score")

from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.metrics import average_precision_score, roc_auc_score  # noqa: E402

from radharmony.datasets.nih import NIHChestXray14Dataset  # noqa: E402
from radharmony.errors import RadHarmonyError  # noqa: E402
from radharmony.evaluate import (CHEXPERT_14, Embeddings, embed, knn_probe, linear_probe,
                                 report_metrics, targets)
from radharmony.evaluate import embeddings as embeddings_module  # noqa: E402
from radharmony.cli.evaluate import add_parser, run  # noqa: E402
from radharmony.evaluate.metrics import PatientBootstrap, weighted_panel  # noqa: E402
from radharmony.evaluate.reports import sentence_bleu, tokens  # noqa: E402
from radharmony.fake.images import synthetic_cxr, write_png  # noqa: E402
from radharmony.fake.nih import entry_row, write_boxes, write_entries  # noqa: E402
from radharmony.data.splits import assign_folds  # noqa: E402
from radharmony.imaging.pipeline import DefaultTransform  # noqa: E402

N_PATIENTS = 60
SIZE = 32


def write_blob_replica(root, *, n_patients=N_PATIENTS, seed=0):
    """An NIH replica whose ``Effusion`` label is a bright blob in the image; one ``Hernia``."""
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(1, n_patients + 1):
        for fu in range(1 + p % 2):
            name = f"{p:08d}_{fu:03d}.png"
            blob = rng.random() < 0.4
            labels = "Effusion" if blob else ("Hernia" if p == 7 else "No Finding")
            img = synthetic_cxr(64, 64, rng=rng, bits=8).astype(np.float32)
            if blob:
                cy, cx = rng.integers(16, 48, 2)
                y, x = np.mgrid[0:64, 0:64]
                img += 200 * np.exp(-((y - cy) ** 2 + (x - cx) ** 2) / 30.0)
            write_png(root / "images" / name, np.clip(img, 0, 255).astype(np.uint8))
            rows.append(entry_row(name, labels))
    write_entries(root / "Data_Entry_2017_v2020.csv", rows)
    write_boxes(root / "BBox_List_2017.csv", [])
    return root / "images"


class SmallCNN(torch.nn.Module):
    def __init__(self, seed=0, width=16):
        super().__init__()
        torch.manual_seed(seed)  # a local generator would need every layer's init rewritten
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(1, width, 5, padding=2), torch.nn.ReLU(),
            torch.nn.Conv2d(width, width, 3, padding=1), torch.nn.ReLU())

    def forward(self, x):
        f = self.features(x)
        return torch.cat([f.amax((2, 3)), f.mean((2, 3))], 1)


@pytest.fixture(scope="module")
def blob(tmp_path_factory):
    root = tmp_path_factory.mktemp("nih_blob")
    images = write_blob_replica(root)
    ds = NIHChestXray14Dataset(images, root / "Data_Entry_2017_v2020.csv", cache_dir=None,
                               transform=DefaultTransform(size=SIZE), dtype=torch.float32)
    emb = embed(SmallCNN(), ds, batch_size=32, progress=False)
    return root, ds, emb


def test_embeddings_are_keyed_by_sample_id_in_table_order(blob):
    _, ds, emb = blob
    assert emb.sample_ids.tolist() == ds.harmonized_df["sample_id"].tolist()
    assert emb.vectors.dtype == np.float32 and emb.vectors.shape == (len(ds), 32)
    with torch.inference_mode():
        one = SmallCNN()(ds[3]["img"][None]).numpy()[0]
    np.testing.assert_allclose(emb[ds[3]["sample_id"]], one, rtol=1e-5, atol=1e-6)
    assert emb.to_frame().index.name == "sample_id"
    with pytest.raises(RadHarmonyError, match="lack some samples"):
        emb.lookup(["nih_cxr14:nope.png"])


def test_linear_probe_finds_the_blob_and_matches_sklearn(blob):
    _, ds, emb = blob
    res = linear_probe(emb, ds, folds=5, n_bootstrap=200)
    auroc = res.value("Effusion", "auroc")
    assert auroc > 0.9
    # the same out-of-fold scores with scikit-learn directly
    df = ds.harmonized_df
    x = emb.lookup(df["sample_id"]).astype(np.float64)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = df["Effusion"].to_numpy()
    folds = assign_folds(df["patient_id"], 5, seed=0)
    oof = np.empty(len(y))
    for k in range(5):
        m = LogisticRegression(class_weight="balanced", max_iter=2000, random_state=0)
        m.fit(x[folds != k], y[folds != k])
        oof[folds == k] = m.decision_function(x[folds == k])
    assert auroc == pytest.approx(roc_auc_score(y, oof), abs=1e-9)
    assert res.value("Effusion", "auprc") == pytest.approx(average_precision_score(y, oof),
                                                           abs=1e-6)
    pred = res.predictions[res.predictions["label"] == "Effusion"]
    assert auroc == pytest.approx(roc_auc_score(pred["target"], pred["score"]))


def test_probes_take_embeddings_made_elsewhere(blob):
    """A {sample_id: vector} mapping, a DataFrame indexed by sample_id (or with a sample_id
    column), an (N, D) array or tensor in dataset order: the same result as ``embed``'s."""
    _, ds, emb = blob
    want = linear_probe(emb, ds, folds=3, n_bootstrap=0).metrics
    ids = list(ds.harmonized_df["sample_id"])
    order = emb.lookup(ids)
    shuffled = np.random.default_rng(0).permutation(len(ids))
    forms = {"mapping": {ids[i]: order[i] for i in shuffled},
             "frame": emb.to_frame().iloc[shuffled],
             "column": emb.to_frame().reset_index(),
             "array": order, "tensor": torch.from_numpy(order), "list": [emb]}
    for name, form in forms.items():
        got = linear_probe(form, ds, folds=3, n_bootstrap=0).metrics
        pd.testing.assert_frame_equal(got, want, obj=name)
    pid = ds.harmonized_df["patient_id"].astype(int)
    train, test = ds.filter(pid <= 40), ds.filter(pid > 40)
    knn = knn_probe(forms["mapping"], train, test=test, k=5, n_bootstrap=0).metrics
    pd.testing.assert_frame_equal(knn, knn_probe(emb, train, test=test, k=5,
                                                 n_bootstrap=0).metrics)
    with pytest.raises(RadHarmonyError, match="no sample ids, for a probe with test="):
        knn_probe(emb.lookup(train.harmonized_df["sample_id"]), train, test=test)


@pytest.mark.parametrize("bad, match", [
    ("emb.npz", "str"), (None, "NoneType"), (np.zeros((3, 4)), "3 rows for 90 samples"),
    (np.zeros(90), "shape"), ({"nih_cxr14:x": [1.0, 2.0], "nih_cxr14:y": [1.0]}, "lengths"),
    (pd.DataFrame({"a": ["x"]}, index=["nih_cxr14:x"]), "numbers")])
def test_probes_name_the_accepted_embedding_forms(blob, bad, match):
    _, ds, _ = blob
    with pytest.raises(RadHarmonyError, match=match) as err:
        linear_probe(bad, ds, folds=3, n_bootstrap=0)
    assert "sample_id" in str(err.value)


def test_no_patient_on_both_sides_of_any_fold(blob):
    _, ds, emb = blob
    res = linear_probe(emb, ds, folds=4, n_bootstrap=0)
    groups = ds.harmonized_df["patient_id"].to_numpy()
    assert set(res.folds) == {0, 1, 2, 3}
    for k in range(4):
        assert not set(groups[res.folds == k]) & set(groups[res.folds != k])
    # the same partition as the dataset's own folds
    for k, (_, val) in enumerate(ds.get_folds(4)):
        assert set(val.harmonized_df["sample_id"]) == \
            set(ds.harmonized_df["sample_id"][res.folds == k])
    pred = res.predictions[res.predictions["label"] == "Effusion"]
    assert (pred.groupby("group")["fold"].nunique() == 1).all()


def test_intervals_cover_the_point_estimate_and_are_deterministic(blob):
    _, ds, emb = blob
    a = linear_probe(emb, ds, folds=3, n_bootstrap=300, seed=1).metrics
    b = linear_probe(emb, ds, folds=3, n_bootstrap=300, seed=1).metrics
    pd.testing.assert_frame_equal(a, b)
    m = a[a["metric"] != "threshold"].dropna(subset=["value", "ci_low"])
    assert len(m) >= 14  # Effusion's seven metrics and the macro row's
    assert ((m["ci_low"] <= m["value"] + 1e-12) & (m["value"] <= m["ci_high"] + 1e-12)).all()
    assert (m["ci_high"] > m["ci_low"]).any()
    assert list(a.columns) == ["label", "metric", "value", "ci_low", "ci_high", "n_pos",
                               "n_neg", "n_patients", "reason"]


def test_label_with_fewer_than_two_positives_is_nan_with_a_reason(blob):
    _, ds, emb = blob
    m = linear_probe(emb, ds, folds=3, n_bootstrap=50).metrics
    hernia = m[m["label"] == "Hernia"]
    assert hernia["value"].isna().all()
    # the one Hernia patient sits in one fold: the other folds train without a positive
    assert hernia["reason"].str.contains("training side has 0 positive").all()
    edema = m[m["label"] == "Edema"]
    assert edema["reason"].str.contains("0 positive").all()
    pid = ds.harmonized_df["patient_id"].astype(int)
    fixed = linear_probe(emb, ds.filter(pid != 7), test=ds.filter(pid >= 7), n_bootstrap=0)
    hernia = fixed.metrics[fixed.metrics["label"] == "Hernia"]  # one patient, two images
    assert hernia["value"].isna().all()
    assert hernia["reason"].str.startswith("training side has 0 positive").all()
    macro = m[(m["label"] == "macro") & (m["metric"] == "auroc")].iloc[0]
    assert macro["value"] == pytest.approx(m[(m["label"] == "Effusion") &
                                             (m["metric"] == "auroc")]["value"].iloc[0])
    assert macro["reason"] == "mean over 1 of 14 labels"


def test_metric_panel_on_hand_written_rows():
    y = np.array([1, 0, 1, 0, 0])
    s = np.array([0.9, 0.9, 0.2, 0.1, 0.1])  # a tie between a positive and a negative
    p = (s >= 0.5).astype(float)  # TP 1, FP 1, FN 1, TN 2
    auroc, auprc, f1, sens, spec, ppv, npv = weighted_panel(y, s, p, np.ones((1, 5)))[0]
    assert auroc == pytest.approx((0.5 + 1 + 1 + 0 + 1 + 1) / 6)  # the tie counts one half
    assert auprc == pytest.approx(average_precision_score(y, s))
    assert (f1, sens, spec, ppv, npv) == pytest.approx((0.5, 0.5, 2 / 3, 0.5, 2 / 3))
    # weights: the image drawn twice counts twice
    twice = weighted_panel(y, s, p, np.array([[2.0, 1, 1, 1, 1]]))[0]
    assert twice[0] == pytest.approx(roc_auc_score(y, s, sample_weight=[2, 1, 1, 1, 1]))
    assert np.isnan(weighted_panel(np.zeros(3), np.arange(3.0), np.zeros(3),
                                   np.ones((1, 3)))[0][:2]).all()  # no positives: undefined


def test_bootstrap_resamples_patients_and_is_fast():
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(2000), 3)  # 2,000 patients, 3 images each
    boot = PatientBootstrap(groups, n_bootstrap=1000, seed=0)
    chunks = list(boot.chunks())
    w = np.concatenate([c[1] for c in chunks])
    assert w.shape == (1000, 6000)
    assert (w.sum(1) == 6000).all()  # 2,000 patients drawn, 3 images each
    assert (w.reshape(1000, 2000, 3).std(2) == 0).all()  # a patient's images move together
    y = (rng.random(6000) < 0.3).astype(float)
    s = y + rng.normal(size=6000)
    t = time.perf_counter()
    for sl, ww in boot.chunks():
        weighted_panel(y, s, (s > 0.5).astype(float), ww)
    assert time.perf_counter() - t < 10
    point = weighted_panel(y, s, (s > 0.5).astype(float), np.ones((1, 6000)))[0]
    assert point[0] == pytest.approx(roc_auc_score(y, s))


def test_targets_mask_uncertain_and_missing_and_prefer_a_targets_method(blob):
    _, ds, _ = blob
    y, mask, names = targets(ds)
    assert names == list(ds.spec.label_cols) and mask.all()

    class Merged:
        def targets(self):
            return pd.DataFrame({"a": [1, 0, -1, np.nan], "b": [0, 1, 1, 0]})

    y, mask, names = targets(Merged())
    assert names == ["a", "b"]
    assert mask[:, 0].tolist() == [True, True, False, False] and mask[:, 1].all()
    assert y[:, 0].tolist() == [1, 0, 0, 0]


def test_masked_rows_are_left_out_of_training_and_scoring(blob):
    _, ds, emb = blob
    df = ds.harmonized_df.copy()
    df.loc[df.index[:10], "Effusion"] = -1.0  # uncertain
    df.loc[df.index[10:15], "Effusion"] = np.nan  # not mentioned

    class Relabelled:
        harmonized_df, spec = df, ds.spec

    res = linear_probe(emb, Relabelled(), folds=3, n_bootstrap=0)
    pred = res.predictions[res.predictions["label"] == "Effusion"]
    assert len(pred) == len(df) - 15
    assert not set(pred["sample_id"]) & set(df["sample_id"][:15])


def test_knn_fixed_split_and_label_efficiency(blob):
    _, ds, emb = blob
    pid = ds.harmonized_df["patient_id"].astype(int)
    train, test = ds.filter(pid <= 40), ds.filter(pid > 40)
    res = knn_probe(emb, train, test=test, k=5, n_bootstrap=100)
    assert res.value("Effusion", "auroc") > 0.85
    assert set(res.predictions["sample_id"]) <= set(test.harmonized_df["sample_id"])
    assert res.folds is None
    curve = linear_probe(emb, train, test=test, n_train=[10, 20, None], n_bootstrap=50)
    assert list(curve.metrics.columns)[0] == "n_train"
    assert set(curve.metrics["n_train"]) == {10, 20, -1}
    fig = curve.plot_label_efficiency()
    assert len(fig.axes) == 1 and len(fig.axes[0].lines) == 15  # 14 labels + macro
    roc = curve.plot_roc(labels=["Effusion", "Hernia"])
    assert len(roc.axes) == 2 and "AUROC" in roc.axes[0].get_title()
    with pytest.raises(RadHarmonyError, match="exceeds the training patients"):
        linear_probe(emb, train, test=test, n_train=1000)


def test_n_train_subsamples_whole_patients(blob):
    _, ds, emb = blob
    pid = ds.harmonized_df["patient_id"].astype(int)
    train, test = ds.filter(pid <= 40), ds.filter(pid > 40)
    from radharmony.evaluate.sides import _subsample

    groups = train.harmonized_df["patient_id"].to_numpy()
    rows = np.arange(len(groups))
    small, large = _subsample(groups, rows, 5, 0), _subsample(groups, rows, 15, 0)
    assert len(np.unique(groups[small])) == 5 and set(small) <= set(large)
    counts = pd.Series(groups).value_counts()
    assert len(small) == counts[np.unique(groups[small])].sum()  # every image of a patient


class Counting(torch.nn.Module):
    calls = 0

    def __init__(self, scale=1.0):
        super().__init__()
        self.w = torch.nn.Parameter(torch.full((1,), scale))

    def forward(self, x):
        Counting.calls += 1
        return torch.stack([x.mean((1, 2, 3)), x.amax((1, 2, 3))], 1) * self.w


def test_embed_cache_hits_and_misses(blob, tmp_path):
    root, ds, _ = blob
    cache = tmp_path / "cache"

    def run_embed(encoder, dataset):
        before = Counting.calls
        e = embed(encoder, dataset, batch_size=64, cache_dir=cache, progress=False)
        return e, Counting.calls > before

    first, computed = run_embed(Counting(), ds)
    assert computed
    again, computed = run_embed(Counting(), ds)
    assert not computed and np.array_equal(again.vectors, first.vectors)
    files = list((cache / "embeddings").glob("*.npz"))
    assert len(files) == 1 and not list((cache / "embeddings").glob("*.tmp"))
    with np.load(files[0], allow_pickle=False) as z:  # readable without pickle
        header = json.loads(str(z["header"]))
    assert header["encoder"]["class"].endswith("Counting")
    _, computed = run_embed(Counting(scale=2.0), ds)  # other weights
    assert computed
    _, computed = run_embed(Counting(), ds.filter(np.arange(len(ds)) < 50))  # table
    assert computed
    other = NIHChestXray14Dataset(ds.base_image_dir, root / "Data_Entry_2017_v2020.csv",
                                  cache_dir=None, transform=DefaultTransform(size=SIZE + 8),
                                  dtype=torch.float32)
    _, computed = run_embed(Counting(), other)  # pipeline
    assert computed
    assert len(list((cache / "embeddings").glob("*.npz"))) == 4
    files[0].write_bytes(files[0].read_bytes()[:200])  # damaged: a warned miss
    with pytest.warns(UserWarning, match="damaged cache file"):
        _, computed = run_embed(Counting(), ds)
    assert computed


def test_embed_plain_callable_needs_a_fingerprint_to_cache(blob, tmp_path):
    _, ds, _ = blob
    small = ds.filter(np.arange(len(ds)) < 8)

    def mean_pool(x):
        return x.mean((2, 3))

    with pytest.raises(RadHarmonyError, match="fingerprint"):
        embed(mean_pool, small, cache_dir=tmp_path, progress=False)
    e = embed(mean_pool, small, cache_dir=tmp_path, fingerprint="mean-pool v1",
              progress=False)
    assert e.vectors.shape == (8, 1)
    e2 = embeddings_module.embed(mean_pool, small, cache_dir=tmp_path, fingerprint="v2",
                                 progress=False)
    assert np.array_equal(e.vectors, e2.vectors)
    assert len(list((tmp_path / "embeddings").glob("*.npz"))) == 2


def test_embeddings_save_load_round_trip(tmp_path):
    e = Embeddings(np.array(["a:1", "a:2"]), np.arange(6).reshape(2, 3))
    path = e.save(tmp_path / "e.npz")
    back = Embeddings.load(path)
    assert back.sample_ids.tolist() == ["a:1", "a:2"] and np.array_equal(back.vectors,
                                                                         e.vectors)


# -- report metrics ---------------------------------------------------------------------------
def stub_labeler(texts):
    """Tiny rule labeler: ``effusion`` -> Pleural Effusion (0 after ``no``), ``edema`` ->
    Edema; nothing positive -> No Finding."""
    rows = []
    for t in texts:
        t = t.lower()
        row = dict.fromkeys(CHEXPERT_14, np.nan)
        for word, label in (("effusion", "Pleural Effusion"), ("edema", "Edema")):
            if word in t:
                row[label] = 0.0 if f"no {word}" in t or f"no pleural {word}" in t else 1.0
        if not any(v == 1 for v in row.values()):
            row["No Finding"] = 1.0
        rows.append(row)
    return pd.DataFrame(rows)


def test_identical_reports_score_one_on_every_metric():
    refs = ["Small left pleural effusion. Heart size is normal.",
            "No pleural effusion or edema. Lungs are clear.",
            "Mild pulmonary edema with bilateral effusion."]
    s = report_metrics(refs, refs, labeler=stub_labeler)
    values = s.to_dict()
    assert set(values) >= {"bleu1", "bleu2", "bleu3", "bleu4", "bleu2_rexrank", "rougeL",
                           "clinical_f1_micro", "clinical_f1_macro", "clinical_f1_micro_5",
                           "clinical_f1_macro_5"}
    for m, v in values.items():
        assert v == pytest.approx(1.0), m
    assert (s.per_report[["bleu1", "bleu4", "rougeL", "clinical_f1"]] == 1).all().all()


def test_negated_finding_changes_clinical_f1_not_bleu():
    hyp = ["there is no pleural effusion on the left side ."]
    ref = ["there is pleural effusion on the left side ."]
    s = report_metrics(hyp, ref, labeler=stub_labeler)
    assert s["clinical_f1_micro"] == 0.0 and s.per_report["clinical_f1"][0] == 0.0
    assert s["bleu1"] > 0.8 and s["bleu2_rexrank"] > 0.7 and s["rougeL"] > 0.9
    lab = s.per_label.set_index("label")
    assert lab.loc["Pleural Effusion", "fn"] == 1 and lab.loc["No Finding", "fp"] == 1
    assert s.per_report.loc[0, "hyp_positive"] == "No Finding"
    assert s.per_report.loc[0, "ref_positive"] == "Pleural Effusion"


def test_bleu_definitions():
    assert tokens("No effusion. Heart  normal.") == ["no", "effusion", ".", "heart", "normal",
                                                     "."]
    h, r = tokens("the heart is enlarged ."), tokens("the heart is normal .")
    # BLEU-2 by hand: unigram precision 4/5, bigram 2/4, equal lengths
    assert sentence_bleu(h, r, 2) == pytest.approx(np.sqrt(0.8 * 0.5))
    assert sentence_bleu(["effusion"], ["no", "effusion"], 1) == pytest.approx(np.exp(1 - 2))
    assert sentence_bleu(["a"], ["b"], 1) == 0.0 and sentence_bleu([], ["b"], 1) == 0.0
    # one pair: corpus BLEU (sacrebleu) equals the sentence BLEU
    s = report_metrics(["the heart is enlarged ."], ["the heart is normal ."], clinical=False)
    assert s["bleu2"] == pytest.approx(np.sqrt(0.8 * 0.5)) == s["bleu2_rexrank"]


def test_report_metrics_errors():
    with pytest.raises(RadHarmonyError, match="one reference per hypothesis"):
        report_metrics(["a"], ["a", "b"], clinical=False)
    with pytest.raises(RadHarmonyError, match="one string"):
        report_metrics("a b", ["a b"], clinical=False)
    with pytest.raises(RadHarmonyError, match="14 CheXpert columns"):
        report_metrics(["a"], ["a"], labeler=lambda t: pd.DataFrame({"Edema": [1] * len(t)}))


# -- command line -----------------------------------------------------------------------------
def _parse(argv):
    import argparse

    parser = argparse.ArgumentParser(prog="radharmony")
    add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_cli_reports(tmp_path, capsys):
    hyp, ref = tmp_path / "hyp.jsonl", tmp_path / "ref.jsonl"
    hyp.write_text('{"study_id": "s2", "report": "No effusion."}\n'
                   '{"study_id": "s1", "report": "Heart is normal."}\n')
    ref.write_text('{"study_id": "s1", "report": "Heart is normal."}\n'
                   '{"study_id": "s2", "report": "No effusion."}\n')
    code = run(_parse(["evaluate", "reports", str(hyp), str(ref), "--no-clinical", "--json",
                       "--out", str(tmp_path / "out")]))
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n"] == 2 and out["metrics"]["bleu1"] == pytest.approx(1.0)  # matched by id
    assert (tmp_path / "out" / "per_report.csv").is_file()
    ref.write_text('{"study_id": "s9", "report": "x"}\n')
    assert run(_parse(["evaluate", "reports", str(hyp), str(ref), "--no-clinical"])) == 1


def test_cli_probe_from_saved_embeddings(blob, tmp_path, capsys):
    root, ds, emb = blob
    path = emb.save(tmp_path / "emb.npz")
    code = run(_parse(["evaluate", "probe", "nih_cxr14", "--root", str(ds.base_image_dir),
                       "--embeddings", str(path), "--folds", "3", "--bootstrap", "20",
                       "--out", str(tmp_path / "m.csv")]))
    assert code == 0
    table = pd.read_csv(tmp_path / "m.csv")
    auroc = table[(table["label"] == "Effusion") & (table["metric"] == "auroc")]["value"]
    assert auroc.iloc[0] > 0.9
    assert "Effusion" in capsys.readouterr().out


def test_docs_examples_run(monkeypatch, tmp_path):
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "evaluate.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 6
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("tempfile.mkdtemp", lambda: str(tmp_path))
    ns: dict = {}
    for code in blocks:
        exec(compile(code, "docs/evaluate.md", "exec"), ns)
    assert ns["res"].metrics["label"].iloc[-1] == "macro"
    assert (tmp_path / "roc.png").is_file() and (tmp_path / "label_efficiency.png").is_file()
    assert ns["scores"]["clinical_f1_micro"] < ns["scores"]["bleu1"]
    assert "1 of 2 predictions are empty" in str(ns["caught"][0].message)
    assert pd.read_csv(tmp_path / "scorer" / "pred_reports.csv")["report"][0] == "[empty]"


def test_cli_probe_with_an_encoder_function(blob, tmp_path, capsys):
    _, ds, _ = blob
    code = run(_parse(["evaluate", "probe", "nih_cxr14", "--root", str(ds.base_image_dir),
                       "--encoder", "test_evaluate:SmallCNN", "--knn", "5", "--folds", "3",
                       "--bootstrap", "0", "--json", "-q"]))
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["label"] for r in rows} >= {"Effusion", "macro"}
    assert run(_parse(["evaluate", "probe", "nih_cxr14", "--root", str(ds.base_image_dir),
                       "--encoder", "nocolon"])) == 2
