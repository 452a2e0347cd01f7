"""Checks `gradc verify --format=json` read from stdin.

usage: check_verify.py [ok | FIELD==V | FIELD<=V]...
`ok`: the document and every row are ok. FIELD==V / FIELD<=V hold on every row.
"""
import json
import sys


def main():
    doc = json.load(sys.stdin)
    rows = doc["gradients"]
    assert rows, "no gradients"
    for arg in sys.argv[1:]:
        if arg == "ok":
            assert doc["ok"] is True, doc
            assert all(r["ok"] for r in rows), rows
            continue
        op = "==" if "==" in arg else "<="
        field, value = arg.split(op)
        for r in rows:
            got, want = float(r[field]), float(value)
            assert (got == want) if op == "==" else (got <= want), f"{r['gradient']}: {field} = {got}, want {op} {want}"
    for r in rows:
        for key in ("gradient", "of", "type", "mode", "fd_max_err", "fd_tol", "fd_checked", "fd_total", "kinks",
                    "ref_max_err", "ok", "status"):
            assert key in r, f"row without {key}"
    print("ok")


if __name__ == "__main__":
    main()
