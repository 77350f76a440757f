// hardware_budget/main.c: bin/hardware_budget, project 16: the hardware budget table and roofline.
//
//   bin/hardware_budget [--quick] [--out DIR] [--threads N] [--model FILE] [--context N]
//                       [--hardware CSV] [--presets CSV] [--roofline-model NAME] [--backend cpu|cuda]
//                       [--real-model out/models/real/smollm2-135m-instruct-q4_1.gguf[,FILE]]
//
// First it measures this machine: memory bandwidth with STREAM copy and triad on one thread
// and on all, the sgemm peak, and the model bandwidth utilisation (MBU) of our own decode
// at batch 1, also on one thread and on all: (weight bytes + KV bytes read per token) / time
// per token / bandwidth, where the bandwidth is the STREAM triad on as many threads (best
// pass, STREAM's convention).
// Then it computes the budget (experiments/lab/budget.h) of every model preset x weight
// dtype (bf16, int8, int4) x hardware (the datasheets, and this machine as measured; the
// presets, our model, and the published models of --real-model, Gemma 3's global layers
// keeping the whole context and its local ones the window), and
// the roofline points of every hardware: prefill of 1K tokens, decode steps, the decode MLP
// at batch 1, 8 and 64, and decode attention.
//
// The model whose MBU is measured: --model FILE (GGUF or llama2.c); else the zoo's target,
// out/models/target.gguf, when it exists; else a random, untrained model of a fixed shape
// (fallback_config below), named "random-untrained" in every row it appears in. A decode
// step costs the same whatever the weights hold, so its MBU is that shape's.
//
// Writes under --out: hardware_measured.csv (its rows start with the backend: a CPU and a GPU
// run each replace their own rows in it), hardware.csv (the datasheet table with this machine's measured row added),
// hardware_budget.csv, roofline.csv; merges meta.csv.
//
// --backend cuda measures the GPU instead, the same way: device memory bandwidth with STREAM
// copy and triad kernels on the device, the cuBLAS matmul peak in fp32 and bf16 (the GPU has
// both, where the CPU's sgemm stands for either), and the MBU of our decode on the GPU
// (engine/model_cuda.h, fp32 weights, batch 1, wall-clock per step including the copy of the
// logits to the host). The GPU as measured becomes a hardware row of its own (kind gpu), and
// the budget and roofline are computed for it alone: the roofline model's points on it, and
// our model's predicted and measured decode. Writes its rows of hardware_measured.csv
// (backend cuda; the threads column is empty), hardware_cuda.csv, hardware_budget_cuda.csv
// and roofline_cuda.csv; exits 2 ("not run") when no CUDA device can be used.
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "budget.h"
#include "checkpoint.h"
#include "kernels.h"
#include "lab.h"
#include "peak.h"
#include "rng.h"
#include "session.h"
#include "kernels_cuda.h" // declarations only: usable without CUDA in the build

#define DEFAULT_MODEL "out/models/target.gguf"
#define DEFAULT_HARDWARE "templates/hardware.csv"
#define DEFAULT_PRESETS "templates/model_presets.csv"
#define DEFAULT_ROOFLINE_MODEL "Llama-2-13B"

// The lecture's worked example has batch 64 and a 1K-token prefill; the default context puts
// Llama-2 13B's batch-64 bf16 KV at its "about 32 GB" (64 x 610 x 819,200 B = 32.0 GB).
#define DEFAULT_CONTEXT "610"
enum { LARGE_BATCH = 64, PREFILL_TOKENS = 1024, MAX_CONTEXTS = 4 };

static const NumFormat BUDGET_DTYPES[] = {NUM_BF16, NUM_INT8, NUM_INT4};
static const int MLP_BATCHES[] = {1, 8, LARGE_BATCH};

typedef struct {
    size_t stream_min_bytes; // each STREAM array at least this and 4x the LLC
    int stream_reps;
    int sgemm_n, sgemm_min_reps, sgemm_max_reps;
    double sgemm_budget_s;
    int fma_reps;
    int contexts[MAX_CONTEXTS]; // decode contexts of the MBU measurement (capped at seq_len)
    int n_contexts;
    int decode_warmup, decode_min_reps, decode_max_reps;
    double decode_budget_s;     // timed seconds per context, beyond decode_min_reps
    int gpu_gemm_n;             // side of the GPU's square matmuls (sgemm_max_reps of them)
} Settings;

static Settings settings_for(const char *profile) {
    if (strcmp(profile, "quick") == 0)
        return (Settings){.stream_min_bytes = 32u << 20, .stream_reps = 4, .sgemm_n = 512, .sgemm_min_reps = 3,
                          .sgemm_max_reps = 5, .sgemm_budget_s = 0.1, .fma_reps = 3, .contexts = {64, 256}, .n_contexts = 2,
                          .decode_warmup = 2, .decode_min_reps = 3, .decode_max_reps = 10, .decode_budget_s = 0.2,
                          .gpu_gemm_n = 4096};
    return (Settings){.stream_min_bytes = 64u << 20, .stream_reps = 20, .sgemm_n = 2048, .sgemm_min_reps = 3,
                      .sgemm_max_reps = 20, .sgemm_budget_s = 2.0, .fma_reps = 10, .contexts = {64, 256, 1024}, .n_contexts = 3,
                      .decode_warmup = 3, .decode_min_reps = 5, .decode_max_reps = 50, .decode_budget_s = 1.5,
                      .gpu_gemm_n = 8192};
}

