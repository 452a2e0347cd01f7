"""Checks `gradc run --format=json` output read from stdin.

usage: check_json.py [NAME<=TOL | NAME==V1,V2,... | NAME@R==V1,...]...
Every output of every rank must be finite; NAME<=TOL bounds |value| on every
rank; NAME==... gives the exact flattened data on every rank (NAME@R on rank R).
"""
import json
import math
import sys


def main():
    doc = json.load(sys.stdin)
    ranks = doc["ranks"]
    assert len(ranks) == doc["world"], "one entry per rank"
    for r in ranks:
        for name, v in r["outputs"].items():
            for x in v["data"]:
                if not math.isfinite(x):
                    sys.exit(f"rank {r['rank']}: output {name} is not finite: {x}")
    for spec in sys.argv[1:]:
        if "<=" in spec:
            name, tol = spec.split("<=")
            for r in ranks:
                worst = max(abs(x) for x in r["outputs"][name]["data"])
                if worst > float(tol):
                    sys.exit(f"rank {r['rank']}: |{name}| = {worst} > {tol}")
        else:
            name, want = spec.split("==")
            want = [float(w) for w in want.split(",")]
            only = None
            if "@" in name:
                name, only = name.split("@")
                only = int(only)
            for r in ranks:
                if only is not None and r["rank"] != only:
                    continue
                got = r["outputs"][name]["data"]
                if len(got) != len(want) or any(abs(g - w) > 1e-6 * max(1.0, abs(w)) for g, w in zip(got, want)):
                    sys.exit(f"rank {r['rank']}: {name} = {got}, expected {want}")
    print(f"checked {len(ranks)} ranks")


main()
