#!/usr/bin/env bash
# Stage, here, what bench/device_run.sh needs on the GPU machine (`make bench-device-stage`).
#
#   bench/device_stage.sh            # DL19 inputs of bench_pipeline.py into .device/dl19
#   bench/device_stage.sh --ct2      # also CTranslate2's cp312 manylinux wheel into .device/whl
#
# Only the git checkout travels to the device machine, not ../shared beside it: the files
# bench_pipeline.py reads (common.build_pool: the question bank, the submitted runs
# and the passages; train_tokenizer: the passages) are copied into .device/ at the
# repository root, which .git/info/exclude keeps out of git and the device `run` call
# carries (carry [".device"]). The machine has no network, so a package it lacks travels
# as a wheel; of exam_eval's needs it lacks only CTranslate2 (and pytrec_eval, nltk,
# ir_datasets, krippendorff, which the grading path does not import).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DATA=${DATA:-$ROOT/../shared/data/dl19}
STAGE=${STAGE:-$ROOT/.device}       # what device_run.sh reads; another folder only for tests
LIMIT_MIB=${LIMIT_MIB:-56}  # the working tree that travels may hold 64 MiB in all
CT2=0
for arg in "$@"; do
  case $arg in
    --ct2) CT2=1 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "device_stage: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done

if [ ! -f "$DATA/passages.jsonl.gz" ] || [ ! -f "$DATA/banks/questions.jsonl.gz" ] || [ ! -d "$DATA/runs" ]; then
  echo "device_stage: $DATA lacks passages.jsonl.gz, banks/questions.jsonl.gz or runs/ (the DL19 folder of shared/data)" >&2
  exit 2
fi

# KiB of what the device tool sends of the checkout: tracked and untracked-not-ignored files
checkout_kib() {
  local kib
  kib=$(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard | du -ck --files0-from=- 2>/dev/null | tail -1 | cut -f1 || true)
  echo "${kib:-0}"
}

# the repository's exclude file, shared by every worktree of it
EXCLUDE=$(git -C "$ROOT" rev-parse --path-format=absolute --git-common-dir)/info/exclude
mkdir -p "$(dirname "$EXCLUDE")"
grep -qxF '/.device/' "$EXCLUDE" 2>/dev/null || echo '/.device/' >>"$EXCLUDE"

rm -rf "$STAGE/dl19"
mkdir -p "$STAGE/dl19/banks" "$STAGE/dl19/runs"
cp "$DATA/passages.jsonl.gz" "$STAGE/dl19/"
cp "$DATA/banks/questions.jsonl.gz" "$STAGE/dl19/banks/"
cp "$DATA"/runs/*.run "$STAGE/dl19/runs/"
chmod -R u+w "$STAGE/dl19"  # shared/ is read-only; a later staging must be able to replace the copy
# the machine gets the files without .git: which commit they are, and whether edits were on top
echo "$(git -C "$ROOT" rev-parse --short HEAD)$( [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ] && echo ' + uncommitted edits') (staged $(date -u +%FT%TZ))" >"$STAGE/COMMIT"

# a wheel staged by an earlier --ct2 does not travel with a staging that did not ask for it
[ "$CT2" = 1 ] || rm -rf "$STAGE/whl"
if [ "$CT2" = 1 ]; then
  PY=${PYTHON:-python3}
  # the version the project is tested with here, where the project's .venv has it
  VERSION=${CT2_VERSION:-$("$ROOT/.venv/bin/python" -c 'import importlib.metadata as m; print(m.version("ctranslate2"))' 2>/dev/null || true)}
  rm -rf "$STAGE/whl"
  mkdir -p "$STAGE/whl"
  # numpy and pyyaml, its other needs, are on the device already
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    -d "$STAGE/whl" "ctranslate2${VERSION:+==$VERSION}"
  whl_kib=$(du -sk "$STAGE/whl" | cut -f1)
  tree_kib=$(checkout_kib)
  data_kib=$(du -sk "$STAGE/dl19" | cut -f1)
  if [ $(( (whl_kib + tree_kib + data_kib) / 1024 )) -ge "$LIMIT_MIB" ]; then
    echo "device_stage: the CTranslate2 wheel ($((whl_kib / 1024)) MiB) would bring what travels to" \
         "$(( (whl_kib + tree_kib + data_kib) / 1024 )) MiB (limit kept here: $LIMIT_MIB of 64 MiB); left out" >&2
    rm -rf "$STAGE/whl"
  fi
fi

tree_kib=$(checkout_kib)
stage_kib=$(du -sk "$STAGE" | cut -f1)
echo "staged in $STAGE:"
(cd "$STAGE" && du -sh -- * | sed 's/^/  /')
ls "$STAGE"/whl/*.whl 2>/dev/null | sed 's/^/  wheel: /' || true
echo "travels: checkout $((tree_kib / 1024)) MiB + .device $((stage_kib / 1024)) MiB = $(( (tree_kib + stage_kib) / 1024 )) MiB (limit 64 MiB)"
