#!/usr/bin/env python3
# gguf_peer.py: the `gguf` reference reader and writer (PyPI; llama.cpp's gguf-py) for test_gguf,
# which checks that it sees our files as we do and that we read the files it writes.
#
#   python3 tests/gguf_peer.py dump FILE        what the reader sees, one line per key and tensor
#   python3 tests/gguf_peer.py rewrite SRC DST  DST: every key/value and tensor of SRC, written by gguf-py
#
# dump lines (file order; the reader's own GGUF.* fields left out):
#   kv KEY TYPE VALUE               TYPE as gguf-py names it (UINT32, FLOAT32, STRING, ...)
#   kv KEY ARRAY[TYPE] N V1 V2 ...  an array of N values
#   tensor NAME TYPE D0,D1,...      dims in ggml order (D0 fastest)
# Values: integers in decimal, bools 0 / 1, floats the hex of their little-endian bytes (exact),
# strings the hex of their bytes (any bytes, no quoting).
import sys

import gguf
from gguf import GGUFValueType


def field_values(field):
    """The field's values as Python ints, floats (via their numpy type), bools or bytes."""
    elem = field.types[-1]
    out = []
    for i in field.data:
        part = field.parts[i]
        if elem == GGUFValueType.STRING:
            out.append(bytes(part))
        else:
            out.append(part[0])
    return out


def show(value, elem):
    if elem == GGUFValueType.STRING:
        return value.hex()
    if elem in (GGUFValueType.FLOAT32, GGUFValueType.FLOAT64):
        return value.tobytes().hex()
    return str(int(value))


def dump(path):
    r = gguf.GGUFReader(path)
    for name, field in r.fields.items():
        if name.startswith("GGUF."):
            continue
        elem = field.types[-1]
        values = [show(v, elem) for v in field_values(field)]
        if field.types[0] == GGUFValueType.ARRAY:
            print("kv", name, f"ARRAY[{elem.name}]", len(values), *values)
        else:
            print("kv", name, elem.name, values[0])
    for t in r.tensors:
        print("tensor", t.name, t.tensor_type.name, ",".join(str(int(d)) for d in t.shape))


def python_value(value, elem):
    if elem == GGUFValueType.STRING:
        return value
    if elem in (GGUFValueType.FLOAT32, GGUFValueType.FLOAT64):
        return float(value)
    if elem == GGUFValueType.BOOL:
        return bool(value)
    return int(value)


def rewrite(src, dst):
    r = gguf.GGUFReader(src)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    w = gguf.GGUFWriter(dst, arch)  # writes general.architecture itself
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        elem = field.types[-1]
        values = [python_value(v, elem) for v in field_values(field)]
        if field.types[0] == GGUFValueType.ARRAY:
            w.add_key_value(name, values, GGUFValueType.ARRAY, sub_type=elem)
        else:
            w.add_key_value(name, values[0], elem)
    for t in r.tensors:
        w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "dump":
        dump(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "rewrite":
        rewrite(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: gguf_peer.py dump FILE | rewrite SRC DST")
