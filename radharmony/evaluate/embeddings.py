"""Frozen-encoder embeddings of a dataset, keyed by ``sample_id``, cached without pickle.

The cache file is one ``.npz`` (``allow_pickle=False``) under ``<cache_dir>/embeddings/``
holding ``sample_ids`` (fixed-width unicode), ``vectors`` (float32) and ``header``, a JSON
text with the encoder's fingerprint, the dataset's table fingerprint, the image pipeline's
parameters, the vectors' shape and a BLAKE2b checksum of their bytes. The file name is a hash
of everything but the checksum, so any change to the encoder's weights, its class, the
table's ``sample_id`` / ``image_path`` columns, the image root, the pipeline or the input
dtype is a miss; a damaged file is a miss too (with a warning). Files are written to a
temporary name and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import numpy as np
import pandas as pd
import torch

from ..data.collate import collate
from ..errors import RadHarmonyError, SavedFileError

FORMAT = "radharmony-embeddings"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Embeddings:
    """One vector per sample: ``sample_ids`` (N,) and ``vectors`` (N, D) float32, same order.

    >>> e = Embeddings(np.array(["nih_cxr14:a.png", "nih_cxr14:b.png"]), np.eye(2, 3))
    >>> e.to_frame().shape, e["nih_cxr14:b.png"].tolist()
    ((2, 3), [0.0, 1.0, 0.0])
    """

    sample_ids: np.ndarray
    vectors: np.ndarray

    def __post_init__(self):
        ids = np.asarray(self.sample_ids).astype(str)
        vec = np.asarray(self.vectors, dtype=np.float32)
        if vec.ndim != 2 or len(vec) != len(ids):
            raise RadHarmonyError("Embeddings need one vector per sample id",
                                  expected=f"vectors of shape ({len(ids)}, D)",
                                  found=f"shape {vec.shape}", fix="pass a 2-D array, one row "
                                  "per sample_id")
        object.__setattr__(self, "sample_ids", ids)
        object.__setattr__(self, "vectors", vec)

    def __len__(self) -> int:
        return len(self.sample_ids)

    @property
    def dim(self) -> int:
        return self.vectors.shape[1]

    def __getitem__(self, sample_id: str) -> np.ndarray:
        return self.lookup([sample_id])[0]

    def lookup(self, sample_ids) -> np.ndarray:
        """The vectors of ``sample_ids``, in that order; raises naming the first missing ids."""
        index = pd.Index(self.sample_ids)
        if not index.is_unique:
            dup = index[index.duplicated()].unique()[:3].tolist()
            raise RadHarmonyError("Embeddings hold a sample id twice", expected="unique ids",
                                  found=f"duplicates such as {dup}",
                                  fix="embed each dataset once (Embeddings.concat joins them)")
        rows = index.get_indexer(pd.Index(np.asarray(sample_ids).astype(str)))
        if (rows < 0).any():
            missing = np.asarray(sample_ids)[rows < 0]
            raise RadHarmonyError("Embeddings lack some samples of the dataset",
                                  expected="a vector for every sample_id of the dataset",
                                  found=f"{len(missing)} missing, e.g. {missing[:3].tolist()}",
                                  fix="embed(encoder, dataset) on this dataset (or concat "
                                  "the embeddings of train and test)")
        return self.vectors[rows]

    def to_frame(self) -> pd.DataFrame:
        """A DataFrame indexed by ``sample_id``, one float32 column per dimension."""
        return pd.DataFrame(self.vectors, index=pd.Index(self.sample_ids, name="sample_id"))

    @classmethod
    def concat(cls, parts) -> "Embeddings":
        """One object from several (e.g. a train and a test dataset's)."""
        parts = list(parts)
        return cls(np.concatenate([p.sample_ids for p in parts]),
                   np.concatenate([p.vectors for p in parts]))

    def save(self, path: str | os.PathLike, *, header: dict | None = None) -> Path:
        """Write an ``.npz`` (no pickle) that :meth:`load` reads; atomic (temp + rename)."""
        path = Path(path)
        head = {"format": FORMAT, "format_version": FORMAT_VERSION, **(header or {}),
                "shape": list(self.vectors.shape), "checksum": _checksum(self.vectors)}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            np.savez(fh, sample_ids=self.sample_ids, vectors=self.vectors,
                     header=np.array(json.dumps(head, sort_keys=True)))
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Embeddings":
        """Embeddings written by :meth:`save` (or found in the cache); checks the checksum."""
        return _read(Path(path))[0]


#: what the probes accept as embeddings, for error messages
FORMS = ("Embeddings (from embed, or Embeddings(sample_ids, vectors)), a list of them, a "
         "{sample_id: vector} mapping, a DataFrame indexed by sample_id (or with a sample_id "
         "column) and one numeric column per dimension, or an (N, D) array / tensor in the "
         "dataset's row order")


def as_embeddings(value, dataset, *, by_order: bool = True) -> Embeddings:
    """``value`` as :class:`Embeddings` for ``dataset``'s samples: any of :data:`FORMS`
    (embeddings computed elsewhere); anything else raises a RadHarmonyError naming them.
    ``by_order=False`` refuses the array form (one array cannot serve two datasets)."""
    if isinstance(value, Embeddings):
        return value
    if isinstance(value, (list, tuple)) and value and \
            all(isinstance(v, Embeddings) for v in value):
        return Embeddings.concat(value)
    what = type(value).__name__
    if isinstance(value, pd.DataFrame):
        frame = value.set_index("sample_id") if "sample_id" in value.columns else value
        text = [c for c, t in frame.dtypes.items() if not pd.api.types.is_numeric_dtype(t)]
        if text:
            raise _form_error(what, f"columns that are not numbers: {text[:3]}")
        return Embeddings(frame.index.astype(str).to_numpy(), frame.to_numpy(np.float32))
    if isinstance(value, (Mapping, pd.Series)):
        items = list(value.items())
        ids = [str(k) for k, _ in items]
        try:
            vectors = [np.asarray(_numpy(v), np.float32).reshape(-1) for _, v in items]
        except (TypeError, ValueError):
            raise _form_error(what, "values that are not numeric vectors") from None
        if len({len(v) for v in vectors}) > 1:
            raise _form_error(what, f"vectors of lengths {sorted({len(v) for v in vectors})}")
        return Embeddings(np.array(ids, dtype=str), np.stack(vectors) if vectors else
                          np.zeros((0, 0), np.float32))
    if isinstance(value, (np.ndarray, torch.Tensor)) or isinstance(value, (list, tuple)) \
            and value and not isinstance(value[0], str):
        try:
            arr = np.asarray(_numpy(value), np.float32)
        except (TypeError, ValueError):
            raise _form_error(what, "values that are not one numeric array") from None
        n = len(dataset.harmonized_df)
        if not by_order:
            raise _form_error(what, "an array, which gives no sample ids, for a probe with "
                              "test= (two datasets)")
        if arr.ndim != 2:
            raise _form_error(what, f"shape {arr.shape}, not (N, D)")
        if len(arr) != n:
            raise _form_error(what, f"{len(arr)} rows for {n} samples (an array is read in "
                              "the dataset's row order: one row per sample)")
        return Embeddings(dataset.harmonized_df["sample_id"].astype(str).to_numpy(), arr)
    raise _form_error(what, repr(value)[:60])


def _numpy(value):
    return value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else value


def _form_error(what: str, found: str) -> RadHarmonyError:
    return RadHarmonyError(f"Embeddings given as a {what} cannot be read", expected=FORMS,
                           found=found, fix="pass one of those forms; a saved .npz file: "
                           "Embeddings.load(path)")


def _checksum(vectors: np.ndarray) -> str:
    return hashlib.blake2b(np.ascontiguousarray(vectors).tobytes(), digest_size=16).hexdigest()


def _read(path: Path) -> tuple[Embeddings, dict]:
    fix = "delete the file and embed again"
    try:
        with np.load(path, allow_pickle=False) as z:
            header = json.loads(str(z["header"]))
            if header.get("format") != FORMAT:
                raise ValueError(f"format {header.get('format')!r}")
            emb = Embeddings(z["sample_ids"], z["vectors"])
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise SavedFileError(f"{path} is not a readable embeddings file",
                             expected=f"an .npz written by Embeddings.save ({FORMAT})",
                             found=f"{type(exc).__name__}: {exc}", fix=fix) from None
    if list(emb.vectors.shape) != header.get("shape") or \
            _checksum(emb.vectors) != header.get("checksum"):
        raise SavedFileError(f"{path} does not match its header", expected="vectors with the "
                             "shape and checksum recorded when it was written",
                             found="a different shape or checksum", fix=fix)
    return emb, header


# -- fingerprints -------------------------------------------------------------------------------
def _digest(*parts) -> str:
    h = hashlib.blake2b(digest_size=16)
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()


def encoder_fingerprint(encoder, fingerprint: str | None = None) -> dict:
    """What identifies ``encoder``: class (or callable) name, a hash of every state-dict
    tensor's name, dtype, shape and bytes, and the user's ``fingerprint`` text.

    A plain callable has no weights to hash: it needs ``fingerprint=`` to be cached (change
    the text whenever its behaviour changes). Neither covers edits to a ``forward``'s code.
    """
    cls = encoder if isinstance(encoder, type) else type(encoder)
    if isinstance(encoder, torch.nn.Module):
        h = hashlib.blake2b(digest_size=16)
        for name, t in encoder.state_dict().items():
            t = t.detach().cpu().contiguous()
            h.update(f"{name}|{t.dtype}|{tuple(t.shape)}\0".encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
        return {"kind": "module", "class": f"{cls.__module__}.{cls.__qualname__}",
                "state_dict": h.hexdigest(), "fingerprint": fingerprint}
    name = getattr(encoder, "__qualname__", None) or cls.__qualname__
    module = getattr(encoder, "__module__", None) or cls.__module__
    return {"kind": "callable", "name": f"{module}.{name}", "fingerprint": fingerprint}


def table_fingerprint(dataset) -> dict:
    """What identifies ``dataset``'s inputs: a hash of its ``sample_id`` and ``image_path``
    columns, its class, image root, image pipeline parameters and sample dtype."""
    df = dataset.harmonized_df
    ids = df["sample_id"].astype(str).to_numpy()
    paths = df["image_path"].astype(str).to_numpy()
    table = _digest(len(ids), "\x1f".join(ids), "\x1f".join(paths))
    user = getattr(dataset, "user_transform", None)
    default = getattr(dataset, "default_transform", None)
    if user is not None:
        pipeline = {"user_transform": f"{type(user).__module__}.{type(user).__qualname__}",
                    "repr": repr(user)}
    elif default is not None and hasattr(default, "params"):
        pipeline = default.params()
    else:
        pipeline = None
    root = getattr(dataset, "base_image_dir", None)
    return {"class": f"{type(dataset).__module__}.{type(dataset).__qualname__}",
            "rows": len(ids), "table": table, "pipeline": pipeline,
            "base_image_dir": None if root is None else str(Path(root).resolve()),
            "dtype": str(getattr(dataset, "dtype", None))}


def cache_path(cache_dir, encoder_fp: dict, table_fp: dict) -> Path:
    key = _digest(json.dumps({"encoder": encoder_fp, "dataset": table_fp,
                              "format_version": FORMAT_VERSION}, sort_keys=True))
    return Path(cache_dir) / "embeddings" / f"{key}.npz"


# -- embedding ----------------------------------------------------------------------------------
def _device(device) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def embed(encoder: torch.nn.Module | Callable, dataset, *, batch_size: int = 64,
          num_workers: int = 0, device=None, cache_dir: str | os.PathLike | None = None,
          fingerprint: str | None = None, autocast: bool = True,
          progress: bool = True) -> Embeddings:
    """Embed every image of ``dataset`` with a frozen ``encoder``: ``(B, 1, H, W) -> (B, D)``.

    Args:
        encoder: a ``torch.nn.Module`` (put in eval mode, moved to ``device``) or any
            callable on a float32 image batch; outputs with more than 2 dims are flattened.
        dataset: a radharmony dataset (or any Dataset of dicts with ``img`` and
            ``sample_id`` that has ``harmonized_df``), batched by a ``DataLoader`` with
            :func:`radharmony.collate`.
        device: default CUDA when available (with bfloat16 autocast unless
            ``autocast=False``), else CPU in float32.
        cache_dir: keep the result in ``<cache_dir>/embeddings/`` (see the module docs);
            a plain callable then needs ``fingerprint=``.
        fingerprint: text naming the encoder's version (added to its fingerprint).

    Example::

        emb = embed(torchvision.models.resnet18(num_classes=128), ds, cache_dir="./cache")
        emb.to_frame()  # sample_id x 128
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise RadHarmonyError("embed batch_size must be a positive integer",
                              expected="e.g. batch_size=64", found=repr(batch_size),
                              fix="pass batch_size=64")
    if not callable(encoder):
        raise RadHarmonyError("embed needs a callable encoder", expected="a torch.nn.Module "
                              "or a function from (B, 1, H, W) images to (B, D)",
                              found=type(encoder).__name__, fix="pass the model itself")
    path = header = None
    if cache_dir is not None:
        enc_fp = encoder_fingerprint(encoder, fingerprint)
        if enc_fp["kind"] == "callable" and fingerprint is None:
            raise RadHarmonyError("A plain callable encoder cannot be cached without a "
                                  "fingerprint", expected="fingerprint='<name and version>' "
                                  "(its behaviour cannot be hashed)", found=enc_fp["name"],
                                  fix="pass fingerprint=..., wrap it in a torch.nn.Module, or "
                                  "drop cache_dir")
        header = {"encoder": enc_fp, "dataset": table_fingerprint(dataset)}
        path = cache_path(cache_dir, header["encoder"], header["dataset"])
        if path.is_file():
            try:
                emb, stored = _read(path)
                if stored.get("encoder") == header["encoder"] and \
                        stored.get("dataset") == header["dataset"] and \
                        np.array_equal(emb.sample_ids,
                                       dataset.harmonized_df["sample_id"].astype(str)):
                    return emb
            except SavedFileError as exc:
                warnings.warn(f"embed: ignoring a damaged cache file ({exc})", stacklevel=2)
    emb = _compute(encoder, dataset, batch_size=batch_size, num_workers=num_workers,
                   device=_device(device), autocast=autocast, progress=progress)
    if path is not None:
        emb.save(path, header=header)
    return emb


def _compute(encoder, dataset, *, batch_size, num_workers, device, autocast, progress):
    from tqdm.auto import tqdm

    is_module = isinstance(encoder, torch.nn.Module)
    was_training = is_module and encoder.training
    if is_module:
        encoder.eval().to(device)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=False,
                                         num_workers=num_workers, collate_fn=collate,
                                         pin_memory=device.type == "cuda")
    use_amp = autocast and device.type == "cuda"
    ids, chunks = [], []
    try:
        with torch.inference_mode():
            for batch in tqdm(loader, desc="embedding", unit="batch", disable=not progress):
                img = batch["img"]
                if not isinstance(img, torch.Tensor):
                    raise RadHarmonyError("embed needs equal-size image tensors",
                                          expected="batch['img'] one (B, C, H, W) tensor",
                                          found=f"a list of {len(img)} (sizes differ)",
                                          fix="use the built-in transform or resize to one "
                                          "size")
                x = img.to(device, non_blocking=True).float()
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_amp):
                    out = encoder(x)
                out = torch.as_tensor(out)
                if out.ndim < 2 or out.shape[0] != len(x):
                    raise RadHarmonyError("The encoder's output has no batch dimension",
                                          expected=f"shape ({len(x)}, D)",
                                          found=f"shape {tuple(out.shape)}",
                                          fix="return one vector per image")
                chunks.append(out.reshape(len(x), -1).float().cpu().numpy())
                ids.extend(batch["sample_id"])
    finally:
        if was_training:
            encoder.train()
    if not chunks:
        return Embeddings(np.array([], dtype=str), np.zeros((0, 0), np.float32))
    return Embeddings(np.array(ids, dtype=str), np.concatenate(chunks))
