#!/usr/bin/env bash
# The end-to-end training benchmark on the VW-style stream (core/workloads/vw_style_stream.h;
# bench/RESULTS.md, "Training on the VW-style stream"): `streamlearn train MODEL FILE --batch B`
# through a real streamlearn-server, beside an in-process baseline in the same run.
#
#   bench/train_e2e.sh [OUT_DIR]
#
# It writes the stream (bench/vw_stream_gen) as libsvm and as VW text, then makes RUNS rounds;
# each round runs every mode once, in a rotated order (interleaved, so a change of load hits
# every mode), each on a fresh server and model:
#   inproc_svm   bench/lmu_train_file on the libsvm file: the CLI's reader and an in-process
#                LmuLearner with the server's spec, no server (the baseline); it splits its time
#                into parse and train
#   mem_svm      streamlearn train of the libsvm file, server in memory (--data_dir=)
#   disk_svm     the same with --data_dir DIR --durability=process (the server's defaults else)
#   mem_vw       streamlearn train of the VW file, server in memory (features hashed by the CLI)
#   inproc_vw    bench/lmu_train_file on the VW file
# The model is `create --name vw --lmu --no-sau --lr LR` (the server's other LMU defaults).
# The rate is the one `streamlearn train` prints (samples applied / seconds from the first
# read to the last ack). Where the time goes: the CPU seconds of the CLI process and of the
# server during the train (/proc/PID/stat), per example. Prints each run, then the medians and
# ratios; OUT_DIR (optional) keeps the raw outputs.
#
# Environment: BUILD_DIR (default <repo>/build; needs bench/vw_stream_gen, bench/lmu_train_file,
#   server/streamlearn-server, client/streamlearn), EXAMPLES (1000000), SEED (1), RUNS (5),
#   BATCH (256), LR (0.01). Files go under TMPDIR (~0.5 GB per file, and the data dirs); every
#   server is stopped and the temporary directory removed on exit. ~3 min with the defaults.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$REPO/build}
EXAMPLES=${EXAMPLES:-1000000}
SEED=${SEED:-1}
RUNS=${RUNS:-5}
BATCH=${BATCH:-256}
LR=${LR:-0.01}
OUT_DIR=${1:-}

