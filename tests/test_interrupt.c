// test_interrupt.c: `make report` killed and run twice at once. On a small
// pipeline of the quick profile (EXPERIMENTS=sampling: the models, one experiment, the
// render) in a temp run directory, with a private copy of the quick models:
//   - SIGKILL to the whole process group of `make report` at random moments until 10 kills
//     have come before the run's end, during training (a model deleted first), the
//     experiment (its program touched) or the render (the template touched): afterwards the
//     run directory is byte for byte the one before, with no temp files in it, and a rerun
//     completes and leaves no leftovers;
//   - two `make report` into one OUT at once wait on its lock (saying so) without touching the
//     run directory, then run one after the other.
// Needs out/models/quick (make models PROFILE=quick). Run from the repository root: make test
// (it sets INFERLAB_ROOT and INFERLAB_BIN); takes a few minutes.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char root[512], bin[512], tmp_dir[64], out_dir[256];

static void run(const char *cmd) {
    if (system(cmd) != 0) fail_msg("command failed: %s", cmd);
}

// `make report` of the small pipeline into out_dir, with the models in a private copy
// (models_dir) so that a trial may delete one to make training part of the run.
// scripts/report_run.sh keeps the run directory as a link to its current generation,
// .run.runs/<stamp>, next to its lock .run.lock.
static char models_dir[300];

static void report_command(char *cmd, size_t size, const char *log) {
    snprintf(cmd, size, "exec make -s -C %s report PROFILE=quick EXPERIMENTS=sampling OUT=%s MODELS_DIR=%s > %s 2>&1",
             root, out_dir, models_dir, log);
}

