"""The server's private upload store: names chosen by the server, private files, a quota and an
age limit, nothing kept from an upload that fails its check."""

from __future__ import annotations

import hashlib
import os
import stat
import time

import pytest

from explorer.upload_store import UploadStore

DATA = b"arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,2\n"


def store(tmp_path, quota: int = 10_000, max_age_s: float = 3600.0) -> UploadStore:
    return UploadStore(quota, max_age_s, parent=str(tmp_path))


def test_the_browsers_file_name_never_reaches_the_file_system(tmp_path):
    """Absolute and ../ names are display text: the file is the hash of its bytes in the store."""
    uploads = store(tmp_path)
    for name in ("/etc/cron.d/x.csv", "../../x.csv", "..\\..\\x.csv", "a\x00b.csv"):
        path = uploads.keep(DATA, name)
        assert path == uploads.root / (hashlib.sha256(DATA).hexdigest() + ".csv")
    assert [p.name for p in uploads.root.iterdir()] == [hashlib.sha256(DATA).hexdigest() + ".csv"]
    assert not (tmp_path / "x.csv").exists()


def test_the_folder_is_private_and_files_are_owner_only(tmp_path):
    """mkdtemp gives 0700; files are created 0600."""
    uploads = store(tmp_path)
    path = uploads.keep(DATA, "t.csv")
    assert stat.S_IMODE(uploads.root.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_only_known_suffixes_are_kept(tmp_path):
    """A JSON-lines trace keeps .jsonl; anything else becomes .csv."""
    uploads = store(tmp_path)
    assert uploads.keep(b"{}\n", "x.JSONL").suffix == ".jsonl"
    assert uploads.keep(b"a", "evil.sh").suffix == ".csv"
    assert uploads.keep(b"b", "noext").suffix == ".csv"


def test_an_upload_that_fails_its_check_leaves_nothing_behind(tmp_path):
    """The check's error propagates and the stored file is removed."""
    uploads = store(tmp_path)

    def refuse(path):
        assert path.read_bytes() == DATA
        raise ValueError("not a trace")
    with pytest.raises(ValueError, match="not a trace"):
        uploads.keep(DATA, "bad.csv", check=refuse)
    assert list(uploads.root.iterdir()) == []


def test_a_planted_symbolic_link_is_not_followed(tmp_path):
    """Were a link to appear under a stored name, writing refuses it instead of writing through."""
    uploads = store(tmp_path)
    target = tmp_path / "victim.csv"
    target.write_text("keep me")
    (uploads.root / (hashlib.sha256(DATA).hexdigest() + ".csv")).symlink_to(target)
    uploads.keep(DATA, "x.csv")                       # exists: reused, never written through
    assert target.read_text() == "keep me"


def test_the_quota_drops_the_oldest_files_first(tmp_path):
    """Three 4,000-byte files in a 10,000-byte store: the first is dropped for the third."""
    uploads = store(tmp_path, quota=10_000)
    first, second = uploads.keep(b"a" * 4000, "1.csv"), uploads.keep(b"b" * 4000, "2.csv")
    os.utime(first, (time.time() - 20, time.time() - 20))
    os.utime(second, (time.time() - 10, time.time() - 10))
    third = uploads.keep(b"c" * 4000, "3.csv")
    assert uploads.files() == [second, third]


def test_reusing_a_file_counts_as_recent(tmp_path):
    """Uploading the same bytes again refreshes them, so the other file goes instead."""
    uploads = store(tmp_path, quota=10_000)
    first, second = uploads.keep(b"a" * 4000, "1.csv"), uploads.keep(b"b" * 4000, "2.csv")
    os.utime(first, (time.time() - 20, time.time() - 20))
    os.utime(second, (time.time() - 10, time.time() - 10))
    uploads.keep(b"a" * 4000, "1-again.csv")
    third = uploads.keep(b"c" * 4000, "3.csv")
    assert uploads.files() == [first, third]


def test_files_past_the_age_limit_are_dropped(tmp_path):
    """A file unused for longer than max_age_s goes when the next upload arrives."""
    uploads = store(tmp_path, max_age_s=60)
    old = uploads.keep(b"old", "old.csv")
    os.utime(old, (time.time() - 61, time.time() - 61))
    new = uploads.keep(b"new", "new.csv")
    assert uploads.files() == [new]


def test_a_file_larger_than_the_quota_is_refused(tmp_path):
    uploads = store(tmp_path, quota=100)
    with pytest.raises(ValueError, match="file is 101 bytes, over the upload store's 100-byte quota"):
        uploads.keep(b"x" * 101, "big.csv")
    assert list(uploads.root.iterdir()) == []

