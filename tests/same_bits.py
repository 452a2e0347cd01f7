"""Compares outputs two runs wrote (`--outputs`) bit for bit, a NaN equal to any NaN:
IEEE gives a NaN's sign and payload no meaning, and two compilers of the same scalar
code may set them differently (the interpreter's g++ and the native backend's clang
give gelu of a NaN opposite signs). Reads .npy without NumPy.

usage: same_bits.py DIR_A DIR_B NAME...   (each NAME's rank0/NAME.npy in both)
"""
import ast
import struct
import sys

# descr: (bytes, exponent mask, mantissa mask) of a float; integers have no NaNs
FLOATS = {"<V2": (2, 0x7F80, 0x007F), "<f2": (2, 0x7C00, 0x03FF), "<f4": (4, 0x7F800000, 0x007FFFFF),
          "<f8": (8, 0x7FF0000000000000, 0x000FFFFFFFFFFFFF)}


def words(path):
    data = open(path, "rb").read()
    size = struct.unpack("<H", data[8:10])[0] if data[6] == 1 else struct.unpack("<I", data[8:12])[0]
    start = 10 if data[6] == 1 else 12
    header = ast.literal_eval(data[start:start + size].decode("latin1"))
    descr, body = header["descr"], data[start + size:]
    width = FLOATS[descr][0] if descr in FLOATS else int(descr[2:])
    code = {2: "H", 4: "I", 8: "Q"}[width]
    return descr, struct.unpack("<%d%s" % (len(body) // width, code), body)


def nan(w, descr):
    if descr not in FLOATS:
        return False
    _, e, m = FLOATS[descr]
    return (w & e) == e and (w & m) != 0


def main():
    a, b, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    values = nans = 0
    for name in names:
        da, wa = words(f"{a}/rank0/{name}.npy")
        db, wb = words(f"{b}/rank0/{name}.npy")
        if da != db or len(wa) != len(wb):
            sys.exit(f"{name}: {da} x {len(wa)} against {db} x {len(wb)}")
        for i, (x, y) in enumerate(zip(wa, wb)):
            if x != y:
                if not (nan(x, da) and nan(y, da)):
                    sys.exit(f"{name}[{i}]: {x:#x} against {y:#x}")
                nans += 1
        values += len(wa)
    print(f"same bits: {len(names)} outputs, {values} values ({nans} NaNs of another sign or payload)")


if __name__ == "__main__":
    main()
