#!/usr/bin/env bash
# gblastn on a GPU beside blastn on all cores, on genome-scale synthetic data, in one run.
#
# usage: bench/gpu_bench.sh SYNTH_PY SIZE[,SIZE...] [TASK] [THREADS]
#   SYNTH_PY  the synthetic-data generator (synth.py of the benchmark kit)
#   SIZE      database sizes for synth.py --size, e.g. 1G,8G
# For each size: makes the data (seed 11), then bench/compare.py builds both databases and
# searches q_small + q_medium + q_large as one FASTA with each tool once, in gblastn's
# pipeline and serial modes; results and logs go to $OUT (or ./bench-out).
set -euo pipefail
synth=$1; sizes=$2; task=${3:-megablast}; threads=${4:-$(nproc)}
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-bench-out}; work=${WORK:-/tmp/gblastn-bench}
mkdir -p "$out" "$work"
for size in ${sizes//,/ }; do
  data=$work/synth-$size
  [ -f "$data/genome.fa" ] || python3 "$synth" --size "$size" --seed 11 --out "$data" > /dev/null
  echo "== synth --size $size --seed 11, task $task, $threads threads"
  python3 "$here/compare.py" --db-fasta "$data/genome.fa" --queries "$data/queries.list" \
    --task "$task" --threads "$threads" --device gpu --modes pipeline,serial --together \
    --work "$data/db" --warm-up 2>&1 | tee "$out/compare-$size-$task.txt"
done
