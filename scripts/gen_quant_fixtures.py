#!/usr/bin/env python3
"""gen_quant_fixtures.py: the fixtures that hold inferlab's dequantisation to PyPI gguf's
(gguf.quants.dequantize, llama.cpp's gguf-py), bit for bit.

  tests/fixtures/quants/blocks.bin      random valid blocks of ggml's Q8_0, Q4_0, Q4_1, Q5_0, Q4_K
                                        and Q6_K (32 of each) and gguf's floats for them, and random
                                        floats with gguf's blocks for them (gguf.quants.quantize,
                                        ggml's quantize_row_*_ref rules) for the types the lab
                                        writes: Q8_0, Q4_0, Q4_1, Q5_0; read by
                                        tests/test_ggml_quants.c
  tests/fixtures/quants/real_dequant.txt  for every quantised tensor of the two real GGUFs under
                                        out/models/real/, a hash of gguf's dequantised floats; read
                                        by tests/test_real_dequant.c

Random blocks: every byte random, then each fp16 scale redrawn sane (|d| in [1e-3, 1], either
sign; Q4_1's m and Q4_K's dmin in [-1, 1]), so no block holds an inf or NaN scale but every
code, nibble, fifth bit and packed 6-bit scale takes arbitrary values. Deterministic (seed 28).

blocks.bin, little-endian: "IQFX" u32 version (1) u32 n_types, then per type: u32 ggml type id,
u32 n_blocks, u32 block_bytes, u32 block_elems, the n_blocks * block_bytes block bytes, and
n_blocks * block_elems float32 values; then u32 n_quantised_types and per type the same header,
n_blocks * block_elems float32 inputs (N(0, 1), one outlier of 4 per block) and the
n_blocks * block_bytes bytes gguf quantises them to.

real_dequant.txt: '#' comment lines, then per real file a line `file NAME BYTES` and per
quantised tensor (ggml type other than F32 / F16), in the file's order, a line
`NAME GGML_TYPE ROWS COLS HASH`: HASH is FNV-1a 64 (offset 0xcbf29ce484222325, prime
0x100000001b3) over the 8-byte little-endian FNV-1a 64 hashes of the tensor's rows, each over
that row's COLS float32 values' bytes (row-major: a row is dims[0] values).

Usage: scripts/gen_quant_fixtures.py [--real-dir out/models/real] [--out tests/fixtures/quants]
(the real files' part is skipped, saying so, when they are absent: `make real-models` places
them).
"""
import argparse
import os
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader
from gguf.quants import dequantize, quantize

SEED = 28
N_BLOCKS = 32
REAL_FILES = ["smollm2-135m-instruct-q4_1.gguf", "gemma-3-270m-q4_k_m.gguf"]

# type: (block elems, block bytes, [(offset of an fp16 field, kind)]); kind "d": |d| in
# [1e-3, 1] with a random sign, "m": uniform in [-1, 1]
LAYOUTS = {
    T.Q8_0: (32, 34, [(0, "d")]),
    T.Q4_0: (32, 18, [(0, "d")]),
    T.Q4_1: (32, 20, [(0, "d"), (2, "m")]),
    T.Q5_0: (32, 22, [(0, "d")]),
    T.Q4_K: (256, 144, [(0, "d"), (2, "m")]),
    T.Q6_K: (256, 210, [(208, "d")]),  # d is last
}

QUANTISED = [T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0]

FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)


def random_blocks(rng, qtype):
    elems, nbytes, fields = LAYOUTS[qtype]
    blocks = rng.integers(0, 256, size=(N_BLOCKS, nbytes), dtype=np.uint8)
    for off, kind in fields:
        if kind == "d":
            v = np.exp(rng.uniform(np.log(1e-3), 0.0, N_BLOCKS)) * rng.choice([-1.0, 1.0], N_BLOCKS)
        else:
            v = rng.uniform(-1.0, 1.0, N_BLOCKS)
        blocks[:, off:off + 2] = v.astype(np.float16).view(np.uint8).reshape(N_BLOCKS, 2)
    floats = dequantize(blocks, qtype).astype(np.float32).reshape(N_BLOCKS, elems)
    assert np.all(np.isfinite(floats)), qtype.name
    return blocks, floats


