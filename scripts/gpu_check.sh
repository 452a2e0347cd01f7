#!/usr/bin/env bash
# What needs a GPU, in one call (docs/codegen.md, "Checking on a GPU"):
#
#   scripts/gpu_check.sh --prepare   here, where gradc builds: writes gpu_check/ with each
#                                    case's sources (gradc emit), inputs and the interpreter's
#                                    outputs (gradc run --backend=interp)
#   scripts/gpu_check.sh --only=RE   either step for the cases whose names RE (grep -E) finds
#   scripts/gpu_check.sh             on the GPU machine (nvcc, NCCL, cuBLAS, PyTorch and NumPy in
#                                    $PYTHON or python3; no gradc):
#                                    builds every case side by side, runs each against those
#                                    outputs, prints one table, keeps the logs in
#                                    gpu_check/logs (and the table and a .tgz of them in $OUT)
#
# The cases: CUDA executables (examples and call sites, and one for any batch size at
# several) on one GPU and on as many as their world, the torch op on CUDA tensors under NCCL (tests/torch/check_ops.py and
# scripts.py), the embedding example (examples/embed/main.cu), and a class whose 16-bit
# map kernels meet pointers at odd elements (tests/cuda/pairs_offsets.cu). A case that needs more
# GPUs than the machine has is still run: NCCL refuses two ranks on one GPU, and the
# table says so (needs N GPUs) instead of failing. Exit 1 if any case that could run failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
DIR=$ROOT/gpu_check

