"""The mixture spec: YAML (or a dict) -> a checked :class:`MixtureSpec`, every error naming the
line.

.. code-block:: yaml

    name: cxr-mix-v1
    seed: 0
    valid: 0.05                # the mixture's own validation share, drawn by patient
    images: original           # or: cache (with size: 224)
    boxes: pixels              # maira2, chexagent, radfact or pixels
    readers: all               # multi-reader boxes: all, first, fused or reader:<id>
    without_prior: plain       # a findings-with-prior study with no prior: plain or skip
    cache_dir: /scratch/cache  # optional: every source's table cache
    prompts:                   # optional: replace a task's paraphrases
      report_findings: ["Describe the findings."]
    sources:
      - dataset: mimic_cxr_jpg
        root: /data/mimic-cxr-jpg
        split: train
        tasks: {report_findings: all, classify_findings: "random:25%"}
        max_records: 500000
        labels: null           # any other constructor argument of the dataset
    hold_out:
      - {dataset: mimic_cxr_jpg_test, root: /data/mimic-cxr-jpg}

A wrong key, an unknown dataset or task, a task its dataset cannot feed, a bad rule or a
constructor argument the dataset does not take raises :class:`MixtureSpecError` naming
``file:line``, the key path (``sources[1].tasks.report_findngs``) and the choices, before any
table is read.
"""

from __future__ import annotations

import inspect
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import catalog
from ..errors import RadHarmonyError
from .rules import RULE_HELP, Rule, RuleError, parse_rule
from .specfile import MixtureSpecError, guess, Where, read_spec_file
from .tasks import TASKS, capabilities, prompt_slots

BOX_DIALECTS = ("pixels", "maira2", "chexagent", "radfact", "internvl", "qwen2.5")
IMAGE_MODES = ("original", "cache")
READER_HELP = "all, first, fused or reader:<id> (e.g. reader:R8)"
TOP_KEYS = ("name", "seed", "valid", "images", "size", "boxes", "readers", "without_prior",
            "cache_dir", "prompts", "sources", "hold_out")
#: what report_findings_with_prior does with a study that has no prior: the plain findings
#: prompt (the default), or no record (skipped and counted)
WITHOUT_PRIOR = ("plain", "skip")
SOURCE_KEYS = ("dataset", "root", "split", "tasks", "max_records", "name")
HOLD_KEYS = ("dataset", "root", "split", "name")
#: constructor arguments the mixture decides itself
RESERVED_KWARGS = ("base_image_dir", "harmonized_df", "harmonizer", "transform", "spec",
                   "image_roots", "level", "max_images", "view_order", "prior", "packed")
#: constructor arguments that are paths (relative ones are read from the spec's folder)
PATH_KWARGS = ("csv_path", "cache_dir", "harmonizer_path", "exclude")
#: a split that means every row of the table
ALL_ROWS = "all"


@dataclass
class SourceSpec:
    """One source: a dataset split and the tasks drawn from it (``rules``: task -> Rule)."""

    name: str
    dataset: str
    root: str
    split: str
    rules: dict
    max_records: int | None = None
    kwargs: dict = field(default_factory=dict)


@dataclass
class HoldOutSpec:
    """One hold-out set: its patients and images never reach a record."""

    name: str
    dataset: str
    root: str
    split: str
    kwargs: dict = field(default_factory=dict)


@dataclass
class MixtureSpec:
    """A checked spec (see the module docs); :meth:`to_dict` is the resolved spec
    ``mixture.json`` keeps."""

    name: str
    seed: int
    valid: float
    images: dict
    boxes: str
    sources: list
    hold_out: list
    prompts: dict = field(default_factory=dict)
    cache_dir: str | None = None
    origin: str = "spec"
    readers: str = "all"
    without_prior: str = "plain"

    def to_dict(self) -> dict:
        out = {k: getattr(self, k) for k in ("name", "seed", "valid", "images", "boxes",
                                             "readers")}
        out["sources"] = []
        for s in self.sources:
            d = {k: getattr(s, k) for k in ("name", "dataset", "root", "split")}
            d["tasks"] = {t: r.text for t, r in s.rules.items()}
            d.update(max_records=s.max_records, kwargs=dict(s.kwargs))
            out["sources"].append(d)
        out["hold_out"] = [asdict(h) for h in self.hold_out]
        out.update(prompts=dict(self.prompts), cache_dir=self.cache_dir)
        if self.without_prior != "plain":  # a spec without the key keeps its manifest's bytes
            out["without_prior"] = self.without_prior
        return json.loads(json.dumps(out, default=str))


