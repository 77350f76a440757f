#!/bin/sh
# report_run.sh: the run-directory steps of `make report` as one transaction, under a lock, so
# that a run killed at any moment (kill -9 included) leaves the previous run directory exactly
# as it was, and two runs into the same OUT never mix.
# Usage (what `make report` runs): scripts/report_run.sh OUT COMMAND...   (COMMAND gets OUT=<stage>)
#
#   OUT                  a symbolic link to the current generation, .<name>.runs/<stamp>
#   .<name>.runs/next    the run in progress: a hard-link copy of the current generation, so
#                        make sees the same files and dates and reruns only stale steps; every
#                        writer replaces files by temp + rename or unlinks them (never writes
#                        in place: an experiment's manifest <name>.done too), so the current
#                        generation's files, which share those inodes, never change
#   .<name>.lock         flock(1): a second run waits for the first, then finds it up to date
# When COMMAND succeeds the stage becomes a generation and the link is swapped to it in one
# rename(2); only then is the previous generation removed. Whatever a killed run left (the
# stage and its *.tmp.* files, a generation it did not link) is removed by the next run,
# under the lock. An OUT that is still a plain directory (from before) becomes a generation.
set -eu
out=${1%/}
shift
parent=$(dirname "$out") name=$(basename "$out")
runs=$parent/.$name.runs stage=$parent/.$name.runs/next lock=$parent/.$name.lock
mkdir -p "$runs"

exec 9>>"$lock"
if ! flock -n 9; then
    echo "report: another make report is writing $out; waiting for it to finish (lock: $lock)" >&2
    flock 9
fi

link_to() { # link_to GEN: point OUT at GEN in one rename
    ln -sfn ".$name.runs/$(basename "$1")" "$parent/.$name.link"
    mv -T "$parent/.$name.link" "$out"
}
new_generation() { # a fresh name, later than every earlier one
    echo "$runs/$(date +%Y%m%d-%H%M%S-%N)"
}

if [ -d "$out" ] && [ ! -L "$out" ]; then # a plain run directory from before: adopt it
    gen=$(new_generation)
    mv "$out" "$gen"
    link_to "$gen"
elif [ ! -e "$out" ] && [ -n "$(ls "$runs" | grep -v '^next$' || true)" ]; then
    # killed between the two steps above: the newest generation is the run directory
    link_to "$runs/$(ls "$runs" | grep -v '^next$' | sort | tail -1)"
fi
current=$([ -L "$out" ] && readlink -f "$out" || true)

# what a killed run left: its stage, and generations that OUT does not point at
for d in "$runs"/*; do
    [ -e "$d" ] && [ "$(readlink -f "$d")" != "$current" ] && rm -rf "$d"
done
rm -f "$parent/.$name.link"
if [ -n "$current" ]; then cp -al "$current" "$stage"; else mkdir "$stage"; fi
find "$stage" -name '*.tmp.*' -delete # (an adopted directory may hold a crashed writer's)

"$@" OUT="$stage"

gen=$(new_generation)
mv "$stage" "$gen"
link_to "$gen"
[ -z "$current" ] || rm -rf "$current"
echo "report: $out/report.pdf"
