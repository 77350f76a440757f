// hw.c: the hardware probe and run-directory slug (see hw.h). Reads /proc and sysconf, asks
// OpenBLAS for its configuration and git for the commit; anything missing reads "unknown".
#include "hw.h"

#include <cblas.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <ctype.h>
#include <stdlib.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "kernels.h"

#if defined(__clang__)
#define HW_COMPILER "clang " __clang_version__
#elif defined(__GNUC__)
#define HW_COMPILER "gcc " __VERSION__
#else
#define HW_COMPILER "unknown"
#endif

#ifndef INFERLAB_CFLAGS
#define INFERLAB_CFLAGS "unknown"
#endif

// Copy s into dst without leading/trailing white space.
static void copy_trimmed(char *dst, size_t size, const char *s) {
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1])) n--;
    if (n >= size) n = size - 1;
    memcpy(dst, s, n);
    dst[n] = '\0';
}

// The value of the first "key<white space>: value" line of a /proc text file, or 0.
static int read_proc_field(const char *path, const char *key, char *out, size_t size) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[512];
    int found = 0;
    size_t klen = strlen(key);
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) != 0) continue;
        char *p = line + klen;
        while (*p == ' ' || *p == '\t') p++;
        if (*p != ':') continue;
        copy_trimmed(out, size, p + 1);
        found = out[0] != '\0';
    }
    fclose(f);
    return found;
}

static void probe_cpu_model(char *out, size_t size) {
    const char *keys[] = {"model name", "Hardware", "Model"}; // x86; then common ARM boards
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (read_proc_field("/proc/cpuinfo", keys[i], out, size)) return;
    struct utsname u;
    copy_trimmed(out, size, uname(&u) == 0 ? u.machine : "unknown");
}

// The NVIDIA driver lists each GPU as /proc/driver/nvidia/gpus/<bus id>/information.
static void probe_gpu(char *out, size_t size) {
    out[0] = '\0';
    DIR *d = opendir("/proc/driver/nvidia/gpus");
    if (!d) return;
    struct dirent *e;
    while (out[0] == '\0' && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[512];
        snprintf(path, sizeof path, "/proc/driver/nvidia/gpus/%s/information", e->d_name);
        read_proc_field(path, "Model", out, size);
    }
    closedir(d);
}

#if defined(__x86_64__) || defined(__i386__)
// x86 microarchitectures by CPUID vendor, family and model (Intel's and AMD's published tables;
// the ones this lab's machines and their neighbours report). first..last: a model range.
static const struct {
    int amd, family, first, last;
    const char *name;
} UARCHES[] = {
    {0, 6, 0x3F, 0x3F, "haswell-ep"},         {0, 6, 0x4F, 0x4F, "broadwell-ep"},
    {0, 6, 0x55, 0x55, "skylake-sp"}, // Cascade Lake and Cooper Lake share it (stepping tells)
    {0, 6, 0x6A, 0x6C, "ice-lake-sp"},        {0, 6, 0x8F, 0x8F, "sapphire-rapids"},
    {0, 6, 0xCF, 0xCF, "emerald-rapids"},     {0, 6, 0xAD, 0xAE, "granite-rapids"},
    {0, 6, 0xAF, 0xAF, "sierra-forest"},      {0, 6, 0x8E, 0x8E, "kaby-lake"},
    {0, 6, 0x9E, 0x9E, "coffee-lake"},        {0, 6, 0x7D, 0x7E, "ice-lake"},
    {0, 6, 0x8C, 0x8D, "tiger-lake"},         {0, 6, 0x97, 0x9A, "alder-lake"},
    {0, 6, 0xB7, 0xBF, "raptor-lake"},        {0, 6, 0xAA, 0xAC, "meteor-lake"},
    {1, 0x17, 0x00, 0x2F, "zen"},             {1, 0x17, 0x30, 0xFF, "zen2"},
    {1, 0x19, 0x00, 0x0F, "zen3"},            {1, 0x19, 0x10, 0x1F, "zen4"},
    {1, 0x19, 0x20, 0x5F, "zen3"},            {1, 0x19, 0x60, 0xAF, "zen4"},
    {1, 0x1A, 0x00, 0xFF, "zen5"},
};

static void probe_cpu_arch(HwInfo *hw) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return;
    char vendor[13];
    memcpy(vendor, &b, 4), memcpy(vendor + 4, &d, 4), memcpy(vendor + 8, &c, 4);
    vendor[12] = '\0';
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    int family = (a >> 8) & 0xF, model = (a >> 4) & 0xF;
    if (family == 0xF) family += (a >> 20) & 0xFF;
    if (family == 6 || family >= 0xF) model |= ((a >> 16) & 0xF) << 4;
    int amd = strcmp(vendor, "AuthenticAMD") == 0;
    snprintf(hw->cpu_uarch, sizeof hw->cpu_uarch, "family-%d-model-%d", family, model);
    for (size_t i = 0; i < sizeof UARCHES / sizeof UARCHES[0]; i++)
        if (UARCHES[i].amd == amd && UARCHES[i].family == family && model >= UARCHES[i].first && model <= UARCHES[i].last)
            snprintf(hw->cpu_uarch, sizeof hw->cpu_uarch, "%s", UARCHES[i].name);
    __builtin_cpu_init();
    const char *isa = __builtin_cpu_supports("avx512f") ? "avx512"
                      : __builtin_cpu_supports("avx2")  ? "avx2"
                      : __builtin_cpu_supports("avx")   ? "avx"
                      : __builtin_cpu_supports("sse4.2") ? "sse4"
                                                         : "";
    snprintf(hw->cpu_isa, sizeof hw->cpu_isa, "%s", isa);
}
#else
static void probe_cpu_arch(HwInfo *hw) { (void)hw; }
#endif