def load_spec(spec) -> MixtureSpec:
    """A checked :class:`MixtureSpec` from a YAML / JSON file path, a dict, or one already
    checked. Nothing is read but the spec file; the dataset classes are looked up."""
    if isinstance(spec, MixtureSpec):
        return spec
    if isinstance(spec, dict):
        data, lines, origin, base = spec, {}, "spec", Path.cwd()
    elif isinstance(spec, (str, os.PathLike)):
        data, lines = read_spec_file(spec)
        origin, base = str(spec), Path(spec).resolve().parent
    else:
        raise MixtureSpecError("A mixture spec must be a file path or a dict",
                               expected="a .yaml path or a dict", found=type(spec).__name__,
                               fix="pass build('mix.yaml', out) or build({...}, out)")
    return _check(data, Where(origin, lines), base)


def _mapping(w: Where, path: tuple, value, allowed) -> dict:
    if not isinstance(value, dict):
        raise w.error(path, "is not a mapping", expected="key: value pairs",
                      found=repr(value), fix="write it as a mapping")
    for k in value:
        if k not in allowed:
            raise w.error(path + (k,), f"unknown key {k!r}", expected=f"keys among "
                          f"{', '.join(allowed)}", found=repr(k), fix=guess(k, allowed))
    return value


def _required(w, path, d: dict, key: str, kind, what: str):
    if key not in d:
        raise w.error(path, f"has no {key!r}", expected=what, found=f"keys {list(d)}",
                      fix=f"add {key}:")
    v = d[key]
    if not isinstance(v, kind) or isinstance(v, bool):
        raise w.error(path + (key,), f"{key} is not {what}", expected=what, found=repr(v),
                      fix=f"write {key}: as {what}")
    return v


def _check(data, w: Where, base: Path) -> MixtureSpec:
    data = _mapping(w, (), data, TOP_KEYS + ())
    name = _required(w, (), data, "name", str, "a name (text)")
    seed = data.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise w.error(("seed",), "seed is not an integer", expected="an integer",
                      found=repr(seed), fix="write seed: 0")
    valid = data.get("valid", 0.05)
    if isinstance(valid, bool) or not isinstance(valid, (int, float)) or not 0 <= valid < 1:
        raise w.error(("valid",), "valid is not a share", expected="a number in [0, 1)",
                      found=repr(valid), fix="write valid: 0.05")
    images = _images(w, data)
    boxes = data.get("boxes", "pixels")
    if boxes not in BOX_DIALECTS:
        raise w.error(("boxes",), "unknown box dialect", expected=f"one of {BOX_DIALECTS}",
                      found=repr(boxes), fix=guess(boxes, BOX_DIALECTS))
    from .grounding import check_reader_mode

    readers = data.get("readers", "all")
    try:
        check_reader_mode(readers)
    except RadHarmonyError as exc:
        raise w.error(("readers",), "unknown readers choice", expected=READER_HELP,
                      found=repr(readers), fix="write readers: all") from exc
    without_prior = data.get("without_prior", "plain")
    if without_prior not in WITHOUT_PRIOR:
        raise w.error(("without_prior",), "unknown without_prior choice",
                      expected=f"one of {WITHOUT_PRIOR} (a findings-with-prior study that has "
                      "no prior: the plain findings prompt, or skipped and counted)",
                      found=repr(without_prior), fix="write without_prior: plain")
    cache_dir = data.get("cache_dir")
    if cache_dir is not None:
        cache_dir = str((base / str(cache_dir)).resolve())
    prompts = _prompts(w, data.get("prompts") or {})
    sources = data.get("sources")
    if not isinstance(sources, list) or not sources:
        raise w.error(("sources",), "sources is not a non-empty list",
                      expected="a list of sources (dataset, root, tasks)", found=repr(sources),
                      fix="add sources: with at least one entry")
    out_sources = [_source(w, i, s, base, cache_dir) for i, s in enumerate(sources)]
    names = [s.name for s in out_sources]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        at = names.index(dup[0], names.index(dup[0]) + 1)
        raise w.error(("sources", at), f"two sources are named {dup[0]!r}",
                      expected="a distinct name per source (default: its dataset key)",
                      found=f"names {names}", fix="give one of them name: ...")
    hold = data.get("hold_out") or []
    if not isinstance(hold, list):
        raise w.error(("hold_out",), "hold_out is not a list", expected="a list of "
                      "{dataset, root, split}", found=repr(hold), fix="write it as a list")
    out_hold = [_hold(w, i, h, base, cache_dir) for i, h in enumerate(hold)]
    return MixtureSpec(name=name, seed=seed, valid=float(valid), images=images, boxes=boxes,
                       sources=out_sources, hold_out=out_hold, prompts=prompts,
                       cache_dir=cache_dir, origin=w.origin, readers=readers,
                       without_prior=without_prior)


