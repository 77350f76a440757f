#!/bin/sh
# record_llama_fixtures.sh: record llama.cpp's reference outputs on the two real models as the
# fixtures under tests/fixtures/real/ (its README.md says what each file holds and how llama.cpp
# computes it). llama.cpp is never part of the lab: build it yourself (a CPU build with shared
# libraries and the tools llama-tokenize, llama-perplexity, llama-bench) and name its build
# directory. Run from the repository root:
#
#   scripts/record_llama_fixtures.sh LLAMA_BUILD           record tokens, greedy ids, perplexity
#   scripts/record_llama_fixtures.sh LLAMA_BUILD reference greedy ids and perplexity with llama.cpp's
#                                                          reference kernels (below)
#   scripts/record_llama_fixtures.sh LLAMA_BUILD bench     llama-bench only (a timing: run it on a
#                                                          quiet machine), into llama_bench_<hw>.csv
#   scripts/record_llama_fixtures.sh LLAMA_BUILD candidates  the candidates llama.cpp's samplers keep
#                                                          (llama_candidates.c; README.md there), into
#                                                          <model>/candidates*.txt and recorded-candidates.txt
#
# llama.cpp's reference kernels: by default a prompt row is computed by other kernels than a
# decode row (llamafile's tinyBLAS for F32/Q8_0/Q5_0/Q4_0 products of >= 2 rows, the tiled k-quant
# matmul for >= 8 rows, repacked Q4_K), so llama.cpp's prompt logits differ from its own decode
# logits. `reference` takes the one ggml kernel (vec_dot) for every row, as the lab does: it needs
# a build configured with -DGGML_LLAMAFILE=OFF and runs with weight repacking off (--no-repack)
# and GGML_CPU_TILED_MM=0. It writes greedy-reference.txt, perplexity-reference.{log,txt} and
# commands-reference.txt beside the default files, and recorded-reference.txt.
#
# LLAMA_BUILD is the cmake build directory; the source tree (for include/llama.h) is read from
# its CMakeCache.txt, or from $LLAMA_SRC. Inputs: the two GGUFs under out/models/real/
# (make real-models) and the KJV validation text out/corpus/kjv-valid.txt (make
# out/corpus/kjv-valid.txt): missing ones are made with make. $THREADS (default 2) threads;
# $PPL_CHUNKS, when set, limits llama-perplexity to that many chunks (--chunks; default all);
# $MODELS, when set, records only those models (names as below), leaving the other's files.
#
# Per model M (smollm2-135m-instruct-q4_1, gemma-3-270m-q4_k_m) it writes
# tests/fixtures/real/M/ (first into a temp directory, renamed into place when all of M is done):
#   kjv-valid.ids, stress.ids   llama-tokenize ids, one per line
#   greedy.txt                  llama_greedy.c's output on prompts/1.txt .. 5.txt, 64 new tokens
#   perplexity.log              llama-perplexity's whole output (stdout and stderr)
#   perplexity.txt              parsed from it: "chunk <i> <running ppl>" lines, then
#                               "final <ppl> <+/- error>"
#   commands.txt                every command that wrote the files above, as run
# and tests/fixtures/real/recorded.txt: llama.cpp's version, the machine, the inputs' sha256.
# Only the files a mode records are replaced.
set -eu