GEN=$BUILD_DIR/bench/vw_stream_gen
INPROC=$BUILD_DIR/bench/lmu_train_file
SERVER=$BUILD_DIR/server/streamlearn-server
CLI=$BUILD_DIR/client/streamlearn
for bin in "$GEN" "$INPROC" "$SERVER" "$CLI"; do
  [[ -x $bin ]] || { echo "missing $bin (build it, or set BUILD_DIR)" >&2; exit 2; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/train_e2e.XXXXXX")
SERVER_PID=""
cleanup() {
  if [[ -n $SERVER_PID ]]; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [[ -n $OUT_DIR ]]; then mkdir -p "$OUT_DIR"; fi
LOG=${OUT_DIR:-$WORK}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# CPU seconds (user + system) a process has used so far.
cpu_seconds() {
  awk -v tck="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.3f\n", ($12 + $13) / tck }' \
    "/proc/$1/stat"
}

# start_server ADDR [server flags...]: starts it in the background (SERVER_PID) and waits until
# it answers.
start_server() {
  local addr=$1
  shift
  "$SERVER" --listen "$addr" --metrics= "$@" > "$LOG/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 200); do
    if "$CLI" --server "$addr" list > /dev/null 2>&1; then return 0; fi
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      cat "$LOG/server.log" >&2
      echo "the server exited" >&2
      exit 1
    fi
    sleep 0.05
  done
  echo "the server did not answer on $addr" >&2
  exit 1
}

stop_server() {
  kill -TERM "$SERVER_PID"
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
}

# run_cli MODE FILE [server flags...]: one `streamlearn train` on a fresh server; appends
# "MODE rate cli_cpu_s server_cpu_s" to $WORK/results.
run_cli() {
  local mode=$1 file=$2
  shift 2
  local addr out before after cli_cpu
  addr=127.0.0.1:$(free_port)
  start_server "$addr" "$@"
  "$CLI" --server "$addr" create --name vw --lmu --no-sau --lr "$LR" > /dev/null
  out=$LOG/$mode.$RUN.txt
  before=$(cpu_seconds "$SERVER_PID")
  /usr/bin/time -f "%U %S" -o "$WORK/time" \
    "$CLI" --server "$addr" train vw "$file" --batch "$BATCH" > "$out"
  after=$(cpu_seconds "$SERVER_PID")
  stop_server
  grep -q " $EXAMPLES applied, 0 duplicates, 0 of " "$out" \
    || { cat "$out" >&2; echo "$mode: not every sample was applied" >&2; exit 1; }
  cli_cpu=$(awk '{ print $1 + $2 }' "$WORK/time")
  local rate
  rate=$(sed -n 's/.*(\([0-9]*\) samples\/s).*/\1/p' "$out")
  echo "$mode $rate $cli_cpu $(awk -v a="$after" -v b="$before" 'BEGIN { print a - b }')" \
    >> "$WORK/results"
  printf '  %-11s %9s samples/s   CLI CPU %5.2f s   server CPU %5.2f s\n' "$mode" "$rate" \
    "$cli_cpu" "$(awk -v a="$after" -v b="$before" 'BEGIN { print a - b }')"
}

# run_inproc MODE FILE: the baseline; appends "MODE rate parse_s train_s" to $WORK/results.
run_inproc() {
  local mode=$1 file=$2 out line
  out=$LOG/$mode.$RUN.txt
  "$INPROC" "$file" --lr "$LR" --batch "$BATCH" > "$out"
  line=$(cat "$out")
  local rate parse train
  rate=$(sed -n 's/.*(\([0-9]*\) samples\/s).*/\1/p' <<< "$line")
  parse=$(sed -n 's/.*, parse \([0-9.]*\) s,.*/\1/p' <<< "$line")
  train=$(sed -n 's/.*, train \([0-9.]*\) s,.*/\1/p' <<< "$line")
  echo "$mode $rate $parse $train" >> "$WORK/results"
  printf '  %-11s %9s samples/s   parse %5.2f s   train %5.2f s\n' "$mode" "$rate" "$parse" \
    "$train"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "commit:  $(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown)"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg)"
echo "stream:  $EXAMPLES examples, seed $SEED; batch $BATCH, lr $LR; $RUNS runs"
"$GEN" --examples "$EXAMPLES" --seed "$SEED" --format libsvm --out "$WORK/stream.svm"
"$GEN" --examples "$EXAMPLES" --seed "$SEED" --format vw --out "$WORK/stream.vw"
echo "files:   $(du -h "$WORK/stream.svm" | cut -f1) libsvm, $(du -h "$WORK/stream.vw" | cut -f1) VW"

MODES=(inproc_svm mem_svm disk_svm mem_vw inproc_vw)
: > "$WORK/results"
for RUN in $(seq 1 "$RUNS"); do
  echo "run $RUN:"
  for k in $(seq 0 $((${#MODES[@]} - 1))); do
    mode=${MODES[$(((k + RUN - 1) % ${#MODES[@]}))]}
    case $mode in
      inproc_svm) run_inproc "$mode" "$WORK/stream.svm" ;;
      inproc_vw) run_inproc "$mode" "$WORK/stream.vw" ;;
      mem_svm) run_cli "$mode" "$WORK/stream.svm" --data_dir= ;;
      mem_vw) run_cli "$mode" "$WORK/stream.vw" --data_dir= ;;
      disk_svm)
        rm -rf "$WORK/data"
        run_cli "$mode" "$WORK/stream.svm" --data_dir "$WORK/data" --durability=process
        rm -rf "$WORK/data"
        ;;
    esac
  done
done
if [[ -n $OUT_DIR ]]; then cp "$WORK/results" "$OUT_DIR/results.txt"; fi

# Medians of each column per mode, then the table.
awk -v n="$EXAMPLES" '
  function median(key,   k, m, v, i, j, t) {
    m = cnt[key]
    for (i = 1; i <= m; ++i) v[i] = val[key, i]
    for (i = 1; i <= m; ++i) for (j = i + 1; j <= m; ++j) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
  }
  { for (c = 2; c <= 4; ++c) { key = $1 SUBSEP c; val[key, ++cnt[key]] = $c } }
  END {
    split("inproc_svm mem_svm disk_svm mem_vw inproc_vw", order, " ")
    for (i = 1; i <= 5; ++i) {
      mode = order[i]
      rate[mode] = median(mode SUBSEP 2); a[mode] = median(mode SUBSEP 3); b[mode] = median(mode SUBSEP 4)
    }
    printf "\nmedians of %d runs (us per example: CPU seconds / examples)\n", cnt["mem_svm" SUBSEP 2]
    printf "  %-11s %12s   %s\n", "mode", "samples/s", "where the time goes, us per example"
    for (i = 1; i <= 5; ++i) {
      mode = order[i]
      if (mode ~ /^inproc/)
        printf "  %-11s %12.0f   parse %.3f, train %.3f (wall)\n", mode, rate[mode], 1e6 * a[mode] / n, 1e6 * b[mode] / n
      else
        printf "  %-11s %12.0f   CLI CPU %.3f, server CPU %.3f\n", mode, rate[mode], 1e6 * a[mode] / n, 1e6 * b[mode] / n
    }
    printf "\nratios of the medians (samples/s)\n"
    printf "  %-52s %7.3f\n", "in-memory server / in-process (libsvm)", rate["mem_svm"] / rate["inproc_svm"]
    printf "  %-52s %7.3f\n", "data dir, durability=process / in-process (libsvm)", rate["disk_svm"] / rate["inproc_svm"]
    printf "  %-52s %7.3f\n", "data dir / in-memory server (libsvm)", rate["disk_svm"] / rate["mem_svm"]
    printf "  %-52s %7.3f\n", "VW text / libsvm, in-memory server", rate["mem_vw"] / rate["mem_svm"]
    printf "  %-52s %7.3f\n", "VW text / libsvm, in-process", rate["inproc_vw"] / rate["inproc_svm"]
    printf "\nagainst the external reference, vw --sgd from text at 1.11M examples/s (measured\n"
    printf "elsewhere, not in this run; targets: in memory >= 1.5x, data dir >= 1x):\n"
    printf "  %-52s %7.3f\n", "in-memory server (libsvm) / VW", rate["mem_svm"] / 1.11e6
    printf "  %-52s %7.3f\n", "data dir, durability=process (libsvm) / VW", rate["disk_svm"] / 1.11e6
  }' "$WORK/results"
