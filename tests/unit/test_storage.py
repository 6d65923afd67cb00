"""The storage interface the lake log talks to: put-if-absent, read, list by prefix, delete."""

from __future__ import annotations

from pathlib import Path

import pytest

from rowops.catalog import storage as storage_module
from rowops.catalog.object_store import PROBE_PREFIX, check_put_if_absent
from rowops.catalog.storage import AlreadyExists, LocalStorage, Storage
from rowops.errors import PutIfAbsentUnsupportedError


@pytest.mark.parametrize("durable", [True, False])
def test_put_if_absent_through_the_interface(tmp_path: Path, durable: bool) -> None:
    storage: Storage = LocalStorage(tmp_path, durable=durable)
    storage.put_if_absent("_rowops/log/a.json", b"first")
    with pytest.raises(AlreadyExists):
        storage.put_if_absent("_rowops/log/a.json", b"second")
    assert storage.read("_rowops/log/a.json") == b"first"
    assert [p.name for p in (tmp_path / "_rowops" / "log").iterdir()] == ["a.json"]  # no temp files


def test_read_list_delete(tmp_path: Path) -> None:
    storage: Storage = LocalStorage(tmp_path)
    with pytest.raises(FileNotFoundError):
        storage.read("_rowops/log/missing.json")
    for key in (
        "_rowops/nodes/b1/b1c.json",
        "_rowops/log/2.json",
        "_rowops/log/1.json",
        "_rowops/nodes/a0/a0f.json",
    ):
        storage.put_if_absent(key, key.encode())
    (tmp_path / "_rowops" / "log" / ".3.json.123.tmp").write_bytes(b"in flight")  # not a key yet
    assert storage.list("_rowops/log/") == ["_rowops/log/1.json", "_rowops/log/2.json"]
    assert storage.list("_rowops/nodes/") == ["_rowops/nodes/a0/a0f.json", "_rowops/nodes/b1/b1c.json"]
    assert storage.list("_rowops/log/1") == ["_rowops/log/1.json"]
    assert storage.list("_rowops/") == sorted(
        ["_rowops/log/1.json", "_rowops/log/2.json", "_rowops/nodes/a0/a0f.json", "_rowops/nodes/b1/b1c.json"]
    )
    assert storage.list("nothing/here/") == []
    storage.delete("_rowops/log/1.json")
    storage.delete("_rowops/log/1.json")  # deleting an absent key is not an error
    assert storage.list("_rowops/log/") == ["_rowops/log/2.json"]


def test_put_overwrites_a_hint(tmp_path: Path) -> None:
    storage: Storage = LocalStorage(tmp_path)
    storage.put("_rowops/log/_latest", b"1")
    storage.put("_rowops/log/_latest", b"2")
    assert storage.read("_rowops/log/_latest") == b"2"
    assert storage.list("_rowops/log/") == ["_rowops/log/_latest"]


def test_new_directories_are_synced_into_their_parents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key in a new directory (a new node shard) is durable only if the directory's name is too."""
    synced: list[str] = []
    real = storage_module.fsync_dir

    def recording(directory: Path) -> None:
        synced.append(str(directory.relative_to(tmp_path)))
        real(directory)

    monkeypatch.setattr(storage_module, "fsync_dir", recording)
    LocalStorage(tmp_path).put_if_absent("_rowops/nodes/ab/abc.json", b"{}")
    assert synced == [".", "_rowops", "_rowops/nodes", "_rowops/nodes/ab"]
    synced.clear()
    LocalStorage(tmp_path).put_if_absent("_rowops/nodes/ab/abd.json", b"{}")
    assert synced == ["_rowops/nodes/ab"]


class _IgnoresIfNoneMatch(LocalStorage):
    """A real storage whose put-if-absent overwrites, like an S3 store that ignores If-None-Match."""

    def put_if_absent(self, key: str, data: bytes) -> None:
        self.put(key, data)


def test_a_store_that_overwrites_on_put_if_absent_is_refused(tmp_path: Path) -> None:
    broken = _IgnoresIfNoneMatch(tmp_path / "broken")
    with pytest.raises(PutIfAbsentUnsupportedError, match="If-None-Match") as err:
        check_put_if_absent(broken, str(tmp_path / "broken"))
    assert "Help:" in str(err.value)
    assert broken.list(PROBE_PREFIX) == []  # the probe key is removed
    with pytest.raises(PutIfAbsentUnsupportedError):  # refused again: a bad store is never remembered
        check_put_if_absent(broken, str(tmp_path / "broken"))
    good = LocalStorage(tmp_path / "good")
    check_put_if_absent(good, str(tmp_path / "good"))
    assert good.list(PROBE_PREFIX) == []


def test_directories_found_existing_are_synced_into_their_parents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory a crashed writer created (never synced into its parent) is synced before a key
    below it is linked; written data files' new directories (staging, data-N, partitions) too."""
    synced: list[str] = []
    real = storage_module.fsync_dir

    def recording(directory: Path) -> None:
        if directory.is_relative_to(tmp_path):  # sync_files also walks above the lake, once per process
            synced.append(str(directory.relative_to(tmp_path)))
        real(directory)

    monkeypatch.setattr(storage_module, "fsync_dir", recording)
    (tmp_path / "_rowops" / "nodes" / "cd").mkdir(parents=True)  # left by a writer that crashed
    LocalStorage(tmp_path).put_if_absent("_rowops/nodes/cd/cde.json", b"{}")
    assert synced == [".", "_rowops", "_rowops/nodes", "_rowops/nodes/cd"]
    synced.clear()
    written = tmp_path / "t" / "data" / "20260101-000000-abcd1234" / "data-1" / "g=1" / "part-0.parquet"
    written.parent.mkdir(parents=True)
    written.write_bytes(b"x")  # as Spark writes it: no fsync of the file or of any directory
    storage_module.sync_files([f"file:{written}"])
    below = [p for p in synced if p.startswith("t")]
    assert below == [
        "t/data/20260101-000000-abcd1234/data-1/g=1",  # the file's name
        "t",
        "t/data",
        "t/data/20260101-000000-abcd1234",
        "t/data/20260101-000000-abcd1234/data-1",
    ]
    assert "." in synced  # the table folder's name in the lake root
