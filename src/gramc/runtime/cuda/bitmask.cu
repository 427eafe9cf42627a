// gramc CUDA kernels, part 1: packed token bitmasks applied to logits in place.
//
// The mask layout is fixed in gramc/bitmask.py: a row is W uint32 words and token j
// is bit j % 32 of word j / 32 (least significant bit first); bits past the vocabulary are 0.
// Reference semantics (numpy: gramc.bitmask.apply_bitmask), for each listed row i:
//
//     lr = logit_rows ? logit_rows[i] : i        // row of the logits
//     mr = mask_rows ? mask_rows[i] : i          // row of the mask; < 0: allow nothing
//     for j in range(width):
//         allowed = mr >= 0 and j < 32 * mask_words and (mask[mr][j / 32] >> (j % 32)) & 1
//         if not allowed: logits[lr][j] = -inf
//
// Logits are written as bit patterns, so one body serves fp32 (uint32 storage) and fp16 /
// bf16 (uint16 storage): -inf is 0xFF800000 in fp32, 0xFC00 in fp16 and 0xFF80 in bf16.
// Only disallowed elements are written; allowed ones are never read or written.
//
// Host emulation contract (tests/test_cuda_kernels.py compiles this file as C++ with
// GRAMC_HOST_EMULATION and runs every thread of the grid sequentially): no shared memory,
// no __syncthreads, no warp intrinsics or atomics, and every output element is written by
// exactly one thread, so the result cannot depend on the order threads run in. Parameters are
// pointers, int or long long only (gramc/runtime/cuda/source.py parses the signatures).

#ifndef GRAMC_BITMASK_CU
#define GRAMC_BITMASK_CU

#ifdef GRAMC_HOST_EMULATION
#include "gramc_host_emulation.h"
#endif

#define GRAMC_NEG_INF_F32 0xFF800000u
#define GRAMC_NEG_INF_F16 ((unsigned short)0xFC00u)
#define GRAMC_NEG_INF_BF16 ((unsigned short)0xFF80u)

// Grid-stride loops: x walks columns (or words) of a row, y walks rows.
#define GRAMC_FOR_X(j, n) \
    for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < (n); \
         j += (long long)gridDim.x * blockDim.x)
#define GRAMC_FOR_Y(i, n) for (long long i = blockIdx.y; i < (n); i += gridDim.y)

// Set the disallowed columns of one logits row to -inf. `words` may be null (allow nothing);
// columns at or past 32 * n_words are disallowed.
template <typename T>
__device__ __forceinline__ void gramc_mask_row(T* __restrict__ row, long long width,
                                               const unsigned int* __restrict__ words,
                                               long long n_words, T neg_inf) {
    GRAMC_FOR_X(j, width) {
        long long k = j >> 5;
        unsigned int w = (words != 0 && k < n_words) ? words[k] : 0u;
        if (!((w >> (j & 31)) & 1u)) row[j] = neg_inf;
    }
}

template <typename T>
__device__ __forceinline__ void gramc_apply_bitmask(
    T* __restrict__ logits, long long logits_stride, long long width, int n_rows,
    const int* __restrict__ logit_rows, const unsigned int* __restrict__ mask,
    long long mask_stride, long long mask_words, const int* __restrict__ mask_rows, T neg_inf) {
    GRAMC_FOR_Y(i, n_rows) {
        long long lr = logit_rows ? logit_rows[i] : i;
        long long mr = mask_rows ? mask_rows[i] : i;
        const unsigned int* words = mr >= 0 ? mask + mr * mask_stride : 0;
        gramc_mask_row<T>(logits + lr * logits_stride, width, words, mask_words, neg_inf);
    }
}

extern "C" __global__ void gramc_apply_bitmask_f32(
    unsigned int* logits, long long logits_stride, long long width, int n_rows,
    const int* logit_rows, const unsigned int* mask, long long mask_stride, long long mask_words,
    const int* mask_rows) {
    gramc_apply_bitmask<unsigned int>(logits, logits_stride, width, n_rows, logit_rows, mask,
                                      mask_stride, mask_words, mask_rows, GRAMC_NEG_INF_F32);
}

extern "C" __global__ void gramc_apply_bitmask_f16(
    unsigned short* logits, long long logits_stride, long long width, int n_rows,
    const int* logit_rows, const unsigned int* mask, long long mask_stride, long long mask_words,
    const int* mask_rows) {
    gramc_apply_bitmask<unsigned short>(logits, logits_stride, width, n_rows, logit_rows, mask,
                                        mask_stride, mask_words, mask_rows, GRAMC_NEG_INF_F16);
}

extern "C" __global__ void gramc_apply_bitmask_bf16(
    unsigned short* logits, long long logits_stride, long long width, int n_rows,
    const int* logit_rows, const unsigned int* mask, long long mask_stride, long long mask_words,
    const int* mask_rows) {
    gramc_apply_bitmask<unsigned short>(logits, logits_stride, width, n_rows, logit_rows, mask,
                                        mask_stride, mask_words, mask_rows, GRAMC_NEG_INF_BF16);
}

// Copy mask rows: dst row (dst_rows ? dst_rows[i] : i) = src row i, words past src_words
// zeroed up to dst_words. Used to place uploaded (CPU-computed) masks into a caller's buffer.
extern "C" __global__ void gramc_scatter_bitmask_rows(
    unsigned int* dst, long long dst_stride, long long dst_words, int n_rows,
    const int* dst_rows, const unsigned int* src, long long src_stride, long long src_words) {
    GRAMC_FOR_Y(i, n_rows) {
        unsigned int* out = dst + (dst_rows ? (long long)dst_rows[i] : i) * dst_stride;
        const unsigned int* in = src + i * src_stride;
        GRAMC_FOR_X(k, dst_words) out[k] = k < src_words ? in[k] : 0u;
    }
}

// dst[index[i]] = values[i] for i < n (int32): per-slot state and table updates.
extern "C" __global__ void gramc_scatter_i32(int n, const int* index, const int* values,
                                             int* dst) {
    GRAMC_FOR_X(i, n) dst[index[i]] = values[i];
}

#endif  // GRAMC_BITMASK_CU
