#!/usr/bin/env bash
# The GPU run of bench_pipeline.py (issue 22), as ONE command of the device tool:
#
#   run  command: bash bench/device_run.sh   carry: [".device"]   timeout_s: 600
#
# after `make bench-device-stage` (or `bench/device_stage.sh --ct2`) here. It needs OUT
# (the device tool sets it) and .device/dl19; it ends inside BUDGET seconds (540) whatever
# happens, every step under `timeout`, and each step's figures are under $OUT as soon as
# that step (or each row of it: bench_pipeline saves after every row) is done:
#
#   $OUT/run.log                          everything printed, versions first
#   $OUT/large/bench_pipeline.{txt,json}  flan-t5-large: reference, plain loop, exam-grade
#                                         defaults (end to end, grading only), --dtype float32
#                                         and the share of grades equal to float32's
#   $OUT/batches.json                     bench/studies/device_batches.py on the same model: exam-grade's
#                                         engine batch by batch (device span and idle time,
#                                         waits, shapes) in variants (2D mask, memory capped
#                                         so that batches run out of it, pad multiple, cuDNN
#                                         off), the bare model call, and exam-grade end to end
#                                         on the whole DL19 pool (43 x 400) and on every
#                                         judged DL19 passage (92,600 pairs)
#   $OUT/host/bench_pipeline.{txt,json}   host cost per pair on the device's CPU, model stubbed
#   (run.log alone)                       bench/studies/device_profile.py on $LARGE: the GPU's matmul
#                                         rate, the bare model call with transformers' SDPA and
#                                         with exam-grade's attention, a profiler table (the
#                                         device tool returns 8 files: its JSON stays in /tmp)
#   $OUT/ct2_cuda.json                    one exam-grade --engine ctranslate2 attempt, where
#                                         the CTranslate2 wheel was carried (.device/whl)
#   $OUT/base/bench_pipeline.{txt,json}   flan-t5-base, the large rows (a smaller pool), last and
#                                         only where BASE is set and time is left
#
# Rehearsal on a CPU (every variable below may be set; tiny sizes):
#   DEVICE=cpu LARGE=flan-t5-small BASE=t5-1-layer QUERIES=1 PER_QUERY=2 BASE_PER_QUERY=2 \
#   SAMPLE_PAIRS=2 PLAIN_PAIRS=8 PLAIN_BATCHES=4,8 HOST_QUERIES=2 HOST_PER_QUERY=5 \
#   CT2_QUERIES=1 CT2_PER_QUERY=2 WHEELS=DIR_OF_A_CP311_WHEEL BATCHES_PER_QUERY=3 BIG_QUERIES=2 \
#   BIG_PER_QUERY=4 BATCHES_FLAGS="--bare-batch 4" \
#   PYTHON=/tmp/devenv/bin/python OUT=/tmp/devout bash bench/device_run.sh
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2
: "${OUT:?OUT: the folder whose files come back (the device tool sets it)}"
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
DATA=${DATA:-.device/dl19}
WHEELS=${WHEELS:-.device/whl}
SITE=${SITE:-/tmp/site}
BUDGET=${BUDGET:-540}               # seconds for the whole command (the tool's limit: 600)
LARGE=${LARGE:-flan-t5-large}
BASE=${BASE:-}                      # flan-t5-base: measured on the H200 already; last, if set
QUERIES=${QUERIES:-30}
PER_QUERY=${PER_QUERY:-40}          # flan-t5-large: 30 x 40 = 11,970 pairs
BASE_PER_QUERY=${BASE_PER_QUERY:-20} # flan-t5-base: 30 x 20 = 6,000 pairs
SAMPLE_PAIRS=${SAMPLE_PAIRS:-100}   # the reference loop's pairs (the issue's 100)
PLAIN_PAIRS=${PLAIN_PAIRS:-6000}    # the plain loop's pairs (the issue's 6,000)
PLAIN_BATCHES=${PLAIN_BATCHES:-128,512} # the H200's best was the largest; 32 took 22 s
BATCHES_PER_QUERY=${BATCHES_PER_QUERY:-20} # device_batches.py's variants: 30 x 20 = 6,000 pairs
BIG_QUERIES=${BIG_QUERIES:-43}
BIG_PER_QUERY=${BIG_PER_QUERY:-400}  # exam-grade end to end on 31,250 pairs
HOST_QUERIES=${HOST_QUERIES:-30}
HOST_PER_QUERY=${HOST_PER_QUERY:-40}
CT2_MODEL=${CT2_MODEL:-flan-t5-small}
CT2_QUERIES=${CT2_QUERIES:-6}
CT2_PER_QUERY=${CT2_PER_QUERY:-10}   # 600 pairs
# the longest each step may take (seconds), and what a later step is kept at least: a step
# never runs past the budget's end less what the steps after it are kept
LARGE_CAP=${LARGE_CAP:-210}
BATCHES_CAP=${BATCHES_CAP:-220}
BASE_CAP=${BASE_CAP:-200}
HOST_CAP=${HOST_CAP:-45}
PROFILE_CAP=${PROFILE_CAP:-75}
CT2_CAP=${CT2_CAP:-60}
# the profile: exam-grade's attention alone (the H200 compared the three), at three batch
# sizes (is a larger token budget than 131,072 worth it?)
PROFILE_FLAGS=${PROFILE_FLAGS:---attention sdpa_contiguous_bias --batches 256,512,1024}
KEEP_BATCHES=${KEEP_BATCHES:-150}
KEEP_HOST=${KEEP_HOST:-30}
KEEP_PROFILE=${KEEP_PROFILE:-0}      # the profile runs on what is left
KEEP_CT2=${KEEP_CT2:-30}            # kept only where a wheel was carried
LARGE_WORK=${LARGE_WORK:-/tmp/exam-large-work} # the large step's model, reused by device_batches.py
MIN_STEP=${MIN_STEP:-20}            # a step with less time than this is skipped
# the device image has no bytecode and does not write it (PYTHONDONTWRITEBYTECODE), so every
# fresh process compiles torch and transformers anew (11.5 s of the H100's 13.7 s start-up);
# PYCACHE=DIR writes and reuses it there, as a pip install (which compiles) would have it,
# warmed before the first step
# (PYCACHE= to measure the image as it is; the versions step's import line does so either way)
PYCACHE=${PYCACHE-/tmp/exam-pycache}
FLOAT32_ROW=${FLOAT32_ROW:-1}       # 0: no --dtype float32 row (another run has it)
# device_batches.py --steps, most needed first: the judged pool (92,600 pairs) is the
# end-to-end row where the start-up weighs least; the H100 and H200 runs of 2026-11-26 have
# the other variants
BATCHES_STEPS=${BATCHES_STEPS-default,judged,big,nocudnn,pad32,oom}

