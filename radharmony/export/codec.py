"""One sample <-> the members of a WebDataset tar shard.

A sample ``ds[i]`` becomes, under the key ``f"{i:09d}"`` (digits only: WebDataset splits a
member name at its first dot into key and extension):

* ``<key>.png``: the preprocessed image as the cache holds it (the quantized ``(size, size)``
  uint8 or uint16 array of :meth:`DefaultTransform.encode`), a lossless grayscale PNG;
* ``<key>.<name>.png`` for every 2-D uint8/uint16 output (``mask``), also lossless;
* ``<key>.json``: ``sample_id`` and every other output, in the sample's key order. Tensors are
  ``{"__tensor__": dtype, "shape": [...], "data": [flat values]}`` (float32 values survive the
  round trip through JSON exactly); PNG members are referenced as
  ``{"__png__": extension, "shape": [...], "dtype": ...}``; text, lists and dicts are plain
  JSON (``NaN`` is written as Python's ``json`` writes it).

:func:`decode_sample` inverts this for a sample as the ``webdataset`` library yields it (a dict
of raw bytes keyed by extension), giving back exactly ``ds[i]``.
"""

from __future__ import annotations

import hashlib

import json
from typing import Any

import cv2
import numpy as np
import torch

from ..errors import RadHarmonyError
from ..imaging.pipeline import DefaultTransform

IMAGE_EXT = "png"
JSON_EXT = "json"
#: PNG compression level: lossless at any level; fixed so shards are byte-reproducible
PNG_LEVEL = 3


class ExportError(RadHarmonyError, ValueError):
    """An export could not be written or read back (bad arguments, failed samples, a shard
    that is not a radharmony export)."""


def png_bytes(arr: np.ndarray, *, where: str) -> bytes:
    """``arr`` (2-D uint8 or uint16) as PNG bytes, deterministic for a given array."""
    if arr.ndim != 2 or arr.dtype not in (np.uint8, np.uint16):
        raise ExportError(f"{where}: cannot store the array as a PNG",
                          expected="a 2-D uint8 or uint16 array",
                          found=f"{arr.dtype} of shape {arr.shape}",
                          fix="export datasets that use the built-in pipeline")
    ok, buf = cv2.imencode(".png", np.ascontiguousarray(arr),
                           [cv2.IMWRITE_PNG_COMPRESSION, PNG_LEVEL])
    if not ok:  # pragma: no cover - OpenCV encodes every 2-D uint8/uint16 array
        raise ExportError(f"{where}: PNG encoding failed", expected="an encoded image",
                          found="cv2.imencode returned False", fix="report this as a bug")
    return buf.tobytes()


def _png_array(data: bytes, *, where: str) -> np.ndarray:
    arr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED) \
        if isinstance(data, (bytes, bytearray, memoryview)) and len(data) else None
    if arr is None or arr.ndim != 2:
        raise ExportError(f"{where}: not a grayscale PNG", expected="the bytes of a 1-channel "
                          "PNG as written by to_webdataset", found=f"{type(data).__name__} "
                          f"of {len(data) if hasattr(data, '__len__') else '?'} bytes",
                          fix="read the shards with webdataset without a decoder "
                              "(no .decode()) and pass the raw samples")
    return arr


def _is_png_output(value) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype == torch.uint8 and \
        (value.ndim == 2 or value.ndim == 3 and value.shape[0] == 1) and value.numel() > 0


def _json_value(value, *, where: str):
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu()
        return {"__tensor__": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
                "data": t.reshape(-1).tolist()}
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [_json_value(v, where=where) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v, where=where) for k, v in value.items()}
    raise ExportError(f"{where}: an output of type {type(value).__name__} cannot be exported",
                      expected="tensors, text, numbers, None, lists and dicts",
                      found=repr(value)[:80], fix="report this output type as a bug")


