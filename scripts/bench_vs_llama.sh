#!/bin/sh
# bench_vs_llama.sh: the lab's bin/bench and llama.cpp's llama-bench on the same GGUF files and
# thread counts, run alternately (lab, llama.cpp, lab, ...) so that a machine's drift falls on
# both, each run one repetition (-r 1) of pp512 and tg128; then the median tok/s of each side and
# their ratio. llama.cpp is never part of the lab: build it yourself (a CPU build with the
# llama-bench target; scripts/record_llama_fixtures.sh says how) and name its build directory.
# Run from the repository root, on a quiet machine:
#
#   scripts/bench_vs_llama.sh LLAMA_BUILD [ROUNDS]     ROUNDS alternations (default 5)
#
# $MODELS (default: both real models under out/models/real/), $THREADS (default "1 2"). Writes
# every run's CSV row (llama-bench's columns, the two tools print the same header) with the
# round and the engine in front to $OUT (default out/<hw>/bench_vs_llama.csv), written to a
# temporary name and renamed when complete, and prints the medians as a markdown table.
# llama-bench runs with its defaults (on this version: flash attention on, weights repacked,
# llamafile's tinyBLAS for prompts); the lab's engine runs its one exact path.
set -eu

[ $# -ge 1 ] || { sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
build=$(cd "$1" && pwd)
rounds=${2:-5}
threads=${THREADS:-1 2}
models=${MODELS:-out/models/real/smollm2-135m-instruct-q4_1.gguf out/models/real/gemma-3-270m-q4_k_m.gguf}

die() {
    echo "bench_vs_llama: error: $*" >&2
    exit 1
}

llama=$build/bin/llama-bench
[ -x "$llama" ] || die "$llama not found (cmake --build $1 --target llama-bench)"
case $rounds in '' | *[!0-9]* | 0) die "ROUNDS must be a positive integer, not '$rounds'" ;; esac
make -s bin/bench bin/hwinfo || die "make bin/bench bin/hwinfo failed"
for m in $models; do [ -f "$m" ] || die "$m not found (make real-models)"; done
out=${OUT:-out/$(bin/hwinfo --slug)/bench_vs_llama.csv}
mkdir -p "$(dirname "$out")"
tmp=$out.tmp.$$
trap 'rm -f "$tmp" "$tmp.row"' EXIT INT TERM

# one run: its CSV rows (header dropped) prefixed by round and engine
run() { # round engine command...
    r=$1 e=$2
    shift 2
    "$@" -o csv > "$tmp.row" 2>/dev/null || die "$* failed"
    sed '1d' "$tmp.row" | sed "s/^/$r,$e,/" >> "$tmp"
}

header=$(bin/bench -m "$(echo "$models" | cut -d' ' -f1)" -p 1 -n 0 -r 1 -t 1 -o csv 2>/dev/null | head -1)
echo "round,engine,$header" > "$tmp"
for r in $(seq 1 "$rounds"); do
    for m in $models; do
        for t in $threads; do
            echo "bench_vs_llama: round $r/$rounds, $(basename "$m"), $t thread(s)" >&2
            run "$r" lab bin/bench -m "$m" -t "$t" -p 512 -n 128 -r 1
            run "$r" llama.cpp env LD_LIBRARY_PATH="$build/bin" "$llama" -m "$m" -t "$t" -p 512 -n 128 -r 1
        done
    done
done
mv "$tmp" "$out"
trap - EXIT INT TERM
rm -f "$tmp.row"
echo "bench_vs_llama: $out" >&2

# The medians per (model, threads, test) and engine, and lab / llama.cpp.
awk -F, '
NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
{
    gsub(/"/, "")
    m = $col["model_filename"]; sub(/.*\//, "", m)
    test = $col["n_prompt"] > 0 ? "pp" $col["n_prompt"] : "tg" $col["n_gen"]
    key = m SUBSEP $col["n_threads"] SUBSEP test
    if (!(key in seen)) { seen[key] = 1; order[++nkeys] = key }
    n[key, $col["engine"]]++
    v[key, $col["engine"], n[key, $col["engine"]]] = $col["avg_ts"]
}
function median(key, e,   k, i, j, t, a) {
    k = n[key, e]
    for (i = 1; i <= k; i++) a[i] = v[key, e, i] + 0
    for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
END {
    print "| model | threads | test | runs | lab tok/s | llama.cpp tok/s | lab / llama.cpp |"
    print "|---|---:|---|---:|---:|---:|---:|"
    for (i = 1; i <= nkeys; i++) {
        split(order[i], f, SUBSEP)
        a = median(order[i], "lab"); b = median(order[i], "llama.cpp")
        printf "| %s | %s | %s | %d | %.2f | %.2f | %.2f |\n", f[1], f[2], f[3], n[order[i], "lab"], a, b, a / b
    }
}' "$out"