export PYTHONPATH=$ROOT PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$OUT"
END=$((SECONDS + BUDGET))

# step NAME CAP KEEP COMMAND...: COMMAND under timeout, for at most CAP seconds and never
# past the budget's end less KEEP seconds (kept for the steps after it)
step() {
  local name=$1 cap=$2 keep=$3 left t0 rc
  shift 3
  left=$((END - SECONDS - keep))
  [ "$left" -lt "$cap" ] && cap=$left
  if [ "$cap" -lt "$MIN_STEP" ]; then
    STEPS+=("$name: skipped, ${cap}s left of the budget")
    echo "== ${STEPS[-1]}"
    return
  fi
  echo "== $name: at most ${cap}s ($(date -u +%H:%M:%S) UTC)"
  t0=$SECONDS
  timeout -k 10 "$cap" "$@"
  rc=$?
  case $rc in
    0) STEPS+=("$name: done in $((SECONDS - t0))s") ;;
    124|137) STEPS+=("$name: STOPPED at its limit (${cap}s); the rows it finished are saved") ;;
    *) STEPS+=("$name: FAILED, exit $rc, after $((SECONDS - t0))s") ;;
  esac
  echo "== ${STEPS[-1]}"
}
STEPS=()

VERSIONS='
import platform, torch, transformers, tokenizers, numpy
print(f"python {platform.python_version()}, torch {torch.__version__} (CUDA {torch.version.cuda}), "
      f"transformers {transformers.__version__}, tokenizers {tokenizers.__version__}, numpy {numpy.__version__}")
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print(f"{p.name}: {p.total_memory / 2**30:.0f} GiB, {p.multi_processor_count} SMs, "
          f"capability {p.major}.{p.minor}, bf16 {torch.cuda.is_bf16_supported()}")
