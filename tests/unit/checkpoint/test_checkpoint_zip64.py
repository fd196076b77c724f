"""ZIP64 in the checkpoint container (docs/reference/checkpoint.md#layout-and-manifest): archives the native writer
produces with ZIP64 records are read by Python's zipfile, and ZIP64 written by zipfile is read by the native reader."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess
import zipfile

import pytest

from aitune import exceptions as errors
from aitune._native import _C

ZIP64_LOCATOR = b"PK\x06\x07"
ZIP64_END = b"PK\x06\x06"
MANIFEST = json.dumps({"format": "aitune.checkpoint", "format_version": 1})


def _contents() -> dict[str, bytes]:
    return {
        "weights/root.safetensors": b"hello weights",
        "modules/0/graphs/0/backend/model.pt2": bytes(range(256)) * 300,
        "empty.json": b"",
        "d/e/f/g.json": b'{"x": 1}',
    }


def _write(path, contents, **options):
    writer = _C.ArchiveWriter(str(path), **options)
    for name, data in contents.items():
        writer.add_bytes(name, data)
    files = writer.files()
    writer.finish(MANIFEST)
    return files


def _data_offset(raw: bytes, info: zipfile.ZipInfo) -> int:
    """Where an entry's data starts, from its local header (zipfile does not expose it)."""
    name_len, extra_len = struct.unpack_from("<HH", raw, info.header_offset + 26)
    return info.header_offset + 30 + name_len + extra_len


def test_forced_zip64_archive_is_read_by_zipfile(tmp_path):
    path = tmp_path / "zip64.ait"
    contents = _contents()
    files = _write(path, contents, force_zip64=True)
    raw = path.read_bytes()
    # ZIP64 end record, then its locator, then the classic end record (22 bytes, no comment).
    assert raw[-42:-38] == ZIP64_LOCATOR
    assert raw[-98:-94] == ZIP64_END
    assert struct.unpack_from("<HHII", raw, len(raw) - 22 + 8) == (0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF)

    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None  # every CRC-32 checks out
        assert zf.namelist() == ["manifest.json", *contents]
        assert zf.read("manifest.json").decode() == MANIFEST
        for info in zf.infolist():
            assert info.compress_type == zipfile.ZIP_STORED
            assert info.extract_version == 45, info.filename
            assert _data_offset(raw, info) % 64 == 0, info.filename
            if info.filename != "manifest.json":
                assert zf.read(info) == contents[info.filename]
                assert info.file_size == len(contents[info.filename])

    reader = _C.ArchiveReader(str(path))
    reader.check_listed(files)
    for record in files:
        assert bytes(reader.read(record["path"], record)) == contents[record["path"]]
        assert record["sha256"] == hashlib.sha256(contents[record["path"]]).hexdigest()


@pytest.mark.skipif(shutil.which("unzip") is None, reason="Info-ZIP unzip is not installed")
def test_forced_zip64_archive_passes_unzip_test(tmp_path):
    path = tmp_path / "zip64.ait"
    _write(path, _contents(), force_zip64=True)
    result = subprocess.run(["unzip", "-t", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No errors detected" in result.stdout


def test_small_archive_has_no_zip64_records(tmp_path):
    path = tmp_path / "plain.ait"
    _write(path, _contents())
    raw = path.read_bytes()
    assert ZIP64_LOCATOR not in raw and ZIP64_END not in raw
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None
        assert {info.extract_version for info in zf.infolist()} == {10}


def test_more_than_65534_entries_use_the_zip64_end_record(tmp_path):
    path = tmp_path / "many.ait"
    writer = _C.ArchiveWriter(str(path))
    for i in range(65535):  # + manifest.json
        writer.add_bytes(f"e/{i}", b"")
    writer.finish("{}")
    raw = path.read_bytes()
    assert raw[-42:-38] == ZIP64_LOCATOR
    assert struct.unpack_from("<Q", raw, len(raw) - 98 + 32) == (65536,)  # ZIP64 end record: total entries
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
    assert len(names) == 65536 and names[-1] == "e/65534"
    assert len(_C.ArchiveReader(str(path)).entry_names()) == 65536


def test_native_reader_accepts_zipfile_zip64(tmp_path):
    """zipfile's force_zip64 puts the sizes in a local ZIP64 field but leaves the central header plain."""
    path = tmp_path / "from-zipfile.ait"
    payload = b"payload " * 1000
    manifest = json.dumps({"files": [{"path": "data.bin", "size": len(payload)}]})
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("manifest.json", manifest)
        with zf.open("data.bin", "w", force_zip64=True) as f:
            f.write(payload)
    raw = path.read_bytes()
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("data.bin")
    assert struct.unpack_from("<II", raw, info.header_offset + 18) == (0xFFFFFFFF, 0xFFFFFFFF)

    reader = _C.ArchiveReader(str(path))
    record = {"path": "data.bin", "size": len(payload), "sha256": hashlib.sha256(payload).hexdigest()}
    reader.check_listed([record])
    assert bytes(reader.read("data.bin", record)) == payload
    assert reader.manifest() == manifest


def test_tampered_zip64_locator_is_corrupt(tmp_path):
    path = tmp_path / "zip64.ait"
    _write(path, _contents(), force_zip64=True)
    raw = bytearray(path.read_bytes())
    struct.pack_into("<Q", raw, len(raw) - 42 + 8, len(raw) + 100)  # the locator's record offset
    bad = tmp_path / "bad.ait"
    bad.write_bytes(bytes(raw))
    with pytest.raises(errors.CorruptCheckpointError, match="ZIP64 end-of-central-directory locator points to"):
        _C.ArchiveReader(str(bad))


@pytest.mark.skipif(
    os.environ.get("AITUNE_TEST_LARGE_ZIP") != "1",
    reason="writes a > 4 GiB archive; set AITUNE_TEST_LARGE_ZIP=1 to run it",
)
def test_archive_beyond_4gib_is_read_by_zipfile(tmp_path):
    big_size = (4 << 30) + (1 << 20)
    source = tmp_path / "big.src"
    with open(source, "wb") as f:  # sparse: no 4 GiB of memory or disk for the source
        f.truncate(big_size - 4)
        f.seek(big_size - 4)
        f.write(b"tail")
    path = tmp_path / "large.ait"
    writer = _C.ArchiveWriter(str(path))
    writer.add_file("weights/big.safetensors", str(source))
    writer.add_bytes("after.json", b"after 4 GiB")
    writer.finish(MANIFEST)
    source.unlink()

    with zipfile.ZipFile(path) as zf:
        big = zf.getinfo("weights/big.safetensors")
        after = zf.getinfo("after.json")
        assert big.file_size == big_size
        assert after.header_offset > 0xFFFFFFFF
        assert zf.read("after.json") == b"after 4 GiB"
        with zf.open(big) as f:  # streams the entry; zipfile checks its CRC-32 at the end
            last = b""
            while chunk := f.read(64 << 20):
                last = chunk
        assert last.endswith(b"tail")