[ $# -ge 1 ] || { sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
build=$(cd "$1" && pwd)
mode=${2:-record}
threads=${THREADS:-2}
chunks=${PPL_CHUNKS:+--chunks $PPL_CHUNKS}
fix=tests/fixtures/real
models_dir=out/models/real
kjv=out/corpus/kjv-valid.txt
models=${MODELS:-smollm2-135m-instruct-q4_1 gemma-3-270m-q4_k_m}

die() {
    echo "record_llama_fixtures: error: $*" >&2
    exit 1
}

[ -f "$fix/stress.txt" ] || die "run from the repository root ($fix/stress.txt not found)"
for tool in llama-tokenize llama-perplexity; do
    [ "$mode" = bench ] || [ "$mode" = candidates ] || [ -x "$build/bin/$tool" ] || die "$build/bin/$tool not found (build the target: cmake --build $build --target $tool)"
done
need=
for m in $models; do [ -f "$models_dir/$m.gguf" ] || need="$need real-models"; done
[ "$mode" = bench ] || [ -f "$kjv" ] || need="$need $kjv"
# shellcheck disable=SC2086 # a list of targets
[ -z "$need" ] || make $need

# the machine's slug as the lab names it (bin/real_models looks for llama_bench_<slug>.csv)
make -s bin/hwinfo >&2 || die "cannot build bin/hwinfo"
hw=$(bin/hwinfo --slug)

if [ "$mode" = bench ]; then
    [ -x "$build/bin/llama-bench" ] || die "$build/bin/llama-bench not found (cmake --build $build --target llama-bench)"
    out=$fix/llama_bench_$hw.csv
    set --
    for m in $models; do set -- "$@" -m "$models_dir/$m.gguf"; done
    echo "+ $build/bin/llama-bench $* -r 5 -t 1,2 -p 512 -n 128 -o csv > $out" >&2
    "$build/bin/llama-bench" "$@" -r 5 -t 1,2 -p 512 -n 128 -o csv > "$out.tmp.$$" || { rm -f "$out.tmp.$$"; die "llama-bench failed"; }
    mv "$out.tmp.$$" "$out"
    echo "record_llama_fixtures: $out" >&2
    exit 0
fi
# sfx: the reference files' name suffix; repack: llama-perplexity's and llama_greedy's flag
sfx='' repack=''
case $mode in
record) ;;
candidates)
    grep -q '^GGML_LLAMAFILE:BOOL=OFF' "$build/CMakeCache.txt" ||
        die "candidates: $build is not configured with -DGGML_LLAMAFILE=OFF"
    export GGML_CPU_TILED_MM=0
    ;;
reference)
    grep -q '^GGML_LLAMAFILE:BOOL=OFF' "$build/CMakeCache.txt" ||
        die "reference: $build is not configured with -DGGML_LLAMAFILE=OFF"
    sfx=-reference repack=--no-repack
    export GGML_CPU_TILED_MM=0
    ;;
*) die "unknown mode '$mode' (record, reference, bench or candidates)" ;;
esac

