// attention_cudnn.cu: the vendor's fused attention, the third contender of project 15 (see
// kernels_cuda.h): cuDNN's scaled-dot-product attention forward, driven from C through the
// backend descriptor API (cudnnBackend*, cudnn_graph.h), not through the C++ cudnn-frontend.
//
// cuDNN 9.13 added a one-operation SDPA node, CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR:
// Q, K, V, O and a by-value scale tensor, nothing else. The graph here is that node alone;
// cuDNN's heuristics (mode A) rank the engines that can run it, and the first whose
// execution plan finalizes is kept. Building the plan is slow next to executing it (an
// engine may compile its kernel at run time), so a plan is made once per shape and then
// executed many times.
//
// What the node cannot express in the cuDNN installed here (9.19): a causal mask. Its header
// has no causal or diagonal-alignment attribute; BLOCK_MASK_DESC is a block-sparse tile mask,
// not an element-wise one; the element-wise mask arrives in cuDNN 9.21 as a score-modifier
// subgraph on the node (CUDNN_ATTR_OPERATION_SDPA_FWD_SUBGRAPH with a DIAGONAL_BAND_MASK
// operation), which 9.19 lacks. The older route, a hand-built graph of primitive operations
// (two matmuls, scale, generated row / column indices, a compare and select for the mask, a
// five-operation softmax) that the runtime-fusion engine must recognise as attention, is some
// twenty tensor and a dozen operation descriptors and is what cudnn-frontend generates; it is
// not reproduced here. So causal shapes report themselves unsupported.
//
// Compiled to a stub that says "built without cuDNN" unless INFERLAB_CUDNN is defined (the
// Makefile defines it when cudnn.h is found beside the CUDA toolkit). None of this has run on
// a GPU yet: the machine it was written on has no device.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.h"

#ifdef INFERLAB_CUDNN

#include <cudnn.h>

// The tensors of the graph, by unique id; the variant pack binds pointers to the same ids.
enum { UID_Q = 1, UID_K, UID_V, UID_O, UID_SCALE, N_UIDS = 5 };
// Engine configurations asked of the heuristics; the first that finalizes wins.
#define MAX_CONFIGS 16

struct CudnnAttention {
    cudnnHandle_t handle;
    cudnnBackendDescriptor_t tensors[N_UIDS], op, graph, heuristics, configs[MAX_CONFIGS], plan;
    cudnnBackendDescriptor_t pack; // the variant pack of the last pointers executed
    const void *bound[N_UIDS - 1]; // q, k, v, out the pack holds (NULL: none yet)
    void *bound_workspace;
    float scale;                   // by value: the pack points at it
    size_t workspace_bytes;
};

// A failed cuDNN call while building a plan: an error that names the call site, not an exit,
// so a shape cuDNN cannot run is reported as unsupported and the caller carries on.
#define TRY(call)                                                                                   \
    do {                                                                                            \
        cudnnStatus_t s_ = (call);                                                                  \
        if (s_ != CUDNN_STATUS_SUCCESS) {                                                           \
            error_set(err, "cuDNN error at %s:%d: %s: %s", __FILE__, __LINE__, #call,               \
                      cudnnGetErrorString(s_));                                                     \
            goto fail;                                                                              \
        }                                                                                           \
    } while (0)

// After a plan exists, a failure is a bug or a broken device: die naming the call site.
static void cudnn_check(cudnnStatus_t s, const char *file, int line) {
    if (s != CUDNN_STATUS_SUCCESS) die("cuDNN error at %s:%d: %s", file, line, cudnnGetErrorString(s));
}
#define cudnnCheck(call) cudnn_check((call), __FILE__, __LINE__)

static cudnnStatus_t set_attr(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                              cudnnBackendAttributeType_t type, int64_t count, const void *value) {
    return cudnnBackendSetAttribute(d, name, type, count, value);
}