def _images(w: Where, data: dict) -> dict:
    images = data.get("images", "original")
    if isinstance(images, dict):
        _mapping(w, ("images",), images, ("mode", "size"))
        mode, size = images.get("mode", "original"), images.get("size", data.get("size"))
    else:
        mode, size = images, data.get("size")
    if mode not in IMAGE_MODES:
        raise w.error(("images",), "unknown images mode", expected=f"one of {IMAGE_MODES}",
                      found=repr(mode), fix=guess(mode, IMAGE_MODES))
    if mode == "original":
        if size is not None:
            raise w.error(("size",), "size is given with images: original",
                          expected="size only with images: cache", found=repr(size),
                          fix="remove size, or write images: cache")
        return {"mode": "original"}
    size = 224 if size is None else size
    if isinstance(size, bool) or not isinstance(size, int) or not 16 <= size <= 4096:
        raise w.error(("size",), "size is not an image side", expected="16 to 4096 pixels",
                      found=repr(size), fix="write size: 224")
    return {"mode": "cache", "size": size}


def _prompts(w: Where, prompts) -> dict:
    _mapping(w, ("prompts",), prompts, tuple(TASKS))
    out = {}
    for task, texts in prompts.items():
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str)
                                                                for t in texts):
            raise w.error(("prompts", task), "is not a list of prompts",
                          expected="a non-empty list of texts", found=repr(texts),
                          fix="write prompts: {task: [\"...\", \"...\"]}")
        allowed = set(TASKS[task].slots)
        for i, t in enumerate(texts):
            try:
                bad = prompt_slots(t) - allowed
            except ValueError as exc:
                bad = {f"(malformed: {exc})"}
            if bad:
                raise w.error(("prompts", task, i), f"prompt uses unknown placeholders "
                              f"{sorted(bad)}", expected=f"placeholders among "
                              f"{sorted(allowed) or 'none'} ({{{{ and }}}} for braces)",
                              found=repr(t), fix="use only those placeholders")
        out[task] = list(texts)
    return out


def _dataset(w: Where, path: tuple, entry: dict) -> str:
    key = _required(w, path, entry, "dataset", str, "a dataset key")
    keys = catalog.list_datasets()
    if key not in keys:
        raise w.error(path + ("dataset",), f"unknown dataset {key!r}",
                      expected="a key of `radharmony list`", found=repr(key),
                      fix=guess(key, keys))
    return key


def _kwargs(w: Where, path: tuple, entry: dict, known: tuple, key: str, base: Path,
            cache_dir) -> dict:
    from ..registry import get_dataset_class

    cls = get_dataset_class(key)
    takes = {p for c in cls.__mro__ if "__init__" in c.__dict__ and c is not object
             for p, param in inspect.signature(c.__init__).parameters.items()
             if param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY)} - {"self"}
    allowed = sorted((takes - set(RESERVED_KWARGS)) | set(known))
    out = {}
    for k, v in entry.items():
        if k in known:
            continue
        if k not in takes or k in RESERVED_KWARGS:
            raise w.error(path + (k,), f"unknown key {k!r} for {key}", expected=f"keys among "
                          f"{', '.join(allowed)}", found=repr(k), fix=guess(k, allowed))
        out[k] = str((base / str(v)).resolve()) if k in PATH_KWARGS and \
            isinstance(v, (str, os.PathLike)) else v
    if cache_dir is not None and "cache_dir" in takes:
        out.setdefault("cache_dir", cache_dir)
    out.setdefault("cache_dir", None)
    return out


