"""Compress a file's pieces as they are written (the Chrome trace as `.json.gz`, which Perfetto
opens as it is)."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator

GZIP_LEVEL = 1      # the 10k-request trace: 13x smaller in a third of the time level 6 takes (18x)


def gzipped(pieces: Iterable[bytes | memoryview], level: int = GZIP_LEVEL) -> Iterator[bytes]:
    """`pieces` compressed as one gzip stream (no file name, time 0: the same bytes every run)."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, 31)
    for piece in pieces:
        yield compressor.compress(piece)
    yield compressor.flush()