# name | program | size flag (--ranks=N or --mesh=...) | GPUs it needs [| folder of its inputs]
EXES=(
  "first|examples/first.dg|--ranks=2|2"
  "transformer_1|examples/transformer.dg|--ranks=1|1"
  "transformer|examples/transformer.dg|--ranks=2|2"
  "syncbn_1|examples/syncbn.dg|--ranks=1|1"
  "rooted|examples/rooted.dg|--ranks=3|3"
  "nan_collectives|tests/codegen/nan_collectives.dg|--ranks=3|3"   # max and min with a NaN on one rank: order keys on NCCL
  "prod_special|tests/codegen/prod_special.dg|--ranks=3|3"   # prod's derivative with zeros, infinities and NaNs over ranks
  "contrastive|examples/contrastive.dg|--ranks=4|4"
  "call_sites_1|tests/lit/call_sites.dg|--ranks=1|1"
  "call_sites|tests/lit/call_sites.dg|--ranks=2|2"   # a label out of range: the device's message
  "tp_dp_mlp_1|examples/tp_dp_mlp.dg|--mesh=dp=1,tp=1|1"
  "tp_dp_mlp|examples/tp_dp_mlp.dg|--mesh=dp=2,tp=2|4"
  "transformer_2d|examples/transformer_2d.dg|--mesh=dp=2,tp=2|4"
  "models_1|tests/codegen/models.dg|--ranks=1|1"   # the ops of MoE layers and attention
  "pairs_1|tests/codegen/pairs.dg|--ranks=1|1"     # 16-bit map kernels two elements at a time
  "loop_kernels_1|tests/lit/loop_kernels.dg|--ranks=1|1"   # cumsum, scatter_add, index_add: a thread per column
  "gpt_block_1|examples/gpt_block.dg|--mesh=dp=1,tp=1|1"
  "gpt_block|examples/gpt_block.dg|--mesh=dp=2,tp=2|4"
  "moe_top2_1|examples/moe_top2.dg|--mesh=dp=1,ep=1|1"
  "moe_top2|examples/moe_top2.dg|--mesh=dp=2,ep=2|4"
  "mixed_precision_1|examples/mixed_precision.dg|--mesh=dp=1,tp=1|1"   # bf16 with f32 master weights
  "mixed_precision|examples/mixed_precision.dg|--mesh=dp=2,tp=2|4"     # bf16 all_to_all + f32 sums on NCCL
  "every_op_bf16|gpu_check/lp/every_bf16/p.dg|--ranks=1|1|gpu_check/lp/every_bf16/in"  # every op and its gradient in bf16,
  "every_op_f16|gpu_check/lp/every_f16/p.dg|--ranks=1|1|gpu_check/lp/every_f16/in"     # in f16 (tests/torch/low_precision.py)
  "tile_groups_1|tests/lit/tile_groups.dg|--ranks=1|1"     # map kernels as row groups of tiles (short last ones too)
  "exp_accuracy_1|tests/lit/exp_accuracy.dg|--ranks=1|1"   # gradc's own f32 exp, subnormal results included
  "log1p_accuracy_1|tests/lit/log1p_accuracy.dg|--ranks=1|1"   # gradc's own f32 log1p, next to -1 and up to 3e38
  "log_accuracy_1|tests/lit/log_accuracy.dg|--ranks=1|1"   # gradc's own f32 log, subnormal arguments included
  "expm1_accuracy_1|tests/lit/expm1_accuracy.dg|--ranks=1|1"   # gradc's own f32 expm1 (in f64 on the GPU too)
)
# One executable for any batch size (gradc build --size B=any), run at each of the sizes:
# name | program | size flag | GPUs it needs | the sizes (compare_backends.py --any-size)
ANY_EXES=(
  "any_size_1|tests/codegen/any_size.dg|--ranks=1|1|B=1,5,13"
  "any_size|tests/codegen/any_size.dg|--ranks=2|2|B=1,5,13"
  "any_size_tiles_1|tests/codegen/any_size_tiles.dg|--ranks=1|1|B=1,683,2049"   # tiles, the last one short
)
# name | check_ops.py's program and flags | GPUs it needs
OPS=(
  "torch_inner_grad|tests/torch/inner_grad.dg --ranks=1|1"
  "torch_collectives|tests/torch/collectives.dg --ranks=2|2"
  "torch_mesh_1|tests/torch/mesh.dg --mesh=dp=1,tp=1 --data-parallel=dp|1"
  "torch_mesh|tests/torch/mesh.dg --mesh=dp=2,tp=2 --data-parallel=dp|4"
  "torch_bf16_1|tests/torch/bf16.dg --mesh=dp=1,tp=1 --data-parallel=dp|1"   # bf16 and f16 CUDA tensors
  "torch_bf16|tests/torch/bf16.dg --mesh=dp=2,tp=2 --data-parallel=dp|4"
  "torch_any_size_1|tests/torch/any_size.dg --ranks=1 --any-size=B=5,3,1,8|1"   # one package for any batch size
  "torch_any_size|tests/torch/any_size.dg --ranks=2 --any-size=B=5,3,1,8|2"
)

# --only=RE keeps the cases whose names RE finds (both steps)
ONLY='' STEP=run_checks
for a in "$@"; do
  case $a in
    --only=*) ONLY=${a#--only=} ;;
    --prepare) STEP=prepare ;;
    *) echo "gpu_check.sh: unknown argument $a" >&2; exit 1 ;;
  esac
done
keep() { [ -z "$ONLY" ] || grep -qE "$ONLY" <<<"$1"; }
filter() {  # NAME of an array: drops its cases that --only does not keep
  local -n arr=$1
  local kept=() c
  for c in "${arr[@]}"; do keep "${c%%|*}" && kept+=("$c"); done
  arr=("${kept[@]}")
}
filter EXES
filter ANY_EXES
filter OPS

