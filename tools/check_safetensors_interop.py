#!/usr/bin/env python3
"""Optional interop check: the Python `safetensors` library reads files tensorcast wrote.

Usage: check_safetensors_interop.py FILE.safetensors [...]
For each file, safetensors.deserialize (the reference Rust validator) must accept it and
return, for every tensor, the dtype, shape and exact bytes that the header's
data_offsets point at (read here with the standard library only). Needs
`pip install safetensors` (no numpy/torch); the C++ tests never depend on this script.
"""
import json
import struct
import sys

try:
    import safetensors
except ImportError:
    print("skip: the Python `safetensors` package is not installed")
    sys.exit(0)


def check(path):
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    data = blob[8 + n :]
    meta = header.pop("__metadata__", {}) or {}
    got = dict(safetensors.deserialize(blob))
    assert set(got) == set(header), f"{path}: names differ: {sorted(got)} vs {sorted(header)}"
    for name, info in header.items():
        t = got[name]
        begin, end = info["data_offsets"]
        assert t["dtype"] == info["dtype"], (name, t["dtype"], info["dtype"])
        assert list(t["shape"]) == info["shape"], (name, t["shape"], info["shape"])
        assert bytes(t["data"]) == data[begin:end], f"{path}: bytes of {name} differ"
    print(f"ok: {path}: {len(header)} tensors, {len(meta)} metadata entries, safetensors {safetensors.__version__}")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        check(p)
