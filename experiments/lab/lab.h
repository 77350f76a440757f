// lab.h: the experiment harness. An experiment declares its options, its CSV tables and a
// run function; lab_main gives it --help (from the tables), option parsing with every value
// range-checked (errors name the option, exit 2), the shared options --out, --profile
// (--quick), --threads and, for experiments that measure on the GPU too, --backend cpu|cuda
// (exit 2 "<program>: not run: ..." before anything is written when CUDA cannot be used),
// atomic CSV files under --out, and meta.csv at the end (the hardware probe, the profile and
// the experiment's own keys). Progress lines: progress / progress_step (progress.h).
// With LAB_SHARD, one sweep can be split across processes (a Slurm job array): --shard K/N
// runs the K-th of N contiguous parts of the sweep (lab_shard_owns says which items), writing
// only the tables marked LAB_SHARDED as <stem>.shard-K-of-N.csv, and --merge-shards N joins
// them into <stem>.csv, byte for byte the file one whole run writes.
// A run that succeeds ends with its manifest, <out>/<name>.done (a --backend cuda run:
// <name>.cuda.done), written atomically after every table and meta.csv: the files the run
// wrote, one a line (its tables' <stem>.csv in table order, then meta.csv). It is the
// pipeline's record that the step is done (the Makefile's target for the step, so the
// tables an experiment writes are declared here, in TABLES, and nowhere else); the run
// removes the old one as it starts, so a run that fails or is killed leaves none. A --shard
// run and a --merge-shards run are parts of a run and write no manifest.
//
//   static long t_max;
//   static const LabOption OPTIONS[] = {
//       {.name = "t-max", .kind = LAB_INT, .value = &t_max, .arg = "N", .help = "longest sequence",
//        .def = "4096", .min = 128, .max = 1 << 20},
//       {0}};
//   enum { TABLE_TIMES };
//   static const LabTable TABLES[] = {{"my_times", "backend,seq_len,time_ms_median", "time per T", LAB_BOTH}, {0}};
//   static int run(LabRun *r) {
//       CsvWriter w = lab_csv(r, TABLE_TIMES);   // <out>/my_times.csv
//       csv_row(&w, "%s,%ld,%.6g", backend_name(r->backend), t_max, 1.5);
//       csv_close(&w);
//       lab_meta(r, "my_t_max", "%ld", t_max);   // merged into <out>/meta.csv after run returns 0
//       return 0;
//   }
//   int main(int argc, char **argv) {
//       static const Experiment e = {"my_exp", "[options]", "What it measures.", OPTIONS, TABLES,
//                                    LAB_COMMON | LAB_BACKEND, NULL, run};
//       return lab_main(&e, argc, argv);
//   }
#pragma once

#include <stdint.h>

#include "backend.h"
#include "cli.h"
#include "csv.h"
#include "hw.h"
#include "meta.h"
#include "progress.h"

typedef enum {
    LAB_FLAG,   // int: 1 when given, no value
    LAB_INT,    // long, in [min, max]
    LAB_U64,    // uint64_t, any (seeds)
    LAB_DOUBLE, // double, finite, in [min, max]
    LAB_TEXT,   // const char *: the argument itself
} LabKind;

typedef struct {
    const char *name; // --name
    char short_name;  // also -c; 0: none
    LabKind kind;
    void *value;      // where the value goes, of the kind's type
    const char *arg;  // the value's name in --help (N, FILE); unused for LAB_FLAG
    const char *help; // one line or more ('\n'); --help appends "(default <def>)"
    const char *def;  // parsed into *value before the command line; NULL: *value is left as the
                      // program set it (a "not given" value whose meaning the help states)
    double min, max;  // LAB_INT, LAB_DOUBLE: the range accepted, inclusive
    int required;     // LAB_TEXT: the run needs it given
} LabOption;

// --model FILE (required) and --tokenizer FILE: a checkpoint as checkpoint_load reads it
// (GGUF, or llama2.c .bin with its tokenizer.bin), for an option table.
#define LAB_CHECKPOINT_OPTIONS(model_var, tokenizer_var)                                                    \
    {.name = "model", .kind = LAB_TEXT, .value = &(model_var), .arg = "FILE",                                \
     .help = "checkpoint: GGUF, or llama2.c .bin with --tokenizer", .required = 1},                          \
        {.name = "tokenizer", .kind = LAB_TEXT, .value = &(tokenizer_var), .arg = "FILE",                    \
         .help = "llama2.c tokenizer.bin (for a .bin model)"}

