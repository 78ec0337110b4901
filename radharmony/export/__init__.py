"""Export a dataset to sharded WebDataset tar files and read it back on many ranks.

* :func:`to_webdataset` writes ``<prefix>-000000.tar`` ... and ``manifest.json``;
* :func:`decode_sample` turns a sample read by ``webdataset`` back into exactly ``ds[i]``;
* :func:`to_llava`, :func:`to_parquet`, :func:`to_study_webdataset` write study-level
  datasets (``level="study"``) for vision-language training (``docs/study_level.md``);
* :func:`exact_decoder` is a ``webdataset`` ``.decode(...)`` handler that returns the exact
  arrays of 16-bit images (the library's own decoders cut them to 8 bits);
* :func:`rank_shards` and :class:`ShardedWebDataset` give every rank and DataLoader worker
  the same number of samples per epoch, shuffled from ``(seed, epoch)``, resumable.

Writing needs only the standard library; reading needs ``pip install radharmony[webdataset]``.
See ``docs/export.md``.
"""

from .codec import ExportError, decode_sample
from .decoders import DeepImageWarning, exact_decoder, read_image_bytes
from .manifest import read_manifest
from .shards import Segment, ShardedWebDataset, ShardPlan, local_urls, rank_shards
from .study_formats import FLAVORS, to_llava, to_parquet, to_study_webdataset
from .writer import to_webdataset

__all__ = ["DeepImageWarning", "ExportError", "FLAVORS", "Segment", "ShardPlan",
           "ShardedWebDataset", "decode_sample", "exact_decoder", "local_urls", "rank_shards",
           "read_image_bytes", "read_manifest", "to_llava", "to_parquet",
           "to_study_webdataset", "to_webdataset"]