// The size of the highest-level cache cpu0 has (sysfs: "266240K"), 0 when sysfs has none.
static long long probe_llc_bytes(void) {
    long long best = 0;
    int best_level = 0;
    for (int i = 0; i < 8; i++) {
        char path[96], level[16], size[32];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f) break;
        int ok = fgets(level, sizeof level, f) != NULL;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!ok || !(f = fopen(path, "r"))) continue;
        ok = fgets(size, sizeof size, f) != NULL;
        fclose(f);
        char unit = 0;
        long long v = 0;
        if (!ok || sscanf(size, "%lld%c", &v, &unit) < 1) continue;
        v *= unit == 'K' ? 1024LL : unit == 'M' ? 1024LL * 1024 : 1;
        if (atoi(level) >= best_level) best_level = atoi(level), best = v;
    }
    return best;
}

static void probe_git_commit(char *out, size_t size) {
    copy_trimmed(out, size, "unknown");
    FILE *p = popen("git rev-parse --short HEAD 2>/dev/null", "r");
    if (!p) return;
    char line[64];
    int got = fgets(line, sizeof line, p) != NULL;
    if (pclose(p) == 0 && got) copy_trimmed(out, size, line);
}

void hw_probe(HwInfo *hw) {
    memset(hw, 0, sizeof *hw);
    probe_cpu_model(hw->cpu_model, sizeof hw->cpu_model);
    probe_cpu_arch(hw);
    hw->llc_bytes = probe_llc_bytes();
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    hw->n_cpus = n > 0 ? (int)n : 1;
    long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
    hw->mem_bytes = pages > 0 && page_size > 0 ? (long long)pages * page_size : 0;
    probe_gpu(hw->gpu, sizeof hw->gpu);
    copy_trimmed(hw->blas, sizeof hw->blas, openblas_get_config());
    copy_trimmed(hw->blas_core, sizeof hw->blas_core, openblas_get_corename());
    copy_trimmed(hw->blas_choice, sizeof hw->blas_choice, kernels_blas_choice());
    hw->blas_threads = openblas_get_num_threads();
    copy_trimmed(hw->compiler, sizeof hw->compiler, HW_COMPILER);
    copy_trimmed(hw->cflags, sizeof hw->cflags, INFERLAB_CFLAGS);
    probe_git_commit(hw->git_commit, sizeof hw->git_commit);
    time_t now = time(NULL);
    struct tm utc;
    gmtime_r(&now, &utc);
    strftime(hw->date, sizeof hw->date, "%Y-%m-%dT%H:%M:%SZ", &utc);
}

// --- slug ---------------------------------------------------------------------------------

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

// Words that say nothing about which machine this is. A word is lower-cased with the
// trademark marks already removed.
static int is_noise_word(const char *w) {
    return w[0] == '\0' || strcmp(w, "cpu") == 0 || strcmp(w, "processor") == 0 || strcmp(w, "@") == 0 ||
           ends_with(w, "ghz") || ends_with(w, "-core");
}

// Remove every occurrence of mark from w.
static void remove_all(char *w, const char *mark) {
    size_t m = strlen(mark);
    char *p;
    while ((p = strstr(w, mark)) != NULL) memmove(p, p + m, strlen(p + m) + 1);
}

// Append the words of text to the slug being built in out (length *len), each as
// [a-z0-9]+ runs joined by '-', stopping at "with" (integrated graphics follow it) and at
// the first word that would not fit in size.
static void append_words(char *out, size_t size, size_t *len, const char *text) {
    char buf[256];
    copy_trimmed(buf, sizeof buf, text);
    for (char *save = NULL, *w = strtok_r(buf, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        for (char *c = w; *c; c++) *c = (char)tolower((unsigned char)*c);
        remove_all(w, "(r)");
        remove_all(w, "(tm)");
        if (strcmp(w, "with") == 0) break;
        if (is_noise_word(w)) continue;
        char piece[256];
        size_t n = 0;
        for (const char *c = w; *c; c++) {
            int keep = isalnum((unsigned char)*c);
            if (keep) piece[n++] = *c;
            else if (n > 0 && piece[n - 1] != '-') piece[n++] = '-';
        }
        while (n > 0 && piece[n - 1] == '-') n--;
        if (n == 0) continue;
        size_t sep = *len > 0;
        if (*len + sep + n + 1 > size) break;
        if (sep) out[(*len)++] = '-';
        memcpy(out + *len, piece, n);
        *len += n;
        out[*len] = '\0';
    }
}

void hw_slug(char *out, size_t size, const HwInfo *hw) {
    if (size < 48) die("hw_slug: buffer of %zu bytes is too small", size);
    char machine[64] = "", part[32];
    size_t mlen = 0, len = 0;
    append_words(machine, sizeof machine, &mlen, hw->cpu_uarch);
    append_words(machine, sizeof machine, &mlen, hw->cpu_isa);
    snprintf(part, sizeof part, "%dc", hw->n_cpus > 0 ? hw->n_cpus : 1);
    append_words(machine, sizeof machine, &mlen, part);
    if (hw->llc_bytes >= 1024 * 1024) {
        snprintf(part, sizeof part, "llc%lldm", hw->llc_bytes / (1024 * 1024));
        append_words(machine, sizeof machine, &mlen, part);
    }
    out[0] = '\0';
    append_words(out, size > mlen + 1 ? size - mlen - 1 : 1, &len, hw->cpu_model);
    if (len == 0) append_words(out, size > mlen + 1 ? size - mlen - 1 : 1, &len, "cpu-unknown");
    append_words(out, size, &len, machine);
    append_words(out, size, &len, hw->gpu);
}