// A finalized tensor descriptor: (B, H, T, D) contiguous in dtype t, or the fp32 scalar
// passed by value (dims = NULL).
static cudnnStatus_t make_tensor(cudnnBackendDescriptor_t *out, int64_t uid, const int64_t *dims, DType t) {
    cudnnStatus_t s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, out);
    if (s != CUDNN_STATUS_SUCCESS) return s;
    int64_t one[4] = {1, 1, 1, 1}, strides[4], alignment = dims ? 16 : 4;
    cudnnDataType_t type = !dims ? CUDNN_DATA_FLOAT : t == DTYPE_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
    if (dims) {
        strides[3] = 1;
        for (int i = 2; i >= 0; i--) strides[i] = strides[i + 1] * dims[i + 1];
    }
    bool by_value = dims == NULL;
    if ((s = set_attr(*out, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid)) ||
        (s = set_attr(*out, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type)) ||
        (s = set_attr(*out, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment)) ||
        (s = set_attr(*out, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims ? dims : one)) ||
        (s = set_attr(*out, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, dims ? strides : one)) ||
        (by_value && (s = set_attr(*out, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value))))
        return s;
    return cudnnBackendFinalize(*out);
}

int cuda_attention_cudnn_supported(int D, DType t, int causal, char *why, size_t why_len) {
    if (t != DTYPE_F16 && t != DTYPE_BF16) {
        snprintf(why, why_len, "cuDNN fused attention runs fp16 and bf16 only, not %s", dtype_name(t));
        return 0;
    }
    if (D % 8 != 0 || D > 128) {
        snprintf(why, why_len, "cuDNN fused attention here: D a multiple of 8 up to 128, not %d", D);
        return 0;
    }
    if (causal) {
        snprintf(why, why_len, "cuDNN %d.%d's SDPA_FWD node has no causal mask (the score-modifier subgraph "
                               "comes in 9.21)", CUDNN_MAJOR, CUDNN_MINOR);
        return 0;
    }
    return 1;
}

void cuda_attention_cudnn_free(CudnnAttention *p) {
    if (!p) return;
    cudnnBackendDescriptor_t all[] = {p->pack, p->plan, p->heuristics, p->graph, p->op};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]) cudnnBackendDestroyDescriptor(all[i]);
    for (int i = 0; i < MAX_CONFIGS; i++)
        if (p->configs[i]) cudnnBackendDestroyDescriptor(p->configs[i]);
    for (int i = 0; i < N_UIDS; i++)
        if (p->tensors[i]) cudnnBackendDestroyDescriptor(p->tensors[i]);
    if (p->handle) cudnnDestroy(p->handle);
    free(p);
}

CudnnAttention *cuda_attention_cudnn_plan(int B, int H, int T, int D, DType t, int causal, Error *err) {
    char why[256];
    if (!cuda_attention_cudnn_supported(D, t, causal, why, sizeof why)) {
        error_set(err, "%s", why);
        return NULL;
    }
    CudnnAttention *p = (CudnnAttention *)callocCheck(1, sizeof *p);
    int64_t dims[4] = {B, H, T, D}, n_configs = 0, workspace = 0, got = 0;
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    p->scale = 1.0f / sqrtf((float)D);

    TRY(cudnnCreate(&p->handle)); // default stream, as every kernel here
    for (int i = 0; i < N_UIDS; i++) // q, k, v, out, then the scale
        TRY(make_tensor(&p->tensors[i], UID_Q + i, UID_Q + i == UID_SCALE ? NULL : dims, t));

    // the SDPA node: O = softmax(scale Q K^T) V, inference (no softmax statistics output)
    TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, &p->op));
    {
        const cudnnBackendAttributeName_t slots[N_UIDS] = {
            CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC,
            CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC,
            CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC};
        for (int i = 0; i < N_UIDS; i++)
            TRY(set_attr(p->op, slots[i], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->tensors[i]));
    }
    TRY(cudnnBackendFinalize(p->op));

    TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &p->graph));
    TRY(set_attr(p->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &p->handle));
    TRY(set_attr(p->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->op));
    TRY(cudnnBackendFinalize(p->graph));

    // heuristics: engine configurations, best first
    TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &p->heuristics));
    TRY(set_attr(p->heuristics, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->graph));
    TRY(set_attr(p->heuristics, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
    TRY(cudnnBackendFinalize(p->heuristics));
    for (int i = 0; i < MAX_CONFIGS; i++)
        TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &p->configs[i]));
    TRY(cudnnBackendGetAttribute(p->heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                 MAX_CONFIGS, &n_configs, p->configs));

    // the first configuration whose plan finalizes
    for (int64_t i = 0; i < n_configs && !p->plan; i++) {
        cudnnBackendDescriptor_t plan;
        TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan));
        if (set_attr(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &p->handle) == CUDNN_STATUS_SUCCESS &&
            set_attr(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                     &p->configs[i]) == CUDNN_STATUS_SUCCESS &&
            cudnnBackendFinalize(plan) == CUDNN_STATUS_SUCCESS)
            p->plan = plan;
        else
            cudnnBackendDestroyDescriptor(plan);
    }
    if (!p->plan) {
        error_set(err, "cuDNN %d.%d has no engine for fused attention %s B=%d H=%d T=%d D=%d (%lld configurations "
                  "tried)", CUDNN_MAJOR, CUDNN_MINOR, dtype_name(t), B, H, T, D, (long long)n_configs);
        goto fail;
    }
    TRY(cudnnBackendGetAttribute(p->plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got,
                                 &workspace));
    p->workspace_bytes = (size_t)workspace;
    return p;