#define MEASURED_COLUMNS "backend,measurement,threads,size,size_unit,reps,median,p10,p90,best,unit,model,notes"
#define HARDWARE_COLUMNS "name,kind,memory_bytes,bandwidth_bytes_s,bf16_flop_s,fp32_flop_s,source"
#define BUDGET_COLUMNS                                                                                      \
    "model,weight_dtype,act_dtype,hardware,context_len,weight_gb,kv_bytes_per_token,kv_tokens_fit,kv_b64_gb," \
    "fits_b64,decode_b1_ms,decode_b1_bound,decode_b64_ms,decode_b64_bound,throughput_b64_tok_s,prefill_1k_ms,"  \
    "prefill_1k_bound,intensity_b1_flop_per_byte,intensity_b64_flop_per_byte,ridge_flop_per_byte,notes"
#define ROOFLINE_COLUMNS                                                                                  \
    "hardware,model,weight_dtype,act_dtype,point,batch,context_len,flops,bytes,intensity_flop_per_byte,"     \
    "attainable_flop_s,achieved_flop_s,peak_flop_s,bandwidth_bytes_s,ridge_flop_per_byte,bound"

// The measurements: one table of both backends. The tables derived from them hold no
// backend column, so each backend keeps files of its own: the CPU's derived table t is
// TABLES[t], the GPU's, of the same columns, TABLES[t + GPU_OFFSET].
enum { TABLE_MEASURED, TABLE_HARDWARE, TABLE_BUDGET, TABLE_ROOFLINE, GPU_OFFSET = 3 };
static const LabTable TABLES[] = {
    {"hardware_measured", MEASURED_COLUMNS, "STREAM bandwidth, matmul peaks and decode MBU as measured", LAB_BOTH},
    {"hardware", HARDWARE_COLUMNS, "the datasheet table with this machine's measured row", LAB_CPU},
    {"hardware_budget", BUDGET_COLUMNS, "model preset x weight dtype x hardware -> memory, latency, throughput",
     LAB_CPU},
    {"roofline", ROOFLINE_COLUMNS, "roofline points: prefill, decode steps, MLP, attention; measured decode", LAB_CPU},
    {"hardware_cuda", HARDWARE_COLUMNS, "the GPU as measured", LAB_CUDA},
    {"hardware_budget_cuda", BUDGET_COLUMNS, "the budget on the GPU as measured", LAB_CUDA},
    {"roofline_cuda", ROOFLINE_COLUMNS, "the roofline points on the GPU as measured", LAB_CUDA},
    {0},
};

// Derived table t of this run's backend.
static CsvWriter open_derived(LabRun *r, int t) { return lab_csv(r, r->backend == BACKEND_CUDA ? t + GPU_OFFSET : t); }

// --- the lab's own model ------------------------------------------------------------------

typedef struct {
    Model m;
    ModelShape shape;
    char path[512];     // the checkpoint, or "" for the random fallback
    char checksum[17];  // FNV-1a of the checkpoint file
} LabModel;

// The fallback when no trained target exists: Llama-style, near the full profile's target,
// with fp32 weights (about 120 MB) several times any last-level cache, so decode reads DRAM.
static Config fallback_config(void) {
    Config c = config_default();
    c.dim = 512;
    c.hidden_dim = 1408;
    c.n_layers = 8;
    c.n_heads = 8;
    c.n_kv_heads = 8;
    c.head_dim = 64;
    c.vocab_size = 4096;
    c.seq_len = 1024;
    return c;
}

static void lab_model_open(LabModel *lab, const char *path) {
    memset(lab, 0, sizeof *lab);
    Error err;
    if (!path && access(DEFAULT_MODEL, R_OK) == 0) path = DEFAULT_MODEL;
    if (path) {
        if (checkpoint_load(path, NULL, &lab->m, NULL, &err)) die("%s", err.msg);
        if (meta_file_checksum(path, lab->checksum, &err)) die("%s", err.msg);
        snprintf(lab->path, sizeof lab->path, "%s", path);
        const char *base = strrchr(path, '/');
        char name[64];
        snprintf(name, sizeof name, "lab: %s", base ? base + 1 : path);
        lab->shape = budget_shape_from_config(&lab->m.config, name, path);
        return;
    }
    Config c = fallback_config();
    model_alloc(&lab->m, &c);
    model_init_random(&lab->m, 1, 0.02f);
    char source[160];
    snprintf(source, sizeof source, "no trained model (%s missing): random weights, dim %d, %d layers, %d heads, "
             "hidden %d, vocab %d", DEFAULT_MODEL, c.dim, c.n_layers, c.n_heads, c.hidden_dim, c.vocab_size);
    lab->shape = budget_shape_from_config(&c, "random-untrained", source);
    fprintf(stderr, "hardware_budget: %s not found and no --model: MBU is for a random untrained model\n",
            DEFAULT_MODEL);
}

// --- measuring this machine ---------------------------------------------------------------

typedef struct {
    int threads, context; // threads 0: on the GPU
    BenchStats time;     // per decode step, ms
    double bytes, flops; // read and computed per step (budget formulas, fp32)
    double bandwidth_bytes_s; // the STREAM triad on as many threads: MBU's denominator
} DecodePoint;

// A GPU matmul peak (cuBLAS, n^3).
typedef struct {
    GemmMode mode;
    int n;
    BenchStats time; // per call, ms
} GemmPeak;

