#!/usr/bin/env python3
"""tensorcast's 8-bit float casts against PyTorch's, bit for bit.

    float8_against_pytorch.py TC_FLOAT8_CODES

TC_FLOAT8_CODES is tools/float8_codes.cpp's binary. For each format: every one of the 256
codes widens to the same float32 bits as PyTorch's `.float()`, and every one of the 2^32
float32 bit patterns casts to the same code as PyTorch's `.to(torch.float8_*)` (for
e5m2_saturated: `x.clamp(-57344, 57344).to(torch.float8_e5m2)`, torchao's saturated cast).
Prints one line per format; exit status 1 on any difference (the first ones are listed).
"""
import subprocess
import sys

import numpy as np
import torch

FORMATS = {
    "e4m3fn": (torch.float8_e4m3fn, lambda x: x.to(torch.float8_e4m3fn)),
    "e5m2": (torch.float8_e5m2, lambda x: x.to(torch.float8_e5m2)),
    "e5m2_saturated": (torch.float8_e5m2, lambda x: x.clamp(-57344.0, 57344.0).to(torch.float8_e5m2)),
    "e8m0fnu": (torch.float8_e8m0fnu, lambda x: x.to(torch.float8_e8m0fnu)),
}
CHUNK = 1 << 26


def main():
    tool = sys.argv[1]
    failed = False
    for name, (dtype, cast) in FORMATS.items():
        ours = np.frombuffer(subprocess.run([tool, "decode", name], check=True, capture_output=True).stdout,
                             dtype="<u4")
        codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
        theirs = codes.view(dtype).float().view(torch.int32).numpy().view(np.uint32)
        wrong_codes = np.nonzero(ours != theirs)[0]
        for c in wrong_codes[:5]:
            print(f"{name}: code 0x{c:02x} widens to 0x{ours[c]:08x}, PyTorch 0x{theirs[c]:08x}")

        proc = subprocess.Popen([tool, "encode", name], stdout=subprocess.PIPE)
        mismatches = 0
        # Buffers made once: a fresh 256 MiB array per chunk costs more in page faults than the casts.
        offsets = np.arange(CHUNK, dtype=np.uint32)
        patterns = np.empty(CHUNK, dtype=np.uint32)
        ours = np.empty(CHUNK, dtype=np.uint8)
        for start in range(0, 1 << 32, CHUNK):
            np.add(offsets, np.uint32(start), out=patterns)
            theirs = cast(torch.from_numpy(patterns.view(np.float32))).view(torch.uint8).numpy()
            if proc.stdout.readinto(memoryview(ours)) != CHUNK:
                print(f"{name}: {tool} stopped at 0x{start:08x}")
                mismatches += 1
                break
            bad = np.nonzero(ours != theirs)[0]
            for i in bad[: max(0, 5 - mismatches)]:
                f = patterns[i : i + 1].view(np.float32)[0]
                print(f"{name}: float 0x{patterns[i]:08x} ({f!r}) casts to 0x{ours[i]:02x}, PyTorch 0x{theirs[i]:02x}")
            mismatches += bad.size
        proc.stdout.close()
        if proc.wait() != 0:
            print(f"{name}: {tool} exited with {proc.returncode}")
            mismatches += 1
        failed |= mismatches > 0 or wrong_codes.size > 0
        verdict = "agree" if mismatches == 0 and wrong_codes.size == 0 else \
            f"{wrong_codes.size} codes and {mismatches} floats differ"
        print(f"{name}: 256 codes widen and 4294967296 floats cast as PyTorch {torch.__version__}'s: {verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