fail:
    cuda_attention_cudnn_free(p);
    return NULL;
}

size_t cuda_attention_cudnn_workspace(const CudnnAttention *p) { return p->workspace_bytes; }

// The variant pack binds device pointers to the graph's tensor ids; it is rebuilt only when
// the pointers change, so repeated calls on the same buffers cost one cudnnBackendExecute.
static void bind(CudnnAttention *p, void *out, const void *q, const void *k, const void *v, void *workspace) {
    const void *ptrs[N_UIDS - 1] = {q, k, v, out};
    if (p->pack && memcmp(ptrs, p->bound, sizeof ptrs) == 0 && workspace == p->bound_workspace) return;
    if (p->pack) cudnnCheck(cudnnBackendDestroyDescriptor(p->pack));
    int64_t uids[N_UIDS] = {UID_Q, UID_K, UID_V, UID_O, UID_SCALE};
    void *data[N_UIDS] = {(void *)q, (void *)k, (void *)v, out, &p->scale};
    cudnnCheck(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &p->pack));
    cudnnCheck(set_attr(p->pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, N_UIDS, uids));
    cudnnCheck(set_attr(p->pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, N_UIDS, data));
    cudnnCheck(set_attr(p->pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace));
    cudnnCheck(cudnnBackendFinalize(p->pack));
    memcpy(p->bound, ptrs, sizeof ptrs);
    p->bound_workspace = workspace;
}

void cuda_attention_cudnn(CudnnAttention *p, void *out, const void *q, const void *k, const void *v, void *workspace) {
    if (p->workspace_bytes && !workspace) die("cuda_attention_cudnn: the plan needs %zu bytes of workspace", p->workspace_bytes);
    bind(p, out, q, k, v, workspace);
    cudnnCheck(cudnnBackendExecute(p->handle, p->plan, p->pack));
}

#else // built without cuDNN

struct CudnnAttention {
    int unused;
};

int cuda_attention_cudnn_supported(int D, DType t, int causal, char *why, size_t why_len) {
    (void)D, (void)t, (void)causal;
    snprintf(why, why_len, "built without cuDNN (no cudnn.h beside nvcc, or CUDNN=0)");
    return 0;
}

CudnnAttention *cuda_attention_cudnn_plan(int B, int H, int T, int D, DType t, int causal, Error *err) {
    (void)B, (void)H, (void)T;
    char why[256];
    cuda_attention_cudnn_supported(D, t, causal, why, sizeof why);
    error_set(err, "%s", why);
    return NULL;
}

size_t cuda_attention_cudnn_workspace(const CudnnAttention *p) {
    (void)p;
    return 0;
}

void cuda_attention_cudnn(CudnnAttention *p, void *out, const void *q, const void *k, const void *v, void *workspace) {
    (void)p, (void)out, (void)q, (void)k, (void)v, (void)workspace;
    die("cuda_attention_cudnn: built without cuDNN");
}

void cuda_attention_cudnn_free(CudnnAttention *p) { (void)p; }

#endif // INFERLAB_CUDNN