typedef struct {
    Backend backend;
    StreamResult stream[4]; // copy, triad on 1 thread; copy, triad on all (when more than 1); GPU: threads 0
    int n_stream;
    SgemmPeak sgemm;        // CPU
    FmaPeak fma[2];         // CPU: the FMA ceiling on 1 thread, then on all (when more than 1)
    int n_fma;
    GemmPeak gemm[2];       // GPU: fp32, bf16
    size_t llc_bytes;       // the largest CPU cache; the GPU's L2
    DecodePoint decode[2 * MAX_CONTEXTS]; // every context on 1 thread, then on all (GPU: once)
    int n_decode;
    int roof_threads;       // the threads of the decode points drawn on the roofline (GPU: 0)
    HardwareSpec spec;      // this machine as the budget sees it
} Measured;

static const Precision FP32 = {NUM_FP32, NUM_FP32};

static const StreamResult *find_triad(const Measured *me, int threads) {
    for (int i = 0; i < me->n_stream; i++)
        if (me->stream[i].kernel == STREAM_TRIAD && me->stream[i].threads == threads) return &me->stream[i];
    die("no STREAM triad on %d threads was measured", threads);
}

// Copy and triad on one thread, then on all of them (when that is more than one).
static void measure_stream(Measured *me, const Settings *st, int threads) {
    me->llc_bytes = peak_llc_bytes();
    size_t n = stream_array_len(me->llc_bytes, st->stream_min_bytes);
    int thread_counts[] = {1, threads};
    for (int i = 0; i < (threads > 1 ? 2 : 1); i++)
        for (int k = STREAM_COPY; k <= STREAM_TRIAD; k++) {
            int t = thread_counts[i];
            progress("hardware_budget: STREAM %s, %d thread(s)", stream_kernel_name((StreamKernel)k), t);
            me->stream[me->n_stream++] = stream_measure((StreamKernel)k, n, t, st->stream_reps);
        }
}

// The FMA ceiling on one thread, then on all of them (when that is more than one).
static void measure_fma(Measured *me, const Settings *st, int threads) {
    int thread_counts[] = {1, threads};
    for (int i = 0; i < (threads > 1 ? 2 : 1); i++) {
        progress("hardware_budget: FMA peak, %d thread(s)", thread_counts[i]);
        me->fma[me->n_fma++] = peak_fma(thread_counts[i], st->fma_reps);
    }
}

typedef struct {
    Session *s;
    int context;
} DecodeCall;

// One decode step that attends to `context` tokens: context - 1 cached ones and itself. The
// session is rolled back each time, so every step sees the same context.
static void run_decode(void *ctx) {
    DecodeCall *d = ctx;
    Error err;
    session_truncate(d->s, d->context - 1);
    if (session_decode(d->s, 1, &err)) die("hardware_budget: %s", err.msg); // logits to the host: waits for a device
}

// Decode at batch 1 for every context (those within the model's seq_len) on the backend ops,
// once per thread count (CPU: one thread, then all of them, which shows what the threads
// buy; GPU: threads 0, no thread setting).
static void measure_decode(Measured *me, LabModel *lab, const Settings *st, const Ops *ops, const int *thread_counts,
                           int n_thread_counts) {
    const Config *c = &lab->m.config;
    int contexts[MAX_CONTEXTS], n_contexts = 0;
    for (int i = 0; i < st->n_contexts; i++)
        if (st->contexts[i] <= c->seq_len) contexts[n_contexts++] = st->contexts[i];
    if (n_contexts == 0) contexts[n_contexts++] = c->seq_len;
    int max_context = contexts[n_contexts - 1];
    // The cache's contents do not change the cost of a step: random tokens fill it.
    Engine engine;
    Session s;
    Error err;
    engine_open(&engine, &lab->m, ops, DTYPE_F32, max_context, max_context); // fp32, as the budget's bytes count them
    session_open(&s, &engine, max_context);
    int *tokens = mallocCheck(max_context * sizeof(int));
    uint64_t rng = rng_seed(2);
    for (int i = 0; i < max_context; i++) tokens[i] = (int)(rng_u64(&rng) % c->vocab_size);
    int threads = omp_get_max_threads();
    for (int t = 0; t < n_thread_counts; t++) {
        if (thread_counts[t] > 0) kernels_set_threads(thread_counts[t]);
        for (int i = 0; i < n_contexts; i++) {
            DecodePoint *p = &me->decode[me->n_decode++];
            p->threads = thread_counts[t];
            p->context = contexts[i];
            progress("hardware_budget: %s decode at context %d, %d thread(s)", ops->name, p->context, p->threads);
            // Every step then attends to context - 1 cached tokens and itself (run_decode rolls back).
            session_truncate(&s, 0);
            if (session_prefill(&s, tokens, p->context - 1, NULL, &err)) die("hardware_budget: %s", err.msg);
            DecodeCall call = {&s, p->context};
            p->time = bench_run_budget(run_decode, &call, st->decode_warmup, st->decode_min_reps, st->decode_max_reps,
                                       st->decode_budget_s);
            p->bytes = budget_decode_bytes(&lab->shape, FP32, 1, p->context);
            p->flops = budget_decode_flops(&lab->shape, 1, p->context);
            p->bandwidth_bytes_s = find_triad(me, p->threads)->gb_s_best * 1e9;
        }
    }
    kernels_set_threads(threads);
    free(tokens);
    session_close(&s);
    engine_close(&engine);
}