prepare() {
  scripts/build.sh >/dev/null
  local gradc=$ROOT/build/gradc py=$ROOT/build/torch-venv/bin/python
  [ -x "$py" ] || scripts/torch_venv.sh >/dev/null
  rm -rf "$DIR" && mkdir -p "$DIR"
  # the programs of every op in bf16 and in f16 (lp/every_*/p.dg), checked on the CPU first
  if grep -q gpu_check/lp <<<"${EXES[*]}"; then
    "$py" tests/torch/low_precision.py "$gradc" "$DIR/lp" >/dev/null || { echo "low_precision.py failed" >&2; exit 1; }
  fi
  for c in "${EXES[@]}"; do
    IFS='|' read -r name prog size gpus inputs <<<"$c"
    mkdir -p "$DIR/exe/$name"
    "$gradc" emit "$prog" --target=cuda --main --name=prog -o "$DIR/exe/$name/src" "$size" || exit 1
    # the interpreter's outputs, or its error (an executable must stop with the same words)
    "$gradc" run "$prog" --backend=interp --outputs="$DIR/exe/$name/want" "$size" ${inputs:+"--inputs=$inputs"} \
      >/dev/null 2>"$DIR/exe/$name/err" ||
      sed -n '1s/^.*error: //p' "$DIR/exe/$name/err" >"$DIR/exe/$name/want.err"
  done
  for c in "${ANY_EXES[@]}"; do
    IFS='|' read -r name prog size gpus points <<<"$c"
    "$gradc" emit "$prog" --target=cuda --main --name=prog --size "${points%%=*}=any" -o "$DIR/any/$name/src" "$size" ||
      exit 1
    # the inputs at each size, and the interpreter's outputs on them
    "$py" tests/compare_backends.py --any-size "$points" "$gradc" "$prog" "$DIR/any/$name" "$size" --prepare-only \
      >/dev/null || exit 1
  done
  for c in "${OPS[@]}"; do
    IFS='|' read -r name args gpus <<<"$c"
    # shellcheck disable=SC2086  # the flags are words
    "$py" tests/torch/check_ops.py "$gradc" $args "$DIR/$name" --device=cuda --prepare-only ||
      { echo "$name: check_ops.py --prepare-only failed" >&2; exit 1; }
  done
  if keep torch_scripts; then "$py" tests/torch/scripts.py "$gradc" "$DIR/torch_scripts" --prepare-only; fi
  if keep embed; then "$gradc" emit examples/embed/layer.dg --target=cuda -o "$DIR/embed/layer"; fi
  if keep pairs_offsets; then "$gradc" emit tests/codegen/pairs.dg --target=cuda -o "$DIR/pairs_offsets/pairs"; fi
  echo "gpu_check/: $(find "$DIR" -type f | wc -l) files; now run scripts/gpu_check.sh on the GPU machine"
}

# nvcc's flags for NCCL: the system's, else the nvidia-nccl wheel's beside PyTorch.
nccl_flags() {
  local wheel
  wheel=$(python3 -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null)
  if [ -n "$wheel" ] && [ ! -e /usr/include/nccl.h ] && [ ! -e "$CUDA_HOME/include/nccl.h" ]; then
    echo "-I$wheel/include -L$wheel/lib -Xlinker -rpath=$wheel/lib -l:libnccl.so.2"
  else
    echo "-lnccl"
  fi
}

# nvcc's flags for cuBLAS: the toolkit's, else the nvidia wheel's beside PyTorch.
cublas_flags() {
  if ls "$CUDA_HOME"/lib64/libcublas.so* >/dev/null 2>&1; then
    echo "-L$CUDA_HOME/lib64 -lcublas"
    return
  fi
  local lib
  lib=$(find "$(python3 -c 'import nvidia; print(list(nvidia.__path__)[0])')" -name 'libcublas.so.*' | sort | head -n 1)
  echo "-I$(dirname "$(dirname "$lib")")/include -L$(dirname "$lib") -Xlinker -rpath=$(dirname "$lib") -l:$(basename "$lib")"
}

RESULTS=()
record() { RESULTS+=("$1|$2|$3"); }  # name | status | detail
# A failed case that needed more GPUs than there are is "needs N GPUs", not a failure.
verdict() {
  local name=$1 gpus=$2 rc=$3 log=$4 what=$5
  if [ "$rc" -eq 0 ]; then
    record "$name" passed "$what"
  elif [ "$gpus" -gt "$GPUS" ]; then
    record "$name" "needs $gpus GPU$([ "$gpus" -gt 1 ] && echo s)" "$(grep -m1 -iE 'error|invalid|duplicate' "$log" | cut -c1-90)"
  else
    FAILED=1
    record "$name" FAILED "$(tail -n 1 "$log" | cut -c1-90)"
  fi
}