// Which runs write a table. A table of both backends is one file whose first column is the
// backend: a run replaces its own backend's rows and keeps the other's (csv_open_keyed), so
// the CPU and the GPU run are separate steps that fill one table with the same columns.
enum { LAB_CPU = 1, LAB_CUDA = 2, LAB_BOTH = LAB_CPU | LAB_CUDA };
// A table whose rows come from the sweep that --shard splits, in sweep order (see lab_shard_owns).
enum { LAB_SHARDED = 4 };

typedef struct {
    const char *stem;   // file name without .csv
    const char *header; // the columns, key columns first
    const char *about;  // a line for --help
    unsigned backends;  // LAB_CPU, LAB_CUDA, LAB_BOTH (0 is LAB_CPU), | LAB_SHARDED
} LabTable;

// The shared options an experiment takes.
enum {
    LAB_OUT = 1,      // --out DIR; CSVs and meta.csv go there
    LAB_PROFILE = 2,  // --profile quick|full, --quick
    LAB_THREADS = 4,  // --threads N, applied (kernels_set_threads) before run
    LAB_BACKEND = 8,  // --backend cpu|cuda
    LAB_SHARD = 16,   // --shard K/N and --merge-shards N (the experiment honours lab_shard_owns)
    LAB_COMMON = LAB_OUT | LAB_PROFILE | LAB_THREADS,
};

typedef struct LabRun LabRun;

typedef struct {
    const char *name;         // bin/<name>; the prefix of its messages
    const char *synopsis;     // after "usage: bin/<name> "
    const char *about;        // what it does, printed by --help
    const LabOption *options; // its own, ended by {0}; may be NULL
    const LabTable *tables;   // ended by {0}; may be NULL
    unsigned common;          // LAB_* shared options
    const char *notes;        // printed last by --help; may be NULL
    int (*run)(LabRun *r);    // the exit status
} Experiment;

enum { LAB_MAX_META = 32, LAB_MAX_TABLES = 64 }; // (LabRun.written has a bit per table)

struct LabRun {
    const Experiment *exp;
    char out_dir[512];   // --out
    char profile[16];    // quick or full
    int quick;           // profile is quick
    int threads;         // --threads as given; 0: every core
    Backend backend;     // --backend; cpu for experiments without it
    int shard, n_shards; // --shard K/N; n_shards 0: the whole sweep
    int merge_shards;    // --merge-shards N: join the shards instead of running (lab_main)
    uint64_t written;    // the tables lab_csv opened so far (bit i: table i), for the manifest
    HwInfo hw;           // this machine, probed before run
    int n_meta;          // lab_meta entries so far
    MetaEntry meta[LAB_MAX_META];
    char meta_text[LAB_MAX_META][2][512];
};

// Parse argv against e, then call e->run; returns the exit status. --help prints the usage
// and returns 0. Bad options end the program with a message naming the option and exit 2.
int lab_main(const Experiment *e, int argc, char **argv);

// Parse argv into the options and the shared settings without running: 0, or -1 with err
// set (--help sets *help). What lab_main does first; tests call it directly.
int lab_parse(const Experiment *e, int argc, char **argv, LabRun *r, int *help, Error *err);

// Open table i of the experiment under --out (created when missing), with its header; the
// file appears complete at csv_close (csv.h), merged with the other backend's rows for a
// LAB_BOTH table (whose header must start with the backend column). Under --shard only
// sharded tables can be opened, at their shard's path.
CsvWriter lab_csv(LabRun *r, int table);
// Its path: <out>/<stem>.csv (under --shard K/N: <out>/<stem>.shard-K-of-N.csv).
void lab_csv_path(const LabRun *r, int table, char *buf, size_t size);

// The run's manifest: <out>/<name>.done, or <out>/<name>.cuda.done on the GPU (see above).
void lab_manifest_path(const LabRun *r, char *buf, size_t size);
// Write it, atomically: a line per table lab_csv opened (<stem>.csv, in table order), then
// meta.csv. What lab_main does last when run returns 0 (not under --shard). 0, or -1 with err.
int lab_manifest_write(const LabRun *r, Error *err);

// Add key = printf(fmt, ...) to the keys merged into <out>/meta.csv when run returns 0.
void lab_meta(LabRun *r, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

// Is item i of a sweep of n items this run's? Items go to shards in contiguous blocks, shard
// K taking [K n / N, (K+1) n / N), so the shards' rows in shard order are the sweep's rows in
// its order. Always 1 without --shard.
int lab_shard_owns(const LabRun *r, long i, long n);
// Join <out>/<stem>.shard-K-of-N.csv, K = 0..N-1, of every sharded table into <out>/<stem>.csv
// (atomically; one header, the rows in shard order), then remove the shards. Every shard must
// exist with the table's header. What --merge-shards N does.
int lab_merge_shards(const LabRun *r, int n_shards, Error *err);