// This machine as a HardwareSpec: all-thread triad (best pass) and the sgemm peak (best call),
// which also stands for bf16 math: no faster bf16 matmul is measured on the CPU.
static void describe_machine(Measured *me, const HwInfo *hw, int threads) {
    const StreamResult *triad = find_triad(me, threads);
    HardwareSpec *h = &me->spec;
    memset(h, 0, sizeof *h);
    char slug[96];
    HwInfo cpu = *hw;
    cpu.gpu[0] = '\0'; // the CPU alone
    hw_slug(slug, sizeof slug, &cpu);
    snprintf(h->name, sizeof h->name, "%.52s measured", slug);
    snprintf(h->kind, sizeof h->kind, "cpu");
    h->memory_bytes = (double)hw->mem_bytes;
    h->bandwidth_bytes_s = triad->gb_s_best * 1e9;
    h->fp32_flop_s = h->bf16_flop_s = me->sgemm.gflop_s_best * 1e9;
    snprintf(h->source, sizeof h->source,
             "measured by bin/hardware_budget on %s: memory = physical RAM; bandwidth = STREAM triad, %d threads, "
             "best of %d passes over %zu-byte arrays; FLOP/s = cblas_sgemm n = %d, best of %d (fp32; also used for "
             "bf16)",
             hw->cpu_model, threads, triad->time.reps, triad->n * sizeof(double), me->sgemm.n, me->sgemm.time.reps);
}

#ifdef INFERLAB_CUDA
// --- measuring the GPU (--backend cuda) -----------------------------------------------------

// STREAM on the device: arrays of at least 4x the L2 and stream_min_bytes, as on the CPU.
static StreamResult gpu_stream(StreamKernel k, size_t n, int reps) {
    StreamResult r = {.kernel = k, .threads = 0, .n = n};
    r.time = cuda_stream_bench(k == STREAM_TRIAD, n, 1, reps);
    double gb = stream_bytes(k, n) * 1e-9;
    r.gb_s_median = gb / (r.time.median_ms * 1e-3);
    r.gb_s_p10 = gb / (r.time.p90_ms * 1e-3); // the slow tail of time is the low tail of rate
    r.gb_s_p90 = gb / (r.time.p10_ms * 1e-3);
    r.gb_s_best = gb / (r.time.min_ms * 1e-3);
    return r;
}

static double gemm_flop_s(const GemmPeak *g, double ms) { return 2.0 * g->n * (double)g->n * g->n / (ms * 1e-3); }

// Bandwidth, matmul peaks, the GPU as a HardwareSpec, then our decode's MBU on it.
static void measure_gpu(Measured *me, LabModel *lab, const Settings *st) {
    CudaDeviceInfo dev;
    cuda_device_info(&dev);
    me->llc_bytes = dev.l2_bytes;
    size_t n = stream_array_len(dev.l2_bytes, st->stream_min_bytes);
    for (int k = STREAM_COPY; k <= STREAM_TRIAD; k++) {
        progress("hardware_budget: GPU STREAM %s", stream_kernel_name((StreamKernel)k));
        me->stream[me->n_stream++] = gpu_stream((StreamKernel)k, n, st->stream_reps);
    }
    const GemmMode modes[2] = {GEMM_FP32, GEMM_BF16};
    for (int i = 0; i < 2; i++) {
        GemmPeak *g = &me->gemm[i];
        g->mode = modes[i];
        g->n = st->gpu_gemm_n;
        progress("hardware_budget: GPU %s matmul n = %d", gemm_mode_name(g->mode), g->n);
        cuda_matmul_bench(g->mode, g->n, g->n, g->n, 1, st->sgemm_max_reps, &g->time);
    }
    const StreamResult *triad = find_triad(me, 0);
    HardwareSpec *h = &me->spec;
    memset(h, 0, sizeof *h);
    snprintf(h->name, sizeof h->name, "%.52s measured", dev.name);
    snprintf(h->kind, sizeof h->kind, "gpu");
    h->memory_bytes = (double)dev.memory_bytes;
    h->bandwidth_bytes_s = triad->gb_s_best * 1e9;
    h->fp32_flop_s = gemm_flop_s(&me->gemm[0], me->gemm[0].time.min_ms);
    h->bf16_flop_s = gemm_flop_s(&me->gemm[1], me->gemm[1].time.min_ms);
    snprintf(h->source, sizeof h->source,
             "measured by bin/hardware_budget --backend cuda on %.60s (sm_%d%d, %d SMs): memory = device global memory; "
             "bandwidth = STREAM triad on the device, best of %d passes over %zu-byte arrays; FLOP/s = cuBLAS "
             "matmul n = %d, best of %d, fp32 and bf16 (tensor cores, fp32 accumulation)",
             dev.name, dev.major, dev.minor, dev.sm_count, triad->time.reps, triad->n * sizeof(double),
             me->gemm[0].n, me->gemm[0].time.reps);
    me->roof_threads = 0;
    static const int on_device[] = {0};
    measure_decode(me, lab, st, ops_cuda(), on_device, 1);
}
#endif

// --- writing the tables ---------------------------------------------------------------------


static double mbu(const DecodePoint *p, double ms) { return p->bytes / (ms * 1e-3) / p->bandwidth_bytes_s; }

// The threads cell: empty on the GPU (threads 0).
static const char *threads_cell(char *buf, size_t size, int threads) {
    if (threads > 0) snprintf(buf, size, "%d", threads);
    else buf[0] = '\0';
    return buf;
}

// The peak FLOP/s rows: the CPU's sgemm, or the GPU's matmuls.
// A BLAS that reaches less than this fraction of the FMA ceiling is flagged: a good sgemm
// of n = 2048 gets 70-90% of it; a generic kernel (OpenBLAS's "Prescott" on an AVX-512 Xeon)
// about 20%.
#define SGEMM_LOW_FRACTION 0.5

// The sgemm's share of the all-thread FMA ceiling.
static double sgemm_fraction_of_fma(const Measured *me) {
    return me->sgemm.gflop_s_best / me->fma[me->n_fma - 1].gflop_s_best;
}