src=${LLAMA_SRC:-$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")}
[ -f "$src/include/llama.h" ] || die "llama.h not found under '$src' (set LLAMA_SRC to the llama.cpp source tree)"

work=$(mktemp -d "$fix/.record.tmp.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# run FILE CMD...: append the command to the model's commands.txt (the temp directory's
# llama_greedy named as such), then run it
run() {
    log=$1
    shift
    echo "$*" | sed "s|$work/||g" >> "$log"
    "$@"
}

if [ "$mode" = candidates ]; then
    prog=$work/llama_candidates
    gcc -O2 -std=c11 -o "$prog" "$fix/llama_candidates.c" -I"$src/include" -I"$src/ggml/include" \
        -L"$build/bin" -lllama -Wl,-rpath,"$build/bin" -lm
    for m in $models; do
        # shellcheck disable=SC2086 # the prompt files
        "$prog" --synthetic "$models_dir/$m.gguf" 24 "$threads" "$fix"/prompts/*.txt > "$work/$m-synthetic.txt"
        mv "$work/$m-synthetic.txt" "$fix/$m/candidates-synthetic.txt"
    done
    # shellcheck disable=SC2086
    "$prog" --no-repack "$models_dir/smollm2-135m-instruct-q4_1.gguf" 32 "$threads" "$fix"/prompts/*.txt > "$work/real.txt"
    mv "$work/real.txt" "$fix/smollm2-135m-instruct-q4_1/candidates.txt"
    {
        echo "llama.cpp: $(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")"
        echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $(grep -o -m1 'avx512f\|avx2' /proc/cpuinfo | head -1)"
        echo "hw: $hw"
        echo "recorded: $(date -u +%Y-%m-%dT%H:%M:%SZ); GGML_CPU_TILED_MM=0, --no-repack, llamafile off"
    } > "$fix/recorded-candidates.txt"
    echo "record_llama_fixtures: done: $fix/*/candidates*.txt" >&2
    exit 0
fi

# the greedy program, against this build's libllama
greedy=$work/llama_greedy
set -- gcc -O2 -std=c11 -o "$greedy" "$fix/llama_greedy.c" -I"$src/include" -I"$src/ggml/include" \
    -L"$build/bin" -lllama -Wl,-rpath,"$build/bin"
build_greedy=$(echo "$*" | sed "s|$work/||g")
"$@"

prompts=$(printf '%s ' "$fix"/prompts/*.txt)
for m in $models; do
    f=$models_dir/$m.gguf
    d=$work/$m
    mkdir -p "$d"
    c=$d/commands$sfx.txt
    echo "# $m: recorded $(date -u +%Y-%m-%dT%H:%M:%SZ); LLAMA_BUILD=$build${sfx:+; GGML_CPU_TILED_MM=0}" > "$c"
    echo "$build_greedy" >> "$c"

    # a. tokens: ids of the whole file, the model's default BOS, no escape processing
    [ -n "$sfx" ] || for t in kjv-valid:$kjv stress:$fix/stress.txt; do
        name=${t%%:*} text=${t#*:}
        printf '%s\n' "$build/bin/llama-tokenize -m $f -f $text --ids --log-disable --no-escape | tr -d '[] ' | tr , '\\n' > $name.ids" >> "$c"
        "$build/bin/llama-tokenize" -m "$f" -f "$text" --ids --log-disable --no-escape > "$d/$name.raw"
        tr -d '[] ' < "$d/$name.raw" | tr , '\n' > "$d/$name.ids"
        rm "$d/$name.raw"
        echo "record_llama_fixtures: $m $name: $(wc -l < "$d/$name.ids") tokens" >&2
    done

    # b. greedy: 64 new tokens per prompt
    # shellcheck disable=SC2086
    run "$c" "$greedy" $repack "$f" 64 "$threads" $prompts > "$d/greedy$sfx.txt"
    echo "record_llama_fixtures: $m greedy: $(grep -c '^generated' "$d/greedy$sfx.txt") prompts" >&2

    # c. perplexity over the whole validation text at context 512
    t0=$(date +%s)
    # shellcheck disable=SC2086 # $chunks: nothing, or the option and its value
    run "$c" "$build/bin/llama-perplexity" -m "$f" -f "$kjv" -c 512 -ctk f32 -ctv f32 -fa off -t "$threads" $repack $chunks \
        > "$d/perplexity$sfx.log" 2>&1 || die "$m: llama-perplexity failed (see $d/perplexity$sfx.log)"
    t1=$(date +%s)
    echo "# llama-perplexity took $((t1 - t0)) s" >> "$c"
    {
        grep -o '\[[0-9]*\][0-9.]*' "$d/perplexity$sfx.log" | tr -d '[' | tr ']' ' ' | sed 's/^/chunk /'
        sed -n 's/.*Final estimate: PPL = \([0-9.]*\) +\/- \([0-9.]*\).*/final \1 \2/p' "$d/perplexity$sfx.log"
    } > "$d/perplexity$sfx.txt"
    if ! grep -q '^final ' "$d/perplexity$sfx.txt"; then
        cp "$d/perplexity$sfx.log" "/tmp/perplexity-$m.log"
        die "$m: no final estimate in llama-perplexity's output (kept as /tmp/perplexity-$m.log)"
    fi
    echo "record_llama_fixtures: $m perplexity: $(sed -n 's/^final //p' "$d/perplexity$sfx.txt") ($((t1 - t0)) s)" >&2
done

{
    echo "llama.cpp: $("$build/bin/llama-perplexity" --version 2>&1 | grep -m1 '^version')"
    echo "built: $(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt") $(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")" \
         "$(grep -E '^(GGML_NATIVE|GGML_OPENMP|GGML_BLAS|GGML_LLAMAFILE|BUILD_SHARED_LIBS):' "$build/CMakeCache.txt" | tr '\n' ' ')"
    echo "source: $src"
    echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $(lscpu | grep -o 'avx512[a-z_0-9]*' | sort -u | tr '\n' ' ')"
    echo "hw: $hw"
    echo "threads: $threads"
    echo "recorded: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "inputs (sha256):"
    # shellcheck disable=SC2086 # the prompt files
    for f in "$models_dir"/smollm2-135m-instruct-q4_1.gguf "$models_dir"/gemma-3-270m-q4_k_m.gguf "$kjv" "$fix/stress.txt" $prompts; do
        echo "  $(sha256sum "$f")"
    done
} > "$work/recorded$sfx.txt"

for m in $models; do
    mkdir -p "$fix/$m"
    mv "$work/$m"/* "$fix/$m/"
done
mv "$work/recorded$sfx.txt" "$fix/recorded$sfx.txt"
echo "record_llama_fixtures: done: $fix" >&2