def _root(w, path, entry, base: Path) -> str:
    root = _required(w, path, entry, "root", str, "the dataset's folder (text)")
    return str((base / os.path.expanduser(root)).resolve())


def _split(w: Where, path: tuple, entry: dict, key: str, default: str) -> str:
    spec = catalog.spec(key)
    split = entry.get("split", default if "split" in spec.columns else ALL_ROWS)
    choices = ("train", "valid", "test", ALL_ROWS) if "split" in spec.columns else (ALL_ROWS,)
    if split not in choices:
        why = f"{key} has a split column" if "split" in spec.columns else \
            f"{key} is one split already (its table has no split column)"
        raise w.error(path + ("split",), f"split {split!r} cannot be drawn from {key}",
                      expected=f"one of {choices}: {why}", found=repr(split),
                      fix=guess(split, choices))
    return split


def _entry(w: Where, path: tuple, entry, base: Path, cache_dir, *, known: tuple,
           split: str) -> tuple:
    """``(name, key, root, split, kwargs)`` of a source or hold-out entry."""
    if not isinstance(entry, dict):
        raise w.error(path, "is not a mapping", expected=", ".join(known[:3]) + ", ...",
                      found=repr(entry), fix="write the entry as a mapping")
    key = _dataset(w, path, entry)
    kwargs = _kwargs(w, path, entry, known, key, base, cache_dir)
    name = entry.get("name", key)
    if not isinstance(name, str) or not name:
        raise w.error(path + ("name",), "name is not text", expected="a name",
                      found=repr(name), fix="write name: my_source")
    return (name, key, _root(w, path, entry, base), _split(w, path, entry, key, split),
            kwargs)


def _source(w: Where, i: int, entry, base: Path, cache_dir) -> SourceSpec:
    path = ("sources", i)
    name, key, root, split, kwargs = _entry(w, path, entry, base, cache_dir,
                                            known=SOURCE_KEYS, split="train")
    tasks = _required(w, path, entry, "tasks", dict, "a mapping task -> rule")
    if not tasks:
        raise w.error(path + ("tasks",), "names no task", expected="at least one task",
                      found="{}", fix="add a task, e.g. report_findings: all")
    caps = capabilities(catalog.spec(key), kwargs)
    rules: dict[str, Rule] = {}
    for task, rule in tasks.items():
        if task not in TASKS:
            raise w.error(path + ("tasks", task), f"unknown task {task!r}",
                          expected="a task of `radharmony tasks`", found=repr(task),
                          fix=guess(task, TASKS))
        missing = [n for n in TASKS[task].needs if n not in caps]
        if missing:
            fit = [t for t, tk in TASKS.items() if set(tk.needs) <= caps]
            raise w.error(path + ("tasks", task), f"{key} cannot feed task {task!r}",
                          expected=f"a dataset with {', '.join(TASKS[task].needs)}",
                          found=f"{key} has no {', '.join(missing)}",
                          fix=f"{key} can feed {', '.join(fit) or 'no task'}")
        try:
            rules[task] = parse_rule(rule)
        except RuleError as exc:
            raise w.error(path + ("tasks", task), f"bad sampling rule for {task}",
                          expected=RULE_HELP, found=str(exc), fix="write e.g. random:25%")
    cap = entry.get("max_records")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
        raise w.error(path + ("max_records",), "max_records is not a positive count",
                      expected="an integer >= 1", found=repr(cap), fix="write max_records: "
                      "100000, or remove it")
    return SourceSpec(name, key, root, split, rules, cap, kwargs)


def _hold(w: Where, i: int, entry, base: Path, cache_dir) -> HoldOutSpec:
    return HoldOutSpec(*_entry(w, ("hold_out", i), entry, base, cache_dir, known=HOLD_KEYS,
                               split="test"))


__all__ = ["ALL_ROWS", "BOX_DIALECTS", "HoldOutSpec", "IMAGE_MODES", "MixtureSpec",
           "MixtureSpecError", "SourceSpec", "load_spec", "read_spec_file"]
