# lit configuration: golden tests of gradc's output, checked with FileCheck.
import os
import lit.formats

config.name = "gradc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".dg", ".ir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(os.path.dirname(config.gradc), "tests", "lit-out")
config.excludes = ["unit", "data", "fuzz", "codegen", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in", "expect_exit.sh", "check_json.py", "mutate.py", "long_chains.py", "check_verify.py", "compare_backends.py", "edges.py", "difftest", "torch"]
config.substitutions.append(("%gradc_dir", os.path.dirname(config.gradc)))
config.substitutions.append(("%gradc", config.gradc))
expect = os.path.join(os.path.dirname(__file__), "expect_exit.sh")
for code in (1, 2):
    config.substitutions.append(("%%exit%d" % code, "bash %s %d" % (expect, code)))
import sys
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("%examples", os.path.join(config.source_root, "examples")))
config.environment["PATH"] = os.pathsep.join([config.llvm_tools_dir, config.environment.get("PATH", "")])

# The long runs (every example built for every world size and for CUDA): with
# GRADC_LONG_TESTS=1 (scripts/test.sh --long); the default suite builds each program once.
if os.environ.get("GRADC_LONG_TESTS") == "1":
    config.available_features.add("long")
# CUDA code is compiled (never run) where the toolkit is: `gradc --version` says so.
import subprocess
if "cuda: yes" in subprocess.run([config.gradc, "--version"], capture_output=True, text=True).stdout:
    config.available_features.add("nvcc")
# gradc build --target=cuda compiles for the GPUs CMake's CUDAARCHS names (by default
# sm_80 and sm_90): the tests compile for one, an H100's, in half nvcc's device time.
config.environment["CUDAARCHS"] = "90-real"
# The native backend's cache of compiled programs: one for the whole suite, in the
# build tree (a program compiled by one test is loaded by the next). GRADC_TEST_CACHE
# names another: scripts/sanitize.sh's run uses the main build's, whose gradc generates
# the same code (a program it generates differently is compiled under its own key).
config.environment["XDG_CACHE_HOME"] = os.environ.get("GRADC_TEST_CACHE") or os.path.join(
    os.path.dirname(config.gradc), "tests", "cache")
for var in ("HOME", "GRADC_NATIVE_CXX"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
# PyTorch for the checks against it (tests/edges.py, tests/difftest/dgsmith.py): Debian's
# python3-torch, which scripts/deps.sh installs, is /usr/bin/python3's.
for candidate in (sys.executable, "/usr/bin/python3"):
    if subprocess.run([candidate, "-c", "import torch, numpy"], capture_output=True).returncode == 0:
        config.substitutions.append(("%torch_python", candidate))
        config.available_features.add("torch")
        break
# PyPI's PyTorch (torch.library.custom_op) for the torch target's tests: the virtual
# environment scripts/torch_venv.sh makes, which scripts/test.sh runs first. The
# extensions they compile are cached in the build tree. Not under the sanitizers:
# those tests check the generated package and PyTorch's processes, not gradc's memory.
venv_python = os.path.join(config.source_root, "build", "torch-venv", "bin", "python")
if "ASAN_OPTIONS" not in os.environ and os.path.exists(venv_python) and subprocess.run(
        [venv_python, "-c", "import torch, numpy; torch.library.custom_op"], capture_output=True).returncode == 0:
    config.substitutions.append(("%venv_python", venv_python))
    config.available_features.add("pytorch2")
    config.environment["TORCH_EXTENSIONS_DIR"] = os.path.join(os.path.dirname(config.gradc), "tests", "torch-ext")
    # a GPU that PyTorch sees: the torch target's CUDA ops run (tests/lit/torch_cuda.test)
    if subprocess.run([venv_python, "-c", "import sys, torch; sys.exit(not torch.cuda.is_available())"],
                      capture_output=True).returncode == 0:
        config.available_features.add("gpu")