'

# where exam-grade's start-up goes (8-10 s on the H200's machine, 3 s here): the imports
# of a fresh interpreter, the largest by cumulative time (python -X importtime)
IMPORTS='
import subprocess, sys
stmt = "import torch, transformers; from transformers import AutoModelForSeq2SeqLM, AutoTokenizer"
err = subprocess.run([sys.executable, "-X", "importtime", "-c", stmt], capture_output=True, text=True).stderr
rows = []
for line in err.splitlines():
    parts = line.removeprefix("import time:").split("|")
    if not line.startswith("import time:") or len(parts) != 3 or not parts[0].strip().isdigit():
        continue  # the header, or another line
    name = parts[2].rstrip()
    rows.append((int(parts[1]), int(parts[0]), name.strip(), len(name) - len(name.lstrip()) == 1))
print(f"imports of {stmt!r}: {sum(r[0] for r in rows if r[3]) / 1e6:.2f} s; the largest:")
for cum, own, name, _ in sorted(rows, reverse=True)[:14]:
    print(f"  {cum / 1e6:6.2f} s with what it imports, {own / 1e6:6.2f} s its own  {name}")
# is the start-up spent in the file system? The import above made about 134,000 system calls on
# the 2-core machine (strace -c, with a T5 load: 50,000 stat, 12,000 open, 12,000 read, 11,000
# getdents, 20,000 mmap/munmap); the device runs under gVisor, where each can cost far more than here
import importlib.util, os, time, torch
src = torch.__file__
writes = "written" if not sys.flags.dont_write_bytecode else "NOT written"
cached = "present" if os.path.exists(importlib.util.cache_from_source(src)) else "MISSING"
print(f"{len(rows)} modules; bytecode {writes}, the .pyc of torch/__init__.py {cached}")
t = time.perf_counter()
for _ in range(20000):
    os.stat(src)
stat_us = (time.perf_counter() - t) / 20000 * 1e6
t = time.perf_counter()
for _ in range(2000):
    with open(src, "rb") as f:
        f.read(4096)
open_us = (time.perf_counter() - t) / 2000 * 1e6
t = time.perf_counter()
for _ in range(500):
    os.listdir(os.path.dirname(src))
list_us = (time.perf_counter() - t) / 500 * 1e6
print(f"file system: stat {stat_us:.1f} us, open+read+close {open_us:.1f} us, listdir of torch/ {list_us:.0f} us "
      f"(the 2-core machine: 2.1, 7.5, 40); 50k stat + 12k open alone: {(50e3 * stat_us + 12e3 * open_us) / 1e6:.1f} s")
'

