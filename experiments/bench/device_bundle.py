"""One compressed archive of the Python packages a GPU host's image lacks, for hosts without a
package registry (the lent H200 has torch, Triton, numpy, jinja2, aiohttp, ... but not
langgraph, litellm, structlog, Ray and their own dependencies).

    python -m experiments.bench.device_bundle --out .device/site.tar.xz [--ray]

Each package in `PACKAGES` (plus `RAY` with `--ray`) is installed by pip into one tree
(`pip install --target`) as the binary wheel for the target interpreter (`--python 3.12`,
manylinux x86_64) at the version installed here, so the host runs what was tested here; parts no
evaluation imports are dropped (`PRUNE`: Ray's Java jars, RLlib, Serve, Tune, Train, Data and
dashboard UI; litellm's proxy UI), and the tree is packed as tar.xz. `--wheels DIR` installs wheels already downloaded
(no registry needed). Fails, naming the size, when the archive exceeds `--limit-mb` (the
device tool carries 64 MiB in all).

On the host, from the repository root:

    mkdir -p /tmp/site && tar -xJf .device/site.tar.xz -C /tmp/site && export PYTHONPATH=/tmp/site:$PWD
"""

from __future__ import annotations

import argparse
import importlib.metadata
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGES = (
    "aiosqlite", "annotated_types", "distro", "fastuuid", "h2", "hpack", "httpcore2", "httpx2",
    "hyperframe", "importlib_metadata", "jiter", "jsonpatch", "jsonpointer", "jsonschema",
    "jsonschema_specifications", "langchain_core", "langchain_protocol", "langgraph",
    "langgraph_checkpoint", "langgraph_checkpoint_sqlite", "langgraph_prebuilt", "langgraph_sdk",
    "langsmith", "litellm", "openai", "orjson", "ormsgpack", "pydantic", "pydantic_core",
    "pydantic_settings", "python_dotenv", "referencing", "requests_toolbelt", "rpds_py", "sniffio",
    "sqlite_vec", "structlog", "tenacity", "truststore", "typing_inspection", "uuid_utils", "websockets",
)
"""The project's runtime dependencies, and theirs, that the H200 image lacks (found by importing
the project there)."""
RAY = ("ray", "click", "msgpack", "protobuf")
"""Ray and its own dependencies (the image may have some; these shadow them at the tested versions)."""
PRUNE = (
    "ray/jars", "ray/rllib", "ray/serve", "ray/llm", "ray/tune", "ray/train", "ray/data",
    "ray/workflow", "ray/dashboard/client/build", "litellm/proxy/_experimental/out",
)
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64",
             "manylinux1_x86_64", "manylinux_2_5_x86_64")


def pinned(names: tuple[str, ...]) -> list[str]:
    """`name==version` for each package at the version installed in this environment."""
    specs, missing = [], []
    for name in names:
        try:
            specs.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
    if missing:
        raise SystemExit(f"device_bundle: not installed here, so no version to pin: {', '.join(missing)} "
                         "(run `make install` first)")
    return specs


def install(what: list[str], python: str, tree: Path) -> None:
    """pip's own install into `tree` for the target interpreter (`what`: `name==version` specs
    from the registry, or wheel files), exactly these (no dependency resolution: the list is
    complete)."""
    tag = python.replace(".", "")
    argv = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
            "--only-binary=:all:", "--python-version", python, "--implementation", "cp",
            "--abi", f"cp{tag}", "--abi", "abi3", "--abi", "none", "--target", str(tree)]
    for platform in PLATFORMS:
        argv += ["--platform", platform]
    if what and Path(what[0]).suffix == ".whl":
        argv.append("--no-index")
    done = subprocess.run(argv + what, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"device_bundle: pip could not install the packages:\n{done.stderr.strip()}")


def prune(tree: Path, parts: tuple[str, ...] = PRUNE) -> list[str]:
    """Drop `parts` (paths relative to `tree`) where present; returns those dropped."""
    dropped = []
    for part in parts:
        path = tree / part
        if path.is_dir():
            shutil.rmtree(path)
            dropped.append(part)
    return dropped


def pack(tree: Path, out: Path, limit_mb: float) -> float:
    """`tree` as `out` (tar.xz); its size in MiB. Refused (and not left behind) over `limit_mb`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    with tarfile.open(partial, "w:xz", preset=6) as tar:
        for path in sorted(tree.iterdir()):
            tar.add(path, arcname=path.name)
    size_mb = partial.stat().st_size / 2**20
    if size_mb > limit_mb:
        partial.unlink()
        raise SystemExit(f"device_bundle: the archive would be {size_mb:.1f} MiB, over the limit of "
                         f"{limit_mb:g} MiB; prune more or carry fewer packages")
    partial.replace(out)
    return size_mb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(".device/site.tar.xz"))
    parser.add_argument("--ray", action="store_true", help="also Ray (pruned), for --executor ray")
    parser.add_argument("--python", default="3.12", help="the host's Python version")
    parser.add_argument("--wheels", type=Path, help="pack the wheels in this folder; no registry")
    parser.add_argument("--limit-mb", type=float, default=60.0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="device_bundle_") as tmp:
        if args.wheels is None:
            what = pinned(PACKAGES + (RAY if args.ray else ()))
        elif not args.wheels.is_dir():
            raise SystemExit(f"device_bundle: --wheels {args.wheels}: no such folder")
        elif not (what := [str(w) for w in sorted(args.wheels.glob("*.whl"))]):
            raise SystemExit(f"device_bundle: no wheels to pack in {args.wheels}")
        tree = Path(tmp) / "site"
        install(what, args.python, tree)
        dropped = prune(tree)
        size_mb = pack(tree, args.out, args.limit_mb)
    print(f"{args.out}: {size_mb:.1f} MiB from {len(what)} packages"
          + (f"; dropped {', '.join(dropped)}" if dropped else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
