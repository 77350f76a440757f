#!/usr/bin/env bash
# fleet_test.sh: what test_fleet runs, against a one-node Slurm cluster on loopback
# (scripts/slurm_local.sh, partitions cpu and cpu2 standing for two machines), in WORK:
#   1. make fleet PROFILE=quick (sampling and kv_cache, CUDA=0), cpu2's job scancel'd before it
#      starts: cpu's run completes and the comparison names cpu2 as missing (kept as partial.pdf);
#   2. the same make fleet again: cpu's job re-runs nothing (its CSVs' mtimes are kept in
#      cpu_mtimes.before / .after), cpu2's runs, the comparison has both;
#   3. make fleet FLEET_ARRAY=3: the needle sweep as a 3-task job array, merged, and the same
#      sweep as one run into WORK/single, for the test to compare byte for byte.
# Prints every job (id, name, partition, state, run time). The daemons are stopped by their
# pid files on exit, pass or fail. Models are trained once into the fleet's models directory,
# seeded from the repository's out/models/quick where that exists (bin/train keeps what is
# up to date).
#
#   tests/fleet_test.sh WORK        (exit status 0 when every step ran)
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:?usage: tests/fleet_test.sh WORK}
mkdir -p "$work" || exit 1
cluster=$work/cluster fleet=$work/fleet
export SLURM_PORT=$((20000 + $$ % 10000 * 2)) # slurmctld; slurmd the next port
trap '"$root/scripts/slurm_local.sh" stop "$cluster"' EXIT
"$root/scripts/slurm_local.sh" start "$cluster" cpu cpu2 || exit 1
export SLURM_CONF=$cluster/slurm.conf
mkdir -p "$fleet/models"
[ -d "$root/out/models/quick" ] && cp -rp "$root/out/models/quick" "$fleet/models/"

fleet() {
    make -s -C "$root" fleet FLEET_DIR="$fleet" PROFILE=quick FLEET_EXPERIMENTS="sampling kv_cache" \
        FLEET_MAKE="CUDA=0" "$@"
}
job_ids() { awk '{ print $2 }' "$fleet/jobs.txt" | paste -sd,; }
# Wait (at most 20 minutes) until every job of the last submission has left the queue.
wait_jobs() {
    local ids
    ids=$(job_ids)
    for _ in $(seq 1200); do
        [ -z "$(squeue -h -j "$ids" 2>/dev/null)" ] && return 0
        sleep 1
    done
    echo "fleet_test: jobs $ids still queued after 20 minutes" >&2
    return 1
}
show_jobs() {
    echo "== $1"
    for id in $(awk '{ print $2 }' "$fleet/jobs.txt"); do
        scontrol -o show job "$id" | while read -r record; do # one line per job, or per array task
            tr ' ' '\n' <<< "$record" | grep -E '^(JobId|ArrayTaskId|JobName|Partition|JobState|RunTime)=' | paste -sd' '
        done
    done
}
mtimes() { (cd "$fleet/cpu" && stat -c '%Y %n' *.csv report.pdf); }

fleet PARTITIONS="cpu cpu2" || exit 1
scancel "$(awk '$1 == "cpu2" { print $2 }' "$fleet/jobs.txt")"
wait_jobs || exit 1
show_jobs "make fleet, cpu2's job cancelled"
cp "$fleet/compare-cpu-vs-cpu2.pdf" "$work/partial.pdf" || exit 1
mtimes > "$work/cpu_mtimes.before" || exit 1

fleet PARTITIONS="cpu cpu2" || exit 1
wait_jobs || exit 1
show_jobs "make fleet again"
mtimes > "$work/cpu_mtimes.after" || exit 1

fleet PARTITIONS=cpu FLEET_ARRAY=3 || exit 1
wait_jobs || exit 1
show_jobs "make fleet FLEET_ARRAY=3"
"$fleet"/build/*-cuda0/bin/long_context --quick --model "$fleet/models/quick/target.gguf" --all-needles \
    --out "$work/single" 2> "$work/single.log" || { tail "$work/single.log"; exit 1; }