main() {
  echo "== device_run $(date -u +%FT%TZ), device $DEVICE, budget ${BUDGET}s"
  # the commit staged (the machine gets the files without .git)
  [ -f .device/COMMIT ] && echo "checkout: $(cat .device/COMMIT)"
  command -v nvidia-smi >/dev/null && timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  echo "cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
  timeout 60 "$PYTHON" -c "$VERSIONS"
  timeout 60 "$PYTHON" -c "$IMPORTS"
  [ -d "$DATA" ] || { echo "device_run: $DATA not found: run bench/device_stage.sh here and carry .device"; return 2; }
  if [ -n "$PYCACHE" ]; then
    unset PYTHONDONTWRITEBYTECODE
    export PYTHONPYCACHEPREFIX=$PYCACHE
    echo "== bytecode written to and read from $PYCACHE; the imports again, first compiling, then cached:"
    timeout 90 "$PYTHON" -c "import exam_eval.commands.grade, exam_eval.backends.hf_seq2seq, exam_eval.grading.engine"
    timeout 60 "$PYTHON" -c "$IMPORTS" 2>&1 | sed -n 1p
    timeout 60 "$PYTHON" -c "$IMPORTS"
  fi

  # carried wheels (CTranslate2) into $SITE, which only the CTranslate2 step puts on
  # PYTHONPATH: where ctranslate2 imports, exam-grade's --engine auto picks it, and the
  # torch rows must stay torch
  have_ct2=0 keep_ct2=0
  if ls "$WHEELS"/*.whl >/dev/null 2>&1; then
    if timeout 120 "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
         --target "$SITE" "$WHEELS"/*.whl; then
      have_ct2=1 keep_ct2=$KEEP_CT2
    else
      echo "device_run: the carried wheels did not install into $SITE"
    fi
  fi

  bench=("$PYTHON" bench/bench_pipeline.py --device "$DEVICE" --data "$DATA" --no-ct2 --queries "$QUERIES"
         --sample-pairs "$SAMPLE_PAIRS" --plain-pairs "$PLAIN_PAIRS" ${PLAIN_BATCHES:+--plain-batches "$PLAIN_BATCHES"})
  # on a CPU the --dtype float32 row runs only when asked (the rehearsal asks)
  [ "$DEVICE" = cpu ] && [ "$FLOAT32_ROW" = 1 ] && bench+=(--float32-row)
  [ "$FLOAT32_ROW" = 1 ] || bench+=(--no-float32-row)

  step "$LARGE" "$LARGE_CAP" $((KEEP_BATCHES + KEEP_HOST + KEEP_PROFILE + keep_ct2)) "${bench[@]}" --models "$LARGE" --per-query "$PER_QUERY" --no-host-cost --keep "$LARGE_WORK" --out "$OUT/large"
  step "batches ($LARGE, exam-grade's engine)" "$BATCHES_CAP" $((KEEP_HOST + KEEP_PROFILE + keep_ct2)) "$PYTHON" bench/studies/device_batches.py --device "$DEVICE" --data "$DATA" \
    --model "$LARGE" --model-dir "$LARGE_WORK/$LARGE" --queries "$QUERIES" --per-query "$BATCHES_PER_QUERY" \
    --big-queries "$BIG_QUERIES" --big-per-query "$BIG_PER_QUERY" --budget $((BATCHES_CAP - 15)) ${BATCHES_STEPS:+--steps "$BATCHES_STEPS"} ${BATCHES_FLAGS:-} --json "$OUT/batches.json"
  step "host cost (device CPU)" "$HOST_CAP" $((KEEP_PROFILE + keep_ct2)) "$PYTHON" bench/bench_pipeline.py --device cpu --data "$DATA" --no-models --no-sim-device \
    --host-queries "$HOST_QUERIES" --host-per-query "$HOST_PER_QUERY" --out "$OUT/host"
  step "profile ($LARGE, the model alone)" "$PROFILE_CAP" "$keep_ct2" "$PYTHON" bench/studies/device_profile.py --device "$DEVICE" \
    --model "$LARGE" --no-compile $PROFILE_FLAGS --json /tmp/device_profile.json
  if [ "$have_ct2" = 1 ]; then
    step "ctranslate2 on $DEVICE" "$CT2_CAP" 0 "$PYTHON" bench/studies/device_ct2.py --device "$DEVICE" --site "$SITE" \
      --data "$DATA" --model "$CT2_MODEL" --queries "$CT2_QUERIES" --per-query "$CT2_PER_QUERY" --json "$OUT/ct2_cuda.json"
  else
    echo "== ctranslate2: no wheel carried in $WHEELS (bench/device_stage.sh --ct2)"
  fi
  if [ -n "$BASE" ]; then
    step "$BASE" "$BASE_CAP" 0 "${bench[@]}" --models "$BASE" --per-query "$BASE_PER_QUERY" --no-host-cost --out "$OUT/base"
  fi
  rm -f "$OUT"/*.part "$OUT"/*/*.part  # a save cut short by a step's limit; the file before it stands

  echo "== the figures"
  [ -f "$OUT/batches.json" ] && { echo "-- batches"; "$PYTHON" bench/studies/device_batches.py --summary "$OUT/batches.json"; }
  for d in large base host; do
    [ -f "$OUT/$d/bench_pipeline.txt" ] && { echo "-- $d"; cat "$OUT/$d/bench_pipeline.txt"; }
  done
  printf '== %s\n' "${STEPS[@]}"
  echo "== device_run: ${SECONDS}s in all"
}

main 2>&1 | tee "$OUT/run.log"
