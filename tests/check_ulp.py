"""Reads `gradc run --format=json` of a program with outputs x and y = f(x) (f32)
and checks that every y is within MAX ulp of f(x) computed exactly in f64 by Python.

usage: check_ulp.py FUNCTION MAX < run.json   (FUNCTION: a name in Python's math)
"""
import json
import math
import struct
import sys


def f32(v):
    return struct.unpack("f", struct.pack("f", v))[0]


def ulp(v):  # the spacing of f32 numbers at |v|
    v = abs(f32(v))
    bits = struct.unpack("I", struct.pack("f", v))[0]
    return struct.unpack("f", struct.pack("I", bits + 1))[0] - v if v != 0 else 1.4e-45


fn, most = getattr(math, sys.argv[1]), float(sys.argv[2])
out = json.load(sys.stdin)["ranks"][0]["outputs"]
worst, where = 0.0, None
for x, y in zip(out["x"]["data"], out["y"]["data"]):
    exact = fn(f32(x))  # the float x is (the JSON's shortest digits are not its exact value)
    err = abs(f32(y) - exact) / ulp(exact)
    if err > worst:
        worst, where = err, x
if worst > most:
    sys.exit(f"{sys.argv[1]}: {worst:.2f} ulp at x = {where!r}, more than {most}")
print(f"{sys.argv[1]}: within {most} ulp on {len(out['x']['data'])} points")
