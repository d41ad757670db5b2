"""Regenerate (or, with --check, verify) the committed Python code for the contract.

Messages, gRPC stubs and their type stubs go to clients/turngate/v1/ from
protos/turngate/v1/*.proto, using grpcio-tools' bundled protoc and mypy-protobuf.
"""

from __future__ import annotations

import argparse
import filecmp
import sys
import tempfile
from importlib import resources
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
OUT_ROOT = ROOT / "clients"
PACKAGE = Path("turngate") / "v1"


def generate(out_root: Path) -> list[Path]:
    """Writes the generated files under out_root/turngate/v1 and returns their paths."""
    protos = sorted(str(p.relative_to(PROTO_ROOT)) for p in (PROTO_ROOT / PACKAGE).glob("*.proto"))
    well_known = str(resources.files("grpc_tools") / "_proto")
    (out_root / PACKAGE).mkdir(parents=True, exist_ok=True)
    # mypy-protobuf's plugins live beside this interpreter, whether or not its bin/ is on PATH.
    plugins = Path(sys.executable).parent
    args = [
        "protoc",
        f"--plugin=protoc-gen-mypy={plugins / 'protoc-gen-mypy'}",
        f"--plugin=protoc-gen-mypy_grpc={plugins / 'protoc-gen-mypy_grpc'}",
        f"-I{PROTO_ROOT}",
        f"-I{well_known}",
        f"--python_out={out_root}",
        f"--grpc_python_out={out_root}",
        f"--mypy_out={out_root}",
        f"--mypy_grpc_out={out_root}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    return sorted((out_root / PACKAGE).glob("*_pb2*.py*"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if the committed code is stale")
    check = parser.parse_args().check
    if not check:
        for path in generate(OUT_ROOT):
            print(path.relative_to(ROOT))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp))
        committed = sorted((OUT_ROOT / PACKAGE).glob("*_pb2*.py*"))
        names = [p.name for p in fresh]
        same_files = [p.name for p in committed] == names
        stale = [
            name
            for name in names
            if not same_files
            or not filecmp.cmp(Path(tmp) / PACKAGE / name, OUT_ROOT / PACKAGE / name, shallow=False)
        ]
    if stale:
        print(
            f"generated code is stale: {', '.join(stale)}; run python scripts/gen_protos.py", file=sys.stderr
        )
        return 1
    print("generated code is fresh")
    return 0


if __name__ == "__main__":
    sys.exit(main())