def encode_members(key: str, sample_id: str, image: np.ndarray, outputs: dict, *,
                   bits: int) -> dict[str, bytes]:
    """The tar members (name -> bytes) of one sample; ``outputs`` excludes ``sample_id`` and
    ``img`` and keeps the sample's key order."""
    where = f"sample {sample_id}"
    members = {f"{key}.{IMAGE_EXT}": png_bytes(image, where=where)}
    doc: dict[str, Any] = {"sample_id": sample_id,
                           "img": {"__png__": IMAGE_EXT, "shape": list(image.shape),
                                   "dtype": str(image.dtype), "bits": bits}}
    for name, value in outputs.items():
        if _is_png_output(value):
            ext = f"{name.replace('.', '_')}.png"
            arr = value.numpy().reshape(value.shape[-2:])
            members[f"{key}.{ext}"] = png_bytes(arr, where=f"{where}, output {name!r}")
            doc[name] = {"__png__": ext, "shape": list(value.shape), "dtype": "uint8"}
        else:
            doc[name] = _json_value(value, where=f"{where}, output {name!r}")
    members[f"{key}.{JSON_EXT}"] = json.dumps(doc, ensure_ascii=False,
                                              separators=(",", ":")).encode("utf-8")
    return members


def _from_json(value):
    if isinstance(value, dict):
        if "__tensor__" in value:
            dtype = getattr(torch, value["__tensor__"])
            return torch.tensor(value["data"], dtype=dtype).reshape(value["shape"])
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


def decode_sample(sample: dict, *, dtype: torch.dtype = torch.float32) -> dict:
    """A sample read back by the ``webdataset`` library -> exactly the dataset's ``ds[i]``.

    ``sample`` is what ``webdataset.WebDataset(urls)`` yields without a decoder: raw bytes
    keyed by extension (``"png"``, ``"json"``, ``"mask.png"``; ``"__key__"`` and ``"__url__"``
    are ignored). ``img`` is rebuilt from the stored quantized image with the pipeline's own
    conversion, so it equals ``ds[i]["img"]`` of a dataset built with the same ``dtype``.

    Example:
        >>> import webdataset as wds  # doctest: +SKIP
        >>> for raw in wds.WebDataset("out/xraydar_multimodal-000000.tar", shardshuffle=False):
        ...     sample = decode_sample(raw, dtype=torch.float32)  # doctest: +SKIP
    """
    key = sample.get("__key__", "?")
    where = f"export sample {key} ({sample.get('__url__', 'unknown shard')})"
    raw = sample.get(JSON_EXT)
    if raw is None:
        raise ExportError(f"{where} has no .json member", expected="the members .png and "
                          ".json written by to_webdataset", found=f"members {sorted(sample)}",
                          fix="pass samples of a radharmony export")
    try:
        doc = raw if isinstance(raw, dict) else json.loads(raw)
    except (ValueError, TypeError) as exc:
        raise ExportError(f"{where}: its .json member is not valid JSON",
                          expected="the JSON written by to_webdataset",
                          found=f"{type(exc).__name__}: {exc}",
                          fix="rewrite the shard (to_webdataset rewrites shards whose "
                              "checksum does not match the manifest)") from None
    out: dict[str, Any] = {}
    for name, value in doc.items():
        if isinstance(value, dict) and "__png__" in value:
            ext = value["__png__"]
            if ext not in sample:
                raise ExportError(f"{where} lacks its .{ext} member",
                                  expected=f"a .{ext} member for output {name!r}",
                                  found=f"members {sorted(sample)}",
                                  fix="read the shard without select_files/rename_files")
            arr = _png_array(sample[ext], where=f"{where}, member .{ext}")
            if name == "img":
                out[name] = DefaultTransform.to_tensor(arr, dtype)
            else:
                out[name] = torch.from_numpy(arr.astype(np.uint8)).reshape(value["shape"])
        else:
            out[name] = _from_json(value)
    return out


__all__ = ["ExportError", "decode_sample", "encode_members", "png_bytes"]


def study_key(study_id) -> str:
    """A WebDataset- and file-safe key of a study: the first 16 hex digits of the SHA-1 of its
    id (ReXGradient's ids hold dots, which WebDataset reads as an extension)."""
    return hashlib.sha1(str(study_id).encode()).hexdigest()[:16]
