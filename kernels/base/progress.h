// progress.h: the progress line of anything that runs for more than a few seconds (training,
// experiments), shared by every layer above the base.
#pragma once

// Progress of a long run on stderr. On a terminal: one line, overwritten in place at every
// call. Otherwise (a log): a plain line at the first call and then at the first call after
// every few seconds (progress_every), so `make report > log` shows where it is without
// filling the log. progress_step prefixes the step count: a bar on a terminal
// ("[####------] 3/7 "), "[3/7] " in a log. progress_done ends the terminal line.
void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void progress_step(int done, int total, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void progress_done(void);
// Seconds between two lines in a log (default 5; 0 prints every call, as tests do).
void progress_every(double seconds);
