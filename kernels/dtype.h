// dtype.h: the element types of weight tensors as data, one row of traits per type, in the
// manner of ggml's type traits: the name, the GGUF type id, the block layout (weights per
// block, the bytes of a block's scales, bits per weight code) from which every row size follows,
// and whether the lab can write the type (quantise fp32 to it) or only read it. Every layer and
// backend asks this table; only a backend's own kernel dispatch (the CPU's in cpu/quant.c,
// CUDA's in cuda/) says per type what to compute. Layouts in kernels/quant.h.
//
// Adding a weight type: a DType, its row below (dtype.c), and its kernels in the backends that
// run it (cpu/quant.c's table: quantise (if it is writable) and dequantise a block, the dot, the
// integer dot where there is one and its activation format; a plain double reference in
// cpu/reference.c).
#pragma once

#include <stddef.h>

// Activations and norms are fp32, KV caches fp32 or int8. The quantised types (q8_0 ...
// q6_k) are blocks of weights with their scales.
typedef enum {
    DTYPE_F32 = 0, DTYPE_F16, DTYPE_BF16,
    DTYPE_Q8_0, DTYPE_Q4_0, DTYPE_I8, DTYPE_I4_G32, DTYPE_I4_G64, DTYPE_I4_G128,
    DTYPE_Q4_1, DTYPE_Q5_0, DTYPE_Q4_K, DTYPE_Q6_K,
    DTYPE_COUNT
} DType;

typedef struct {
    const char *name;   // "fp32", "q8_0", "int4-g32", "q4_k", ...: the lab's options and CSVs
    int gguf_type;      // the tensor type id in GGUF files (ggml's, or ours above 1023); -1: none
    int block;          // weights per block; 0: a row is one block (plain types, int8's row scale)
    int short_last;     // 1: a row may end in one shorter block, of even length (int4-gG)
    int scale_bytes;    // bytes of a block that are not weight codes: its scales (and mins), wherever
                        // they lie in it (ahead of the codes, or after them: Q6_K's d is last)
    int code_bits;      // bits per weight code (Q5_0: 5, its fifth bits packed apart from the nibbles)
    int read_only;      // 1: the lab reads the type but cannot write it (no quantiser: ggml's k-quants,
                        // whose quantisers search scales; llama.cpp's tools make such files)
} DTypeTraits;

// The row of t; dies on a value that is no DType.
const DTypeTraits *dtype_traits(DType t);

const char *dtype_name(DType t);       // "?" for a value that is no DType
int dtype_from_name(const char *name); // -1 on an unknown name
int dtype_from_gguf_type(int id);      // -1 when no DType has that GGUF id
size_t dtype_size(DType t);            // bytes of one value of a plain type; 0 for quantised types
int dtype_is_quantized(DType t);       // its blocks carry scales
// Can quantize_row write t from fp32? (every CPU type except the read-only ones; a loop over types
// that quantises, or an option that names a target type, must skip or refuse the others)
int dtype_can_quantize(DType t);
// Weights per block in a row of cols (the whole row for types whose row is one block).
int dtype_block_elems(DType t, int cols);
// Bytes of one block holding n weights (n: the block's length; shorter for a short last block):
// scale_bytes + n * code_bits / 8, so ggml's blocks come out at their sizes (Q4_1 20, Q5_0 22,
// Q4_K 144, Q6_K 210 bytes).
size_t dtype_block_bytes(DType t, int n);
// Can a row of cols be stored in t? (whole blocks, or one short last block where allowed)
int dtype_holds_row(DType t, int cols);
size_t dtype_row_bytes(DType t, int cols); // 0 for cols <= 0
// Bits per weight of a row of cols in t, scales included.
double dtype_bits_per_weight(DType t, int cols);