static void write_peaks(CsvWriter *w, const Measured *me) {
    const char *be = backend_name(me->backend);
    if (me->backend == BACKEND_CPU) {
        for (int i = 0; i < me->n_fma; i++) {
            const FmaPeak *f = &me->fma[i];
            csv_row(w, "%s,fma_peak,%d,%d,lanes,%d,%.6g,%.6g,%.6g,%.6g,GFLOP/s,,%s register-only FMA loop", be,
                    f->threads, f->lanes, f->time.reps, f->gflop_s_median, f->gflop_s_p10, f->gflop_s_p90,
                    f->gflop_s_best, f->isa);
        }
        const SgemmPeak *g = &me->sgemm;
        double gflop = 2.0 * g->n * (double)g->n * g->n * 1e-9, fraction = sgemm_fraction_of_fma(me);
        char note[160];
        snprintf(note, sizeof note, "%.0f%% of the FMA peak%s", 100.0 * fraction,
                 fraction < SGEMM_LOW_FRACTION ? ": far below it; the BLAS may run a generic kernel (meta blas_core)"
                                               : "");
        csv_row(w, "%s,sgemm,%d,%d,n,%d,%.6g,%.6g,%.6g,%.6g,GFLOP/s,,%s", be, omp_get_max_threads(), g->n, g->time.reps,
                g->gflop_s_median, gflop / (g->time.p90_ms * 1e-3), gflop / (g->time.p10_ms * 1e-3), g->gflop_s_best,
                note);
        return;
    }
#ifdef INFERLAB_CUDA
    for (int i = 0; i < 2; i++) {
        const GemmPeak *g = &me->gemm[i];
        const BenchStats *t = &g->time;
        csv_row(w, "%s,gemm_%s,,%d,n,%d,%.6g,%.6g,%.6g,%.6g,GFLOP/s,,cuBLAS", be, gemm_mode_name(g->mode), g->n, t->reps,
                gemm_flop_s(g, t->median_ms) * 1e-9, gemm_flop_s(g, t->p90_ms) * 1e-9, gemm_flop_s(g, t->p10_ms) * 1e-9,
                gemm_flop_s(g, t->min_ms) * 1e-9);
    }
#endif
}

static void write_measured(LabRun *r, const Measured *me, const LabModel *lab) {
    char model[160], th[16];
    const char *be = backend_name(me->backend), *cache = me->backend == BACKEND_CPU ? "LLC" : "L2";
    csv_quote(model, sizeof model, lab->shape.name);
    CsvWriter w = lab_csv(r, TABLE_MEASURED);
    for (int i = 0; i < me->n_stream; i++) {
        const StreamResult *r = &me->stream[i];
        csv_row(&w, "%s,stream_%s,%s,%zu,bytes_per_array,%d,%.6g,%.6g,%.6g,%.6g,GB/s,,arrays of 4x the %zu-byte %s "
                    "or more",
                be, stream_kernel_name(r->kernel), threads_cell(th, sizeof th, r->threads), r->n * sizeof(double),
                r->time.reps, r->gb_s_median, r->gb_s_p10, r->gb_s_p90, r->gb_s_best, me->llc_bytes, cache);
    }
    write_peaks(&w, me);
    for (int i = 0; i < me->n_decode; i++) {
        const DecodePoint *p = &me->decode[i];
        const BenchStats *t = &p->time;
        threads_cell(th, sizeof th, p->threads);
        // A working set that fits in the LLC is read from cache: MBU against DRAM may pass 1.
        char note[96] = "";
        if (p->bytes < (double)me->llc_bytes)
            snprintf(note, sizeof note, "bytes per token fit in the %s: read from cache and not DRAM", cache);
        csv_row(&w, "%s,decode_time,%s,%d,context_len,%d,%.6g,%.6g,%.6g,%.6g,ms/token,%s,", be, th, p->context, t->reps,
                t->median_ms, t->p10_ms, t->p90_ms, t->min_ms, model);
        csv_row(&w, "%s,decode_bytes,%s,%d,context_len,1,%.6g,%.6g,%.6g,%.6g,bytes/token,%s,weights + KV read (fp32)",
                be, th, p->context, p->bytes, p->bytes, p->bytes, p->bytes, model);
        csv_row(&w, "%s,mbu,%s,%d,context_len,%d,%.6g,%.6g,%.6g,%.6g,fraction,%s,%s", be, th, p->context, t->reps,
                mbu(p, t->median_ms), mbu(p, t->p90_ms), mbu(p, t->p10_ms), mbu(p, t->min_ms), model, note);
    }
    csv_close(&w);
}

static void write_hardware(LabRun *r, const HardwareSpec *hws, int n) {
    CsvWriter w = open_derived(r, TABLE_HARDWARE);
    for (int i = 0; i < n; i++) {
        char name[160], source[1200];
        csv_row(&w, "%s,%s,%.6g,%.6g,%.6g,%.6g,%s", csv_quote(name, sizeof name, hws[i].name), hws[i].kind,
                hws[i].memory_bytes, hws[i].bandwidth_bytes_s, hws[i].bf16_flop_s, hws[i].fp32_flop_s,
                csv_quote(source, sizeof source, hws[i].source));
    }
    csv_close(&w);
}

