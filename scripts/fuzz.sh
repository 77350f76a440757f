#!/bin/sh
# fuzz.sh: run every libFuzzer target for a while on a seed corpus of real files, then print
# each one's executions, coverage (libFuzzer's cov: edges, ft: features) and findings.
# Usage (what `make fuzz FUZZ_SECONDS=N` runs): scripts/fuzz.sh BUILD_DIR SECONDS MAKE_SEEDS NAME...
# Seeds: the quick models (out/models/quick, or FUZZ_MODELS), llama2.c files and tiny GGUFs from
# MAKE_SEEDS, the templates, the render fixtures' CSVs and a run directory's (FUZZ_RUN_DIR, else
# the first out/*/ that has a meta.csv). Each target keeps its corpus in BUILD_DIR/corpus/NAME
# between runs; what it finds goes to BUILD_DIR/artifacts/NAME/ (crash-*, leak-*, timeout-*).
# Runs under nice -n 19, one target at a time; FUZZ_RUNS=N stops a target after N executions.
# Exits 1 when a target found something in this run (a crash, leak or timeout input it wrote)
# or ran no input, so a short run serves CI as a smoke test of every target.
set -eu
build=$1 seconds=$2 make_seeds=$3
shift 3
models=${FUZZ_MODELS:-out/models/quick}
run_dir=${FUZZ_RUN_DIR:-$(for d in out/*/; do if [ -f "$d/meta.csv" ]; then echo "$d"; break; fi; done)}

seeds=$build/seeds.$$ # this run's (two runs at once each have their own)
trap 'rm -rf "$seeds"' EXIT
"$make_seeds" "$seeds"
add() { # add TARGET FILE...: copy the files that exist into the target's seeds
    target=$1; shift
    mkdir -p "$seeds/$target"
    for f in "$@"; do [ -f "$f" ] && cp "$f" "$seeds/$target/$(echo "$f" | tr / _)"; done
    return 0
}
add gguf $models/*.gguf
add gguf_model $models/*.gguf
add csv tests/fixtures/render/run_a/*.csv templates/*.csv ${run_dir:+$run_dir/*.csv}
add template templates/*.tmpl templates/sections/*.tmpl tests/fixtures/render/templates/*.tmpl
add query templates/sections/*.tmpl tests/fixtures/render/templates/*.tmpl
add bpe README.md ARCHITECTURE.md templates/sections/*.tmpl
add tokenizer_vocab tests/fixtures/real/stress.txt tests/fixtures/real/prompts/*.txt README.md

printf '%-20s %12s %8s %8s %s\n' target executions cov ft findings
new_findings=""
for name in "$@"; do
    corpus=$build/corpus/$name artifacts=$build/artifacts/$name log=$build/logs/$name.log
    mkdir -p "$corpus" "$artifacts" "$build/logs"
    found_before=$(ls "$artifacts" | wc -l)
    # Input sizes, so that an execution stays short: binary files 32 kB (the tiny seeds whole,
    # the 300 kB real models cut, their metadata first), text 4 kB, BPE text 1 kB (chunks are
    # at most 64 bytes: longer inputs only repeat them). The parsers' own messages (stdout and
    # stderr) are closed (-close_fd_mask=3); libFuzzer's and the sanitizers' reports still print.
    case $name in gguf* | llama2c*) max_len=32768 ;; bpe) max_len=1024 ;; *) max_len=4096 ;; esac
    nice -n 19 "$build/fuzz_$name" -max_total_time="$seconds" -runs="${FUZZ_RUNS:--1}" -max_len=$max_len \
        -timeout=10 -rss_limit_mb=2048 -close_fd_mask=3 \
        -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" "$seeds/$name" > "$log" 2>&1 || true
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    found=$(ls "$artifacts" | wc -l)
    printf '%-20s %12s %8s %8s %s\n' "$name" "${execs:-?}" "${cov:-?}" "${ft:-?}" \
        "$([ "$found" -eq 0 ] && echo none || echo "$found in $artifacts (log: $log)")"
    # a target that ran no input at all (it died at start) fails as well
    if [ "$found" -gt "$found_before" ] || [ -z "$execs" ]; then new_findings="$new_findings $name"; fi
done
if [ -n "$new_findings" ]; then
    echo "fuzz: findings (or no run) from:$new_findings; see $build/logs/" >&2
    exit 1
fi
