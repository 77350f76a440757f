// test_fleet.c: `make fleet` for real, on a one-node Slurm cluster on loopback. Runs
// tests/fleet_test.sh (which starts slurmctld + slurmd, submits the fleet three times and
// stops the daemons by their pid files, pass or fail) and checks what it left: both run
// directories complete, the comparison PDF names both machines; the comparison rendered while
// cpu2's job was scancel'd names cpu2 as missing and still shows cpu; the re-submit re-ran
// nothing of cpu's (its CSVs and PDF keep their mtimes); the job array's needle shards merge
// into exactly the CSVs one run writes (those tables have no timing columns, so the whole
// file), and no shard is left behind; the machines' steps left their manifests (<name>.done),
// the shards and their merge none (they are parts of a run). Without slurm-wlm the test fails, saying so (make deps
// installs it). A few minutes on 2 cores: one CPU build, two quick runs of two experiments.
// Run: make build/tests/test_fleet && INFERLAB_ROOT=$PWD ./build/tests/test_fleet
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>
#include <sys/stat.h>

#include "test_render_util.h"

static char work[64], fleet[128];

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

static char *pdf_text(const char *pdf) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "pdftotext -enc UTF-8 '%s' - 2>/dev/null | tr '\\n' ' '", pdf);
    return command_output(cmd, NULL);
}

static void expect_text(const char *text, const char *pdf, const char *want) {
    if (!strstr(text, want)) fail_msg("%s lacks '%s'", pdf, want);
}

static int setup(void **state) {
    (void)state;
    snprintf(work, sizeof work, "/tmp/inferlab-fleet-XXXXXX");
    if (!mkdtemp(work)) return -1;
    snprintf(fleet, sizeof fleet, "%s/fleet", work);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    remove_tree(strdup(work));
    return 0;
}

static void test_fleet_on_one_node(void **state) {
    (void)state;
    if (!have_program("slurmctld") && access("/usr/sbin/slurmctld", X_OK) != 0)
        fail_msg("slurm-wlm is not installed (slurmctld not found): run make deps");
    if (!have_program("pdftotext")) fail_msg("pdftotext not found: run make deps (poppler-utils)");
    char cmd[1200], path[300];
    snprintf(cmd, sizeof cmd, "'%s/tests/fleet_test.sh' '%s'", repo_root(), work);
    if (system(cmd) != 0) fail_msg("tests/fleet_test.sh %s failed (job logs in %s/logs)", work, fleet);

    // both run directories complete, the comparison names both
    const char *machines[] = {"cpu", "cpu2"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s/report.pdf", fleet, machines[i]);
        if (!file_exists(path)) fail_msg("%s is missing", path);
    }
    snprintf(path, sizeof path, "%s/compare-cpu-vs-cpu2.pdf", fleet);
    if (!file_exists(path)) fail_msg("%s is missing", path);
    char *text = pdf_text(path);
    expect_text(text, path, "A: "); // one hardware: the labels carry the run directories' names
    expect_text(text, path, " (cpu) ");
    expect_text(text, path, " (cpu2) ");
    expect_text(text, path, "Which machine wins what");
    if (strstr(text, "Missing:")) fail_msg("%s names a machine as missing", path);
    free(text);

    // the partial comparison, rendered while cpu2's job was cancelled
    snprintf(path, sizeof path, "%s/partial.pdf", work);
    text = pdf_text(path);
    expect_text(text, path, "Missing:");
    expect_text(text, path, "cpu2 (no directory");
    expect_text(text, path, "Only one machine has results");
    expect_text(text, path, "A: "); // cpu's results are there
    free(text);

    // the re-submit ran nothing of cpu's
    char before[300], after[300];
    snprintf(before, sizeof before, "%s/cpu_mtimes.before", work);
    snprintf(after, sizeof after, "%s/cpu_mtimes.after", work);
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", before, after);
    if (system(cmd) != 0) fail_msg("the re-submit rewrote cpu's results (diff %s %s)", before, after);

    // the job array's shards merged into the single run's CSVs, byte for byte
    const char *tables[] = {"long_context_needle.csv", "long_context_retrieval.csv"};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "cmp '%s/array/%s' '%s/single/%s'", fleet, tables[i], work, tables[i]);
        if (system(cmd) != 0) fail_msg("merged shards differ from one run: %s", cmd);
    }
    snprintf(cmd, sizeof cmd, "ls '%s'/array/*.shard-* >/dev/null 2>&1", fleet);
    assert_int_not_equal(system(cmd), 0);

    // every machine's step said it was done; no shard or merge did (experiments/lab/lab.h)
    const char *steps[] = {"sampling.done", "kv_cache.done"};
    for (int i = 0; i < 2; i++)
        for (int m = 0; m < 2; m++) {
            snprintf(path, sizeof path, "%s/%s/%s", fleet, machines[m], steps[i]);
            if (!file_exists(path)) fail_msg("%s is missing", path);
        }
    snprintf(cmd, sizeof cmd, "ls '%s'/array/*.done >/dev/null 2>&1", fleet);
    if (system(cmd) == 0) fail_msg("%s/array holds a manifest (*.done): shards and their merge write none", fleet);

    // the daemons were stopped
    snprintf(path, sizeof path, "%s/cluster/slurmctld.pid", work);
    assert_false(file_exists(path));
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_fleet_on_one_node)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
