// progress.c: the progress line of long runs (see progress.h).
#include "progress.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "bench.h"

// When the last line went to a log (now_seconds; a negative value: none yet).
static double progress_logged = -1.0, progress_interval = 5.0;

void progress_every(double seconds) { progress_interval = seconds; }

static void progress_bar(char *buf, size_t size, int done, int total) {
    enum { WIDTH = 10 };
    int filled = total > 0 ? (int)((long)WIDTH * done / total) : 0;
    char bar[WIDTH + 1];
    for (int i = 0; i < WIDTH; i++) bar[i] = i < filled ? '#' : '-';
    bar[WIDTH] = '\0';
    snprintf(buf, size, "[%s] %d/%d ", bar, done, total);
}

// total < 0: no step count.
static void progress_v(int done, int total, const char *fmt, va_list ap) {
    int tty = isatty(STDERR_FILENO);
    if (!tty) {
        double now = now_seconds();
        if (progress_logged >= 0 && now - progress_logged < progress_interval) return;
        progress_logged = now;
    }
    char prefix[64] = "";
    if (total >= 0 && tty) progress_bar(prefix, sizeof prefix, done, total);
    else if (total >= 0) snprintf(prefix, sizeof prefix, "[%d/%d] ", done, total);
    fputs(tty ? "\r\033[K" : "", stderr);
    fputs(prefix, stderr);
    vfprintf(stderr, fmt, ap);
    fputs(tty ? "" : "\n", stderr);
    fflush(stderr);
}

void progress(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    progress_v(0, -1, fmt, ap);
    va_end(ap);
}

void progress_step(int done, int total, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    progress_v(done, total, fmt, ap);
    va_end(ap);
}

void progress_done(void) {
    if (isatty(STDERR_FILENO)) fputs("\r\033[K", stderr);
}