static void append_note(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append_note(char *buf, size_t size, const char *fmt, ...) {
    size_t len = strlen(buf);
    if (len > 0 && len + 2 < size) {
        strcat(buf, "; ");
        len += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, size - len, fmt, ap);
    va_end(ap);
}

// What a reader must know to read a budget row: whatever makes it unlike the plain case.
static void budget_notes(char *buf, size_t size, const ModelShape *m, const HardwareSpec *h, const Budget *b,
                         int context) {
    buf[0] = '\0';
    if (b->weight_bytes > h->memory_bytes) append_note(buf, size, "weights do not fit in memory");
    else if (!b->fits_large) append_note(buf, size, "weights + batch-%d KV do not fit", LARGE_BATCH);
    if (m->window > 0 && context > m->window && m->global_every > 1)
        append_note(buf, size, "KV of the local layers capped at the %d-token window; every %dth layer global",
                    m->window, m->global_every);
    else if (m->window > 0 && context > m->window)
        append_note(buf, size, "KV capped at the %d-token sliding window", m->window);
    if (m->n_params_active < m->n_params)
        append_note(buf, size, "MoE: batch 1 reads the %.3g active parameters, batch %d min(all, %d x active)",
                    m->n_params_active, LARGE_BATCH, LARGE_BATCH);
    if (m->kv_lora_rank > 0)
        append_note(buf, size, "MLA: KV per layer = latent %d + RoPE key %d", m->kv_lora_rank, m->rope_head_dim);
    if (context > m->max_context) append_note(buf, size, "context beyond the model's %d tokens", m->max_context);
}

static const char *bound_name(const Roofline *r) { return r->compute_bound ? "compute" : "memory"; }

static void write_budget(LabRun *r, const ModelShape *models, int n_models, const HardwareSpec *hws, int n_hw,
                         int context) {
    CsvWriter w = open_derived(r, TABLE_BUDGET);
    for (int i = 0; i < n_models; i++)
        for (size_t d = 0; d < sizeof BUDGET_DTYPES / sizeof BUDGET_DTYPES[0]; d++)
            for (int j = 0; j < n_hw; j++) {
                const ModelShape *m = &models[i];
                const HardwareSpec *h = &hws[j];
                Precision p = {BUDGET_DTYPES[d], NUM_BF16};
                Budget b = budget_compute(m, h, p, context, LARGE_BATCH, PREFILL_TOKENS);
                char name[160], hw_name[160], notes[512], quoted[1100];
                budget_notes(notes, sizeof notes, m, h, &b, context);
                csv_row(&w, "%s,%s,%s,%s,%d,%.6g,%.6g,%.6g,%.6g,%s,%.6g,%s,%.6g,%s,%.6g,%.6g,%s,%.6g,%.6g,%.6g,%s",
                        csv_quote(name, sizeof name, m->name), num_format_name(p.weights), num_format_name(p.act),
                        csv_quote(hw_name, sizeof hw_name, h->name), context, b.weight_bytes * 1e-9,
                        b.kv_bytes_per_token, b.kv_tokens_fit, b.kv_bytes_large * 1e-9, b.fits_large ? "yes" : "no",
                        b.decode_1.time_s * 1e3, bound_name(&b.decode_1), b.decode_large.time_s * 1e3,
                        bound_name(&b.decode_large), b.throughput_tok_s, b.prefill.time_s * 1e3,
                        bound_name(&b.prefill), b.decode_1.intensity, b.decode_large.intensity, budget_ridge(h, p),
                        csv_quote(quoted, sizeof quoted, notes));
            }
    csv_close(&w);
}

// One roofline point. An empty cell stands for what does not apply: context < 0 (the MLP
// reads no KV), achieved_flop_s < 0 (nothing measured).
static void roofline_row(CsvWriter *w, const HardwareSpec *h, const ModelShape *m, Precision p, const char *point,
                         int batch, int context, double flops, double bytes, double achieved_flop_s) {
    Roofline r = budget_roofline(h, p, flops, bytes);
    char hw_name[160], name[160], context_text[16] = "", achieved[32] = "";
    if (context >= 0) snprintf(context_text, sizeof context_text, "%d", context);
    if (achieved_flop_s >= 0) snprintf(achieved, sizeof achieved, "%.6g", achieved_flop_s);
    csv_row(w, "%s,%s,%s,%s,%s,%d,%s,%.6g,%.6g,%.6g,%.6g,%s,%.6g,%.6g,%.6g,%s",
            csv_quote(hw_name, sizeof hw_name, h->name), csv_quote(name, sizeof name, m->name), num_format_name(p.weights),
            num_format_name(p.act), point, batch, context_text, flops, bytes, r.intensity, r.attainable_flop_s, achieved,
            budget_peak_flop_s(h, p), h->bandwidth_bytes_s, budget_ridge(h, p), bound_name(&r));
}

// The predicted points of one model on one hardware.
static void roofline_points(CsvWriter *w, const HardwareSpec *h, const ModelShape *m, Precision p, int context) {
    roofline_row(w, h, m, p, "prefill", 1, PREFILL_TOKENS, budget_prefill_flops(m, PREFILL_TOKENS),
                 budget_prefill_bytes(m, p, PREFILL_TOKENS), -1);
    int batches[] = {1, LARGE_BATCH};
    for (int i = 0; i < 2; i++)
        roofline_row(w, h, m, p, "decode_step", batches[i], context, budget_decode_flops(m, batches[i], context),
                     budget_decode_bytes(m, p, batches[i], context), -1);
    for (size_t i = 0; i < sizeof MLP_BATCHES / sizeof MLP_BATCHES[0]; i++)
        roofline_row(w, h, m, p, "decode_mlp", MLP_BATCHES[i], -1, budget_mlp_flops(m, MLP_BATCHES[i]),
                     budget_mlp_bytes(m, p, MLP_BATCHES[i]), -1);
    double kv = budget_kv_tokens_per_sequence(m, context);
    roofline_row(w, h, m, p, "decode_attention", 1, context, budget_attention_flops_per_pair(m, 1) * kv,
                 budget_kv_bytes_per_token(m, p.act) * kv, -1);
}

// The roofline model's points on each of hws (n_hw), and our own model's on the machine measured.
static void write_roofline(LabRun *r, const HardwareSpec *hws, int n_hw, const ModelShape *roof_model,
                           const LabModel *lab, const Measured *me, int context) {
    CsvWriter w = open_derived(r, TABLE_ROOFLINE);
    Precision bf16 = {NUM_BF16, NUM_BF16};
    for (int j = 0; j < n_hw; j++) roofline_points(&w, &hws[j], roof_model, bf16, context);
    // Our own model as it runs here (fp32), predicted and measured side by side.
    int lab_context = context < lab->shape.max_context ? context : lab->shape.max_context;
    roofline_points(&w, &me->spec, &lab->shape, FP32, lab_context);
    for (int i = 0; i < me->n_decode; i++) {
        const DecodePoint *d = &me->decode[i];
        if (d->threads != me->roof_threads) continue; // the roof is the all-thread one
        roofline_row(&w, &me->spec, &lab->shape, FP32, "decode_step_measured", 1, d->context, d->flops, d->bytes,
                     d->flops / (d->time.median_ms * 1e-3));
    }
    csv_close(&w);
}

// --- main -------------------------------------------------------------------------------------

static const ModelShape *find_model(const ModelShape *models, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(models[i].name, name) == 0) return &models[i];
    return NULL;
}

