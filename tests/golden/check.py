"""What users see, kept: for every .dg file in the repository, `gradc ir` at each stage
and `gradc emit` for both targets (the program's own files: NAME.h, NAME.cpp or NAME.cu,
CMakeLists.txt; not the runtime headers, which are gradc's), with the exit status and
the messages, hashed into tests/golden/outputs.txt. A refactoring leaves every line as
it is; a change users should see updates the file on purpose (--update), in the same
commit, where a reviewer sees which programs' outputs changed.

usage: check.py GRADC [--update]
Run from anywhere; paths are taken relative to the repository root, as users type them.
"""
import hashlib
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "golden", "outputs.txt")
STAGES = ["parsed", "grad", "opt", "lowered"]


def programs():
    out = subprocess.run(["git", "ls-files", "*.dg"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return sorted(p for p in out.split() if p)


def digest(parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else p.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def run(cmd):
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, timeout=300)
    return [str(p.returncode), p.stdout, p.stderr]


def outputs(gradc):
    lines = []
    with tempfile.TemporaryDirectory() as work:
        for prog in programs():
            for stage in STAGES:
                lines.append(f"{digest(run([gradc, 'ir', prog, '--stage=' + stage]))}  ir --stage={stage}  {prog}")
            for target in ["cpu", "cuda"]:
                d = os.path.join(work, target)
                r = run([gradc, "emit", prog, "--target=" + target, "-o", d, "--name=prog"])
                files = []
                if os.path.isdir(d):
                    for f in sorted(os.listdir(d)):
                        if f.startswith("prog.") or f == "CMakeLists.txt":
                            files += [f, open(os.path.join(d, f), "rb").read()]
                    subprocess.run(["rm", "-rf", d], check=True)
                lines.append(f"{digest(r + files)}  emit --target={target}  {prog}")
    return lines


def main():
    gradc = os.path.abspath(sys.argv[1])
    got = outputs(gradc)
    if "--update" in sys.argv:
        with open(GOLDEN, "w") as f:
            f.write("\n".join(got) + "\n")
        print(f"golden: wrote {len(got)} outputs to {os.path.relpath(GOLDEN, ROOT)}")
        return
    want = open(GOLDEN).read().split("\n")
    want = [w for w in want if w]
    want_by_key = {w.split("  ", 1)[1]: w for w in want}
    got_by_key = {g.split("  ", 1)[1]: g for g in got}
    bad = []
    for key, line in got_by_key.items():
        if key not in want_by_key:
            bad.append(f"new: {key}")
        elif want_by_key[key] != line:
            bad.append(f"changed: {key}")
    for key in want_by_key:
        if key not in got_by_key:
            bad.append(f"gone: {key}")
    if bad:
        print("\n".join(bad))
        sys.exit(f"golden: {len(bad)} of {len(got)} outputs differ from tests/golden/outputs.txt "
                 "(python3 tests/golden/check.py build/gradc --update, if users should see the change)")
    print(f"golden: all {len(got)} outputs as before")


if __name__ == "__main__":
    main()