static void shell(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void shell(const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    run(cmd);
}

// Start `make report` in a process group of its own; returns the group's id.
static pid_t start_report(const char *log) {
    char cmd[2048];
    report_command(cmd, sizeof cmd, log);
    pid_t pid = fork();
    if (pid < 0) fail_msg("fork: %s", strerror(errno));
    if (pid == 0) {
        setpgid(0, 0);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid); // (also in the child: whichever runs first)
    return pid;
}

static int wait_status(pid_t pid) {
    int status;
    if (waitpid(pid, &status, 0) != pid) fail_msg("waitpid: %s", strerror(errno));
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void sleep_s(double s) {
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
}

// SIGKILL to the whole group, then wait until none of it is left.
static void kill_group(pid_t pgid) {
    kill(-pgid, SIGKILL);
    wait_status(pgid);
    for (int i = 0; i < 500 && kill(-pgid, 0) == 0; i++) sleep_s(0.01);
    if (kill(-pgid, 0) == 0) fail_msg("processes of the killed make report are still running");
}

// The generation out_dir points at ("" when it is not a link).
static void current_generation(char *buf, size_t size) {
    ssize_t n = readlink(out_dir, buf, size - 1);
    buf[n > 0 ? n : 0] = '\0';
}

// What makes part of the pipeline stale for a trial: a model to retrain (then the speculative
// step that reads it, and the render), one experiment's program, or only the render.
typedef enum { STALE_TRAINING, STALE_EXPERIMENT, STALE_RENDER, N_STALE } Stale;
static const char *STALE_NAME[N_STALE] = {"training", "experiment", "render"};

static void make_stale(Stale kind) {
    if (kind == STALE_TRAINING) shell("rm -f %s/draft-xs.gguf", models_dir);
    if (kind == STALE_EXPERIMENT) shell("touch %s/sampling", bin);
    if (kind == STALE_RENDER) shell("touch %s/templates/report.tmpl", root);
}

// A rerun completes: it exits 0 and leaves one generation, no stage and no temp files.
static double rerun_completes(void) {
    char log[400];
    snprintf(log, sizeof log, "%s/rerun.log", tmp_dir);
    double t0 = now_s();
    if (wait_status(start_report(log)) != 0) {
        shell("tail -30 %s >&2", log);
        fail_msg("make report after a killed one failed (log: %s)", log);
    }
    shell("test $(ls %s/.run.runs | wc -l) -eq 1 && test -s %s/report.pdf", tmp_dir, out_dir);
    shell("test -z \"$(find -L %s %s/.run.runs -name '*.tmp*')\"", out_dir, tmp_dir);
    return now_s() - t0;
}

// Trials until 10 kills have come before the run's end: make part of the pipeline stale
// (training, the experiment, the render in turn), start make report, SIGKILL its process
// group after a random fraction of the time that kind of run took uninterrupted; then the run
// directory must be byte for byte the one before (or, when the kill came after the run's
// last step, the new complete one, and that kind's time is halved for the next draw), with no
// temp files in it. The random moments are reproducible (seeded); each is printed.
static void test_kill_report_keeps_previous_run(void **state) {
    (void)state;
    double duration[N_STALE];
    for (int k = 0; k < N_STALE; k++) {
        make_stale((Stale)k);
        duration[k] = rerun_completes();
        fprintf(stderr, "kill test: a run after a stale %s takes %.1f s\n", STALE_NAME[k], duration[k]);
    }
    unsigned seed = 19;
    int killed_before_end = 0, trial = 0;
    for (; killed_before_end < 10 && trial < 40; trial++) {
        Stale kind = (Stale)(trial % N_STALE);
        char snap[400], log[400], before[512], after[512];
        snprintf(snap, sizeof snap, "%s/snapshot", tmp_dir);
        snprintf(log, sizeof log, "%s/killed.log", tmp_dir);
        shell("rm -rf %s && cp -rL %s %s", snap, out_dir, snap);
        current_generation(before, sizeof before);
        make_stale(kind);
        double at = duration[kind] * (double)rand_r(&seed) / RAND_MAX;
        pid_t pgid = start_report(log);
        sleep_s(at);
        kill_group(pgid);
        current_generation(after, sizeof after);
        int finished = strcmp(before, after) != 0;
        fprintf(stderr, "kill test: trial %d, stale %s, SIGKILL after %.2f s: %s\n", trial, STALE_NAME[kind], at,
                finished ? "the run had finished" : "the previous run directory must be intact");
        if (finished) {
            shell("test -s %s/report.pdf", out_dir);
            duration[kind] /= 2;
        } else {
            shell("diff -r %s %s >&2", snap, out_dir);
            killed_before_end++;
        }
        shell("test -z \"$(find -L %s -name '*.tmp*')\"", out_dir);
    }
    if (killed_before_end < 10) fail_msg("only %d of %d kills came before the run's end", killed_before_end, trial);
    rerun_completes();
    shell("rm -rf %s/snapshot", tmp_dir);
}

// Two make report at once into one OUT: while the test holds OUT's lock both wait (saying so)
// and the run directory does not change; released, they run one after the other and leave
// one complete generation.
static void test_concurrent_reports_take_turns(void **state) {
    (void)state;
    char lock_path[400], snap[400], logs[2][400];
    snprintf(lock_path, sizeof lock_path, "%s/.run.lock", tmp_dir);
    snprintf(snap, sizeof snap, "%s/snapshot", tmp_dir);
    int lock = open(lock_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644); // (not inherited: the runs must not hold it)
    if (lock < 0 || flock(lock, LOCK_EX) != 0) fail_msg("cannot lock %s: %s", lock_path, strerror(errno));
    shell("rm -rf %s && cp -rL %s %s", snap, out_dir, snap);
    make_stale(STALE_RENDER);
    pid_t runs[2];
    for (int i = 0; i < 2; i++) {
        snprintf(logs[i], sizeof logs[i], "%s/concurrent%d.log", tmp_dir, i);
        runs[i] = start_report(logs[i]);
    }
    for (int i = 0; i < 2; i++) // both reach the lock and wait there
        shell("for i in $(seq 600); do grep -q 'waiting for it to finish' %s && exit 0; sleep 0.1; done; exit 1", logs[i]);
    for (int i = 0; i < 2; i++) assert_int_equal(waitpid(runs[i], NULL, WNOHANG), 0);
    shell("diff -r %s %s >&2", snap, out_dir);
    close(lock);
    for (int i = 0; i < 2; i++)
        if (wait_status(runs[i]) != 0) fail_msg("concurrent make report %d failed (log: %s)", i, logs[i]);
    shell("test $(ls %s/.run.runs | wc -l) -eq 1 && test -s %s/report.pdf", tmp_dir, out_dir);
    shell("rm -rf %s", snap);
}

// The first run (cp -a: the models' dates too, so that none is stale).
static int setup(void **state) {
    (void)state;
    const char *r = getenv("INFERLAB_ROOT"), *b = getenv("INFERLAB_BIN");
    snprintf(root, sizeof root, "%s", r ? r : ".");
    snprintf(bin, sizeof bin, "%s", b ? b : "bin");
    char tmpl[] = "/tmp/inferlab-interrupt-XXXXXX";
    if (!mkdtemp(tmpl)) return -1;
    snprintf(tmp_dir, sizeof tmp_dir, "%s", tmpl);
    snprintf(out_dir, sizeof out_dir, "%s/run", tmpl);
    snprintf(models_dir, sizeof models_dir, "%s/models", tmpl);
    char cmd[2048], log[400];
    snprintf(cmd, sizeof cmd, "cp -a %s/out/models/quick %s", root, models_dir);
    if (system(cmd) != 0) return -1;
    snprintf(log, sizeof log, "%s/first.log", tmp_dir);
    report_command(cmd, sizeof cmd, log);
    fprintf(stderr, "interrupt: make report PROFILE=quick EXPERIMENTS=sampling OUT=%s\n", out_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_reports_take_turns),
        cmocka_unit_test(test_kill_report_keeps_previous_run),
    };
    return cmocka_run_group_tests_name("interrupt", tests, setup, teardown);
}