#define MAX_REAL_MODELS 4

static const char *model_path, *hardware_path, *presets_path, *roofline_name, *real_models;
static long context;

static const LabOption OPTIONS[] = {
    {.name = "model", .kind = LAB_TEXT, .value = &model_path, .arg = "FILE",
     .help = "model whose decode MBU is measured (default " DEFAULT_MODEL " when it\n"
     "exists, else a random untrained model, named so in the CSVs)"},
    {.name = "context", .kind = LAB_INT, .value = &context, .arg = "N",
     .help = "tokens each sequence attends to in the budget's decode", .def = DEFAULT_CONTEXT, .min = 1,
     .max = 1 << 24},
    {.name = "hardware", .kind = LAB_TEXT, .value = &hardware_path, .arg = "CSV", .help = "datasheet table",
     .def = DEFAULT_HARDWARE},
    {.name = "presets", .kind = LAB_TEXT, .value = &presets_path, .arg = "CSV", .help = "model shapes",
     .def = DEFAULT_PRESETS},
    {.name = "roofline-model", .kind = LAB_TEXT, .value = &roofline_name, .arg = "M",
     .help = "preset drawn on every roofline", .def = DEFAULT_ROOFLINE_MODEL},
    {.name = "real-model", .kind = LAB_TEXT, .value = &real_models, .arg = "FILE[,FILE]",
     .help = "published models (GGUF, comma-separated) added to the budget's models"},
    {0},
};

// This machine's measurements; the hardware rows of the budget (*n_hw) and how many of them
// (*n_roof, the first) get the roofline model's points.
static HardwareSpec *measure(LabRun *r, Measured *me, LabModel *lab, const HardwareSpec *datasheets,
                             int n_datasheets, int *n_hw, int *n_roof) {
    Settings st = settings_for(r->profile);
    int threads = omp_get_max_threads();
    HardwareSpec *hws;
    if (r->backend == BACKEND_CPU) {
        measure_stream(me, &st, threads);
        progress("hardware_budget: sgemm n = %d", st.sgemm_n);
        me->sgemm = peak_sgemm(st.sgemm_n, st.sgemm_min_reps, st.sgemm_max_reps, st.sgemm_budget_s, 1);
        measure_fma(me, &st, threads);
        describe_machine(me, &r->hw, threads);
        me->roof_threads = threads;
        int thread_counts[] = {1, threads};
        measure_decode(me, lab, &st, ops_cpu(), thread_counts, threads > 1 ? 2 : 1);
        // The budget covers the datasheets and this machine; the roofline model is drawn on the datasheets.
        *n_hw = n_datasheets + 1;
        *n_roof = n_datasheets;
        hws = mallocCheck((size_t)*n_hw * sizeof(HardwareSpec));
        memcpy(hws, datasheets, (size_t)n_datasheets * sizeof(HardwareSpec));
        hws[n_datasheets] = me->spec;
        return hws;
    }
#ifdef INFERLAB_CUDA
    cuda_init();
    measure_gpu(me, lab, &st);
    char device[256];
    cuda_device_name(device, sizeof device);
    // The GPU run adds only the device: the model and context are the CPU run's keys (same options).
    lab_meta(r, "cuda_device", "%s", device);
    cuda_shutdown();
#endif
    // The GPU as measured, alone: the datasheets are the CPU run's tables.
    *n_hw = *n_roof = 1;
    hws = mallocCheck(sizeof(HardwareSpec));
    hws[0] = me->spec;
    return hws;
}

