"""Writes a .npy file as NumPy would, without NumPy: any version (1, 2, 3), byte
order, dtype and memory order, for the input-file tests.

usage: make_npy.py OUT DESCR SHAPE VALUES [--fortran] [--version=V]
  DESCR   NumPy's descr: <f4 >f8 <i8 >i2 |u1 |b1 <f2 ...; <V2 holds bfloat16 (what
          ml_dtypes.bfloat16 saves), each value rounded to nearest even
  SHAPE   comma-separated dimensions, e.g. 2,3 (empty for a scalar)
  VALUES  comma-separated values in C (row-major) order; with --fortran they are
          stored column-major, as NumPy stores a Fortran-order array; for a 2-byte
          descr (<V2, <f2), `bits` stands for every one of the 65536 bit patterns, in
          order (SHAPE 65536)
"""
import struct
import sys


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = [a for a in sys.argv[1:] if a.startswith("--")]
    out, descr, shape_s, values_s = args
    fortran = "--fortran" in flags
    version = 1
    for f in flags:
        if f.startswith("--version="):
            version = int(f.split("=")[1])
    shape = [int(d) for d in shape_s.split(",") if d]
    bits = values_s == "bits"
    values = [] if bits else [float(v) if descr[1] in "fV" else int(v) for v in values_s.split(",") if v]
    if fortran and len(shape) > 1:  # C-order values -> column-major memory order
        strides = [1] * len(shape)
        for d in range(len(shape) - 2, -1, -1):
            strides[d] = strides[d + 1] * shape[d + 1]
        n = len(values)
        order = []
        for k in range(n):  # k-th element in memory: index with the first axis fastest
            idx, rest = [], k
            for d in range(len(shape)):
                idx.append(rest % shape[d])
                rest //= shape[d]
            order.append(sum(i * s for i, s in zip(idx, strides)))
        values = [values[o] for o in order]
    codes = {"f2": "e", "f4": "f", "f8": "d", "i1": "b", "i2": "h", "i4": "i", "i8": "q",
             "u1": "B", "u2": "H", "u4": "I", "u8": "Q", "b1": "?", "V4": "f"}
    endian = ">" if descr[0] == ">" else "<"
    if bits:
        data = b"".join(struct.pack(endian + "H", u) for u in range(65536))
    elif descr[1:] == "V2":  # bfloat16: the top half of the f32, rounded to nearest even
        def bf16(v):
            u = struct.unpack("<I", struct.pack("<f", v))[0]
            return (u + 0x7FFF + ((u >> 16) & 1)) >> 16
        data = b"".join(struct.pack(endian + "H", bf16(v)) for v in values)
    else:
        data = b"".join(struct.pack(endian + codes[descr[1:]], v) for v in values)
    tup = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, "True" if fortran else "False", tup)
    pre = 10 if version == 1 else 12
    header += " " * ((64 - (pre + len(header) + 1) % 64) % 64) + "\n"
    h = header.encode("utf-8" if version == 3 else "latin1")
    size = struct.pack("<H", len(h)) if version == 1 else struct.pack("<I", len(h))
    with open(out, "wb") as f:
        f.write(b"\x93NUMPY" + bytes([version, 0]) + size + h + data)


if __name__ == "__main__":
    main()