def write_blocks(path):
    rng = np.random.default_rng(SEED)
    with open(path + ".tmp", "wb") as f:
        f.write(b"IQFX" + struct.pack("<II", 1, len(LAYOUTS)))
        for qtype, (elems, nbytes, _) in LAYOUTS.items():
            blocks, floats = random_blocks(rng, qtype)
            f.write(struct.pack("<IIII", int(qtype), N_BLOCKS, nbytes, elems))
            f.write(blocks.tobytes())
            f.write(floats.astype("<f4").tobytes())
        f.write(struct.pack("<I", len(QUANTISED)))
        for qtype in QUANTISED:
            elems, nbytes, _ = LAYOUTS[qtype]
            x = rng.standard_normal((N_BLOCKS, elems)).astype(np.float32)
            x[np.arange(N_BLOCKS), rng.integers(0, elems, N_BLOCKS)] *= 4.0
            q = quantize(x, qtype)
            assert q.shape == (N_BLOCKS, nbytes), qtype.name
            f.write(struct.pack("<IIII", int(qtype), N_BLOCKS, nbytes, elems))
            f.write(x.astype("<f4").tobytes())
            f.write(q.tobytes())
    os.replace(path + ".tmp", path)
    print(f"wrote {path} ({os.path.getsize(path)} bytes: {len(LAYOUTS)} types dequantised, {len(QUANTISED)} "
          f"quantised, {N_BLOCKS} blocks each)")


def fnv1a_rows(rows):
    """FNV-1a 64 of each row's bytes (rows: (R, nbytes) uint8), vectorised across the rows."""
    h = np.full(rows.shape[0], FNV_OFFSET, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(rows.shape[1]):
            h = (h ^ rows[:, j].astype(np.uint64)) * FNV_PRIME
    return h


def fnv1a_bytes(data):
    h = int(FNV_OFFSET)
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def tensor_hash(t):
    cols = int(t.shape[0])
    rows_total = int(t.n_elements) // cols
    data = t.data.reshape(rows_total, -1)
    row_hashes = []
    chunk = 8192  # rows dequantised at a time (the Q8_0 embeddings are 262144 x 640)
    for r0 in range(0, rows_total, chunk):
        f = dequantize(data[r0:r0 + chunk], t.tensor_type).astype("<f4").reshape(-1, cols)
        row_hashes.append(fnv1a_rows(f.view(np.uint8).reshape(f.shape[0], cols * 4)))
    hashes = np.concatenate(row_hashes).astype("<u8")
    return rows_total, cols, fnv1a_bytes(hashes.tobytes())


def write_real(real_dir, path):
    missing = [f for f in REAL_FILES if not os.path.exists(os.path.join(real_dir, f))]
    if missing:
        print(f"skipped {path}: {', '.join(missing)} absent from {real_dir} (make real-models places them)")
        return
    lines = ["# FNV-1a 64 of gguf.quants.dequantize's float32 rows (scripts/gen_quant_fixtures.py says how)",
             "# file NAME BYTES / tensor GGML_TYPE ROWS COLS HASH"]
    for name in REAL_FILES:
        p = os.path.join(real_dir, name)
        lines.append(f"file {name} {os.path.getsize(p)}")
        reader = GGUFReader(p)
        n = 0
        for t in reader.tensors:
            if t.tensor_type in (T.F32, T.F16):
                continue
            rows, cols, h = tensor_hash(t)
            lines.append(f"{t.name} {int(t.tensor_type)} {rows} {cols} {h:016x}")
            n += 1
        print(f"{name}: {n} quantised tensors hashed")
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(path + ".tmp", path)
    print(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--real-dir", default="out/models/real")
    ap.add_argument("--out", default="tests/fixtures/quants")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    write_blocks(os.path.join(a.out, "blocks.bin"))
    write_real(a.real_dir, os.path.join(a.out, "real_dequant.txt"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