static void print_measured(const Measured *me, const LabModel *lab) {
    for (int i = 0; i < me->n_stream; i++)
        fprintf(stderr, "STREAM %-5s %d thread(s): %.2f GB/s best, %.2f median\n",
                stream_kernel_name(me->stream[i].kernel), me->stream[i].threads, me->stream[i].gb_s_best,
                me->stream[i].gb_s_median);
    if (me->backend == BACKEND_CPU) {
        for (int i = 0; i < me->n_fma; i++)
            fprintf(stderr, "FMA peak (%s) %d thread(s): %.1f GFLOP/s best, %.1f median\n", me->fma[i].isa,
                    me->fma[i].threads, me->fma[i].gflop_s_best, me->fma[i].gflop_s_median);
        fprintf(stderr, "sgemm n = %d: %.1f GFLOP/s best, %.1f median, %.0f%% of the FMA peak\n", me->sgemm.n,
                me->sgemm.gflop_s_best, me->sgemm.gflop_s_median, 100.0 * sgemm_fraction_of_fma(me));
        if (sgemm_fraction_of_fma(me) < SGEMM_LOW_FRACTION)
            fprintf(stderr, "hardware_budget: warning: sgemm runs far below the FMA peak: the BLAS may run a "
                            "generic kernel (meta.csv blas_core)\n");
    } else {
        fprintf(stderr, "%s: fp32 %.1f, bf16 %.1f GFLOP/s best (0 threads: the GPU)\n", me->spec.name,
                me->spec.fp32_flop_s * 1e-9, me->spec.bf16_flop_s * 1e-9);
    }
    for (int i = 0; i < me->n_decode; i++)
        fprintf(stderr, "decode %s, context %d, %d thread(s): %.3f ms/token, %.1f MB/token, MBU %.2f\n",
                lab->shape.name, me->decode[i].context, me->decode[i].threads, me->decode[i].time.median_ms,
                me->decode[i].bytes * 1e-6, mbu(&me->decode[i], me->decode[i].time.median_ms));
}

static int run(LabRun *r) {
    // Read every input before measuring anything, so a bad table fails at once.
    HardwareSpec *datasheets;
    ModelShape *presets;
    int n_datasheets, n_presets;
    Error err;
    if (budget_load_hardware(hardware_path, &datasheets, &n_datasheets, &err)) die("%s", err.msg);
    if (budget_load_models(presets_path, &presets, &n_presets, &err)) die("%s", err.msg);
    const ModelShape *roof_model = find_model(presets, n_presets, roofline_name);
    if (!roof_model) die("--roofline-model: '%s' is not a model in %s", roofline_name, presets_path);
    LabModel lab;
    lab_model_open(&lab, model_path);
    // The published models of --real-model, as shapes for the budget, each named by its file stem.
    NamedConfig configs[MAX_REAL_MODELS];
    int n_real = real_models ? checkpoint_configs(real_models, configs, MAX_REAL_MODELS, &err) : 0;
    if (n_real < 0) die("hardware_budget: --real-model: %s", err.msg);
    ModelShape real[MAX_REAL_MODELS];
    for (int i = 0; i < n_real; i++) real[i] = budget_shape_from_config(&configs[i].config, configs[i].name, configs[i].path);
    double start = now_seconds();

    Measured me = {.backend = r->backend};
    int n_hw, n_roof;
    HardwareSpec *hws = measure(r, &me, &lab, datasheets, n_datasheets, &n_hw, &n_roof);
    progress_done();

    // The presets, our own model and the published ones.
    int n_models = n_presets + 1 + n_real;
    ModelShape *models = mallocCheck((size_t)n_models * sizeof(ModelShape));
    memcpy(models, presets, (size_t)n_presets * sizeof(ModelShape));
    models[n_presets] = lab.shape;
    memcpy(models + n_presets + 1, real, (size_t)n_real * sizeof(ModelShape));

    write_measured(r, &me, &lab);
    write_hardware(r, hws, n_hw);
    write_budget(r, models, n_models, hws, n_hw, (int)context);
    write_roofline(r, hws, n_roof, roof_model, &lab, &me, (int)context);

    if (r->backend == BACKEND_CPU) {
        lab_meta(r, "hardware_budget_threads", "%d", omp_get_max_threads());
        lab_meta(r, "hardware_budget_model", "%s", lab.path[0] ? lab.path : lab.shape.name);
        lab_meta(r, "hardware_budget_model_fnv1a64", "%s", lab.checksum[0] ? lab.checksum : "none");
        lab_meta(r, "hardware_budget_context_len", "%ld", context);
        lab_meta(r, "hardware_budget_real_models", "%s", n_real ? real_models : "none");
        lab_meta(r, "hardware_budget_assumptions", "%s",
                 "GB = 1e9 bytes; weights in bf16/int8/int4 (weight-only: scales not counted), KV and math in bf16; "
                 "decode time >= max(FLOPs / peak, bytes / bandwidth); batch-64 KV at context_len tokens per "
                 "sequence; MBU bandwidth = STREAM triad on as many threads as the decode, best pass");
    }
    print_measured(&me, &lab);
    fprintf(stderr, "hardware_budget: wrote %s/hardware_measured.csv, {hardware,hardware_budget,roofline}%s.csv "
            "in %.1f s\n", r->out_dir, r->backend == BACKEND_CPU ? "" : "_cuda", now_seconds() - start);
    model_free(&lab.m);
    free(datasheets);
    free(presets);
    free(hws);
    free(models);
    return 0;
}

static const Experiment HARDWARE_BUDGET = {
    "hardware_budget", "[options]",
    "Measure this machine (STREAM bandwidth, sgemm peak, MBU of our decode) and compute the\n"
    "hardware budget and roofline of model presets x dtypes x hardware.",
    OPTIONS, TABLES, LAB_COMMON | LAB_BACKEND, NULL, run};

int main(int argc, char **argv) { return lab_main(&HARDWARE_BUDGET, argc, argv); }