# The comparison of an executable's outputs (DIR/got) with the interpreter's (DIR/want).
COMPARE=$(cat <<'EOF'
import os, sys
import numpy as np
sys.path.insert(0, "tests")
from npy16 import rtol as rtol_of, widened
want, got = sys.argv[1], sys.argv[2]
bad = same = total = 0
for rank in sorted(os.listdir(want)):
    for f in sorted(os.listdir(os.path.join(want, rank))):
        a, b = np.load(os.path.join(want, rank, f)), np.load(os.path.join(got, rank, f))
        w, g, rtol = widened(a), widened(b), rtol_of(a.dtype)
        total += 1
        same += a.shape == b.shape and a.tobytes() == b.tobytes()
        tol = rtol / 10 * max(1.0, float(np.abs(w).max()) if w.size else 1.0)
        if w.shape != g.shape or not np.allclose(g, w, rtol=rtol, atol=tol, equal_nan=True):
            bad += 1
            print(f"{rank}/{f}: differs by {float(np.abs(g - w).max()) if w.shape == g.shape else 'shape'}")
print(f"{bad} of {total} outputs differ; {same} bit-equal")
sys.exit(1 if bad else 0)
EOF
)

run_checks() {
  [ -d "$DIR" ] || { echo "no gpu_check/: run scripts/gpu_check.sh --prepare where gradc builds first" >&2; exit 1; }
  CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
  local logs=$DIR/logs nvcc=$CUDA_HOME/bin/nvcc py
  py=${PYTHON:-$(command -v python3)}  # one with PyTorch and NumPy
  rm -rf "$logs" && mkdir -p "$logs"
  GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  FAILED=0
  nvidia-smi >"$logs/nvidia-smi.txt" 2>&1
  local libs
  libs="$(nccl_flags) $(cublas_flags)"
  # The torch cases, the scripts and the embedding example start at once in the
  # background (each compiles for a minute first); the executables build side by side.
  declare -A pid
  for c in "${OPS[@]}"; do
    IFS='|' read -r name args gpus <<<"$c"
    # shellcheck disable=SC2086
    timeout 300 "$py" tests/torch/check_ops.py - $args "$DIR/$name" --device=cuda >"$logs/$name.log" 2>&1 &
    pid[$name]=$!
  done
  if keep torch_scripts; then
    timeout 300 "$py" tests/torch/scripts.py - "$DIR/torch_scripts" --device=cuda >"$logs/torch_scripts.log" 2>&1 &
    pid[torch_scripts]=$!
  fi
  if keep embed; then
    {
      # shellcheck disable=SC2086
      "$nvcc" -O2 -std=c++17 -arch=native -I"$DIR/embed/layer" -Iexamples/embed -o "$DIR/embed/embed" \
        examples/embed/main.cu "$DIR/embed/layer/layer.cu" $libs &&
        timeout 300 "$DIR/embed/embed"
    } >"$logs/embed.log" 2>&1 &
    pid[embed]=$!
  fi
  if keep pairs_offsets; then
    {
      # shellcheck disable=SC2086
      "$nvcc" -O2 -std=c++17 -arch=native -I"$DIR/pairs_offsets/pairs" -o "$DIR/pairs_offsets/run" \
        tests/cuda/pairs_offsets.cu "$DIR/pairs_offsets/pairs/pairs.cu" $libs &&
        timeout 120 "$DIR/pairs_offsets/run"
    } >"$logs/pairs_offsets.log" 2>&1 &
    pid[pairs_offsets]=$!
  fi
  for c in "${EXES[@]}" "${ANY_EXES[@]}"; do
    IFS='|' read -r name prog size gpus inputs <<<"$c"
    local d=$DIR/exe/$name
    [ -d "$d" ] || d=$DIR/any/$name
    # shellcheck disable=SC2086
    "$nvcc" -O2 -std=c++17 -arch=native -I"$d/src" -o "$d/exe" "$d/src/prog.cu" "$d/src/prog_main.cu" \
      $libs >"$logs/$name.build.log" 2>&1 &
    pid[$name]=$!
  done
  for c in "${EXES[@]}" "${ANY_EXES[@]}"; do
    IFS='|' read -r name prog size gpus inputs <<<"$c"  # ANY_EXES: `inputs` are the sizes
    local d=$DIR/exe/$name log=$logs/$name.log what="CUDA executable $size"
    [ -d "$d" ] || d=$DIR/any/$name what="CUDA executable for any size $size"
    wait "${pid[$name]}"
    local built=$?
    {
      echo "== $prog $size: build" && cat "$logs/$name.build.log" && [ "$built" -eq 0 ] &&
        echo "== run" && rm -rf "$d/got" &&
        if [ "$d" = "$DIR/any/$name" ]; then  # at each size, against the interpreter
          timeout 300 "$py" tests/compare_backends.py --any-size "$inputs" - "$prog" "$d" --exe="$d/exe"
        elif [ -s "$d/want.err" ]; then  # the interpreter's error: the executable must stop with it
          ! timeout 120 "$d/exe" --outputs="$d/got" ${inputs:+"--inputs=$inputs"} >"$d/run.txt" 2>&1 && cat "$d/run.txt" &&
            grep -qF "$(cat "$d/want.err")" "$d/run.txt" && echo "stopped with the interpreter's message"
        else
          timeout 120 "$d/exe" --outputs="$d/got" ${inputs:+"--inputs=$inputs"} --format=json &&
            echo "== against the interpreter" && "$py" -c "$COMPARE" "$d/want" "$d/got"
        fi
    } >"$log" 2>&1
    verdict "$name" "$gpus" $? "$log" "$what: $(tail -n 1 "$log" | cut -c1-50)"
  done
  for c in "${OPS[@]}"; do
    IFS='|' read -r name args gpus <<<"$c"
    wait "${pid[$name]}"
    verdict "$name" "$gpus" $? "$logs/$name.log" "torch op on CUDA tensors, NCCL: $(tail -n 1 "$logs/$name.log" | cut -c1-60)"
  done
  if keep torch_scripts; then
    wait "${pid[torch_scripts]}"
    verdict torch_scripts 2 $? "$logs/torch_scripts.log" "seeds, torch.compile, errors on CUDA tensors"
  fi
  if keep embed; then
    wait "${pid[embed]}"
    verdict embed 2 $? "$logs/embed.log" "examples/embed/main.cu: its own check of the values"
  fi
  if keep pairs_offsets; then
    wait "${pid[pairs_offsets]}"
    verdict pairs_offsets 1 $? "$logs/pairs_offsets.log" "tests/cuda/pairs_offsets.cu: $(tail -n 1 "$logs/pairs_offsets.log" | cut -c1-60)"
  fi

  echo "GPU check: $GPUS GPU(s) ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)); logs in $logs"
  printf '| %-20s | %-12s | %s |\n' case result detail
  printf '|%s|%s|%s|\n' "----------------------" "--------------" "------"
  for r in "${RESULTS[@]}"; do
    IFS='|' read -r name status detail <<<"$r"
    printf '| %-20s | %-12s | %s |\n' "$name" "$status" "$detail"
  done | tee "$logs/table.md"
  # the device tool brings back a few files: the table and the logs in one archive
  [ -n "${OUT:-}" ] && cp "$logs/table.md" "$OUT/" && tar czf "$OUT/gpu_check_logs.tgz" -C "$DIR" logs
  exit "$FAILED"
}

$STEP
