"""The viewer's study pages: a study's views, sections and prior over HTTP."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
import warnings

import cv2
import numpy as np
import torch

from radharmony.datasets.rexgradient import ReXGradientTrainDataset
from radharmony.viewer import make_server

from study_fixtures import rex_fake  # noqa: F401 (fixture)


def _get(url: str):
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.headers.get("Content-Type"), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read()


def test_study_pages(rex_fake, tmp_path):
    meta = rex_fake / "download" / "metadata" / "train_metadata_view_position.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = ReXGradientTrainDataset(rex_fake / "deid_png", meta, cache_dir=None,
                                     dtype=torch.float32)
    srv = make_server([ds], port=0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        status, ctype, body = _get(srv.url + "studies")
        assert status == 200 and b"study.js" in body and ctype.startswith("text/html")
        assert _get(srv.url + "static/study.js")[0] == 200
        found_prior = False
        for i in range(12):
            s = json.loads(_get(srv.url + f"api/study?index={i}")[2])
            assert s["index"] == i and set(s["sections"]) >= {"findings", "impression"}
            for j in range(len(s["views"])):
                st, ct, png = _get(srv.url + f"study.png?index={i}&j={j}")
                img = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_UNCHANGED)
                assert st == 200 and ct == "image/png" and img.shape == (224, 224)
            if s["prior"]:
                found_prior = True
                assert s["prior"]["days"] > 0
                assert _get(srv.url + f"study.png?index={i}&j=0&prior=1")[0] == 200
        assert found_prior
        assert _get(srv.url + "api/study?index=9999")[0] == 404
        assert _get(srv.url + "study.png?index=0&j=99")[0] == 404
    finally:
        srv.shutdown()
