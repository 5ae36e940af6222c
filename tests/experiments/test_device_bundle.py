"""experiments.bench.device_bundle on wheels written here (no registry): installed, pruned, packed,
and importable from the unpacked archive; the size limit and bad input refused clearly."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from experiments.bench import device_bundle


def _wheel(folder: Path, name: str, files: dict[str, str | bytes]) -> Path:
    path = folder / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for arcname, content in files.items():
            zf.writestr(arcname, content)
        info = f"{name}-1.0.dist-info"
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                     "Tag: py3-none-any\n")
        zf.writestr(f"{info}/RECORD", "".join(f"{f},,\n" for f in [*files, f"{info}/METADATA",
                                                                  f"{info}/WHEEL", f"{info}/RECORD"]))
    return path


def test_wheels_are_packed_pruned_and_importable(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels, "ray", {"ray/__init__.py": "VALUE = 'ray core'\n", "ray/rllib/__init__.py": "",
                           "ray/jars/big.jar": os.urandom(4096), "ray/util/__init__.py": ""})
    _wheel(wheels, "tinydep", {"tinydep.py": "def answer():\n    return 42\n"})
    out = tmp_path / "bundle" / "site.tar.xz"
    assert device_bundle.main(["--wheels", str(wheels), "--out", str(out)]) == 0
    with tarfile.open(out) as tar:
        names = set(tar.getnames())
        tar.extractall(tmp_path / "site", filter="data")
    assert {"ray/__init__.py", "ray/util/__init__.py", "tinydep.py"} <= names
    assert not any(n.startswith(("ray/rllib", "ray/jars")) for n in names)
    done = subprocess.run([sys.executable, "-c", "import ray, tinydep; print(ray.VALUE, tinydep.answer())"],
                          env={**os.environ, "PYTHONPATH": str(tmp_path / "site")}, cwd=tmp_path,
                          capture_output=True, text=True, check=False)
    assert done.stdout.strip() == "ray core 42", done.stderr
    assert not list(out.parent.glob("*.partial"))


def test_an_archive_over_the_limit_is_refused_and_not_left_behind(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels, "noise", {"noise/blob.bin": os.urandom(300_000)})  # incompressible
    out = tmp_path / "site.tar.xz"
    with pytest.raises(SystemExit, match=r"0\.3 MiB, over the limit of 0\.1 MiB"):
        device_bundle.main(["--wheels", str(wheels), "--out", str(out), "--limit-mb", "0.1"])
    assert not out.exists() and not list(tmp_path.glob("*.partial"))


@pytest.mark.parametrize("setup,words", [
    (lambda d: None, "no such folder"),
    (lambda d: d.mkdir(), "no wheels to pack"),
    (lambda d: (d.mkdir(), (d / "broken-1.0-py3-none-any.whl").write_text("not a zip")),
     "pip could not install(.|\n)*broken-1.0-py3-none-any.whl"),
])
def test_bad_input_is_named(tmp_path, setup, words):
    wheels = tmp_path / "wheels"
    setup(wheels)
    with pytest.raises(SystemExit, match=words):
        device_bundle.main(["--wheels", str(wheels), "--out", str(tmp_path / "out.tar.xz")])


def test_versions_are_pinned_to_this_environment():
    assert device_bundle.pinned(("pytest",)) == [f"pytest=={pytest.__version__}"]
    with pytest.raises(SystemExit, match="not installed here.*no_such_package_kr"):
        device_bundle.pinned(("no_such_package_kr",))
