// gramc CUDA kernels, part 2: DFA artifacts stepped entirely on the device.
//
// Every request of a batch owns a slot. Per slot the device holds `states[slot]` (the DFA
// state, or -1 once end-of-sequence was committed) and `table_of[slot]` (an index into an
// array of gramc_dfa_table descriptors, one per uploaded artifact). A kernel call lists rows
// i < n_rows, each naming its slot (`slots[i]`, or slot i when null).
//
// Reference semantics (numpy: gramc.runtime.batch, the CPU path of BatchMatcher):
//
//   mask of row i    = tab.words[s] if s >= 0 else all zero       (s = states[slot], EOS
//                      is already set in the words of accepting states)
//   advance by token = if 0 <= t < vocab and next(s, t) != 0: states[slot] = next(s, t)
//                      elif s >= 0 and accept[s] and t is an EOS id: states[slot] = -1
//                      else refused (state unchanged); accepted[i] says which happened
//
// next(s, t) reads the dense [n_states, vocab] table when the artifact has one, else binary-
// searches t in the CSR row of s; 0 is the dead state (token not allowed). The host checks
// every array before upload (gramc/runtime/cuda/tables.py): indices are in range.
// Emulation contract: see bitmask.cu.

#ifndef GRAMC_DFA_CU
#define GRAMC_DFA_CU

#include "bitmask.cu"

// 11 fields of 8 bytes, no padding: packed by gramc/runtime/cuda/tables.py (TABLE_DTYPE).
struct gramc_dfa_table {
    const unsigned int* words;    // [n_states, n_words] packed mask rows, EOS included
    const int* next_dense;        // [n_states, vocab_size] next states, or null
    const long long* indptr;      // [n_states + 1] CSR row bounds
    const int* ids;               // [nnz] allowed token ids, ascending within each row
    const int* next;              // [nnz] the state each id leads to
    const unsigned char* accept;  // [n_states] 1 where the state accepts
    const int* eos;               // [n_eos] end-of-sequence token ids
    long long n_states;
    long long n_words;
    long long vocab_size;
    long long n_eos;
};

// The mask words of a slot (null when it has ended) and their count.
__device__ __forceinline__ const unsigned int* gramc_slot_words(
    const gramc_dfa_table* tables, const int* table_of, const int* states, long long slot,
    long long* n_words) {
    int s = states[slot];
    if (s < 0) {
        *n_words = 0;
        return 0;
    }
    const gramc_dfa_table* tab = tables + table_of[slot];
    *n_words = tab->n_words;
    return tab->words + (long long)s * tab->n_words;
}

__device__ __forceinline__ int gramc_dfa_next(const gramc_dfa_table* tab, int s, int t) {
    if (tab->next_dense) return tab->next_dense[(long long)s * tab->vocab_size + t];
    long long lo = tab->indptr[s], end = tab->indptr[s + 1], hi = end;
    while (lo < hi) {
        long long mid = lo + ((hi - lo) >> 1);
        if (tab->ids[mid] < t) lo = mid + 1;
        else hi = mid;
    }
    return (lo < end && tab->ids[lo] == t) ? tab->next[lo] : 0;
}

__device__ __forceinline__ bool gramc_is_eos(const gramc_dfa_table* tab, long long t) {
    for (long long k = 0; k < tab->n_eos; ++k)
        if (tab->eos[k] == t) return true;
    return false;
}

// Gather each row's mask straight into its logits row.
template <typename T>
__device__ __forceinline__ void gramc_dfa_apply(
    T* __restrict__ logits, long long logits_stride, long long width, int n_rows,
    const int* __restrict__ logit_rows, const int* __restrict__ slots,
    const int* __restrict__ states, const int* __restrict__ table_of,
    const gramc_dfa_table* __restrict__ tables, T neg_inf) {
    GRAMC_FOR_Y(i, n_rows) {
        long long lr = logit_rows ? logit_rows[i] : i;
        long long n_words;
        const unsigned int* words =
            gramc_slot_words(tables, table_of, states, slots ? slots[i] : i, &n_words);
        gramc_mask_row<T>(logits + lr * logits_stride, width, words, n_words, neg_inf);
    }
}

extern "C" __global__ void gramc_dfa_apply_f32(
    unsigned int* logits, long long logits_stride, long long width, int n_rows,
    const int* logit_rows, const int* slots, const int* states, const int* table_of,
    const gramc_dfa_table* tables) {
    gramc_dfa_apply<unsigned int>(logits, logits_stride, width, n_rows, logit_rows, slots, states,
                         table_of, tables, GRAMC_NEG_INF_F32);
}

extern "C" __global__ void gramc_dfa_apply_f16(
    unsigned short* logits, long long logits_stride, long long width, int n_rows,
    const int* logit_rows, const int* slots, const int* states, const int* table_of,
    const gramc_dfa_table* tables) {
    gramc_dfa_apply<unsigned short>(logits, logits_stride, width, n_rows, logit_rows, slots, states,
                         table_of, tables, GRAMC_NEG_INF_F16);
}

extern "C" __global__ void gramc_dfa_apply_bf16(
    unsigned short* logits, long long logits_stride, long long width, int n_rows,
    const int* logit_rows, const int* slots, const int* states, const int* table_of,
    const gramc_dfa_table* tables) {
    gramc_dfa_apply<unsigned short>(logits, logits_stride, width, n_rows, logit_rows, slots, states,
                         table_of, tables, GRAMC_NEG_INF_BF16);
}

// Gather each row's mask into a packed bitmask buffer (out_words words per row, zero-padded).
extern "C" __global__ void gramc_dfa_fill_bitmask(
    unsigned int* out, long long out_stride, long long out_words, int n_rows,
    const int* out_rows, const int* slots, const int* states, const int* table_of,
    const gramc_dfa_table* tables) {
    GRAMC_FOR_Y(i, n_rows) {
        unsigned int* row = out + (out_rows ? (long long)out_rows[i] : i) * out_stride;
        long long n_words;
        const unsigned int* words =
            gramc_slot_words(tables, table_of, states, slots ? slots[i] : i, &n_words);
        GRAMC_FOR_X(k, out_words) row[k] = k < n_words ? words[k] : 0u;
    }
}

// Advance each row's state by its sampled token. Row i reads tokens[r * token_stride] and
// writes accepted[r] (when not null), r = rows ? rows[i] : i: the rows of a batch that hold
// DFA requests can be a subset of the rows the sampler produced tokens for.
template <typename Tok>
__device__ __forceinline__ void gramc_dfa_advance(
    int n_rows, const Tok* __restrict__ tokens, long long token_stride,
    const int* __restrict__ rows, const int* __restrict__ slots, int* __restrict__ states,
    const int* __restrict__ table_of, const gramc_dfa_table* __restrict__ tables,
    unsigned char* __restrict__ accepted) {
    GRAMC_FOR_X(i, n_rows) {
        long long r = rows ? rows[i] : i;
        long long slot = slots ? slots[i] : i;
        long long t = (long long)tokens[r * token_stride];
        int s = states[slot];
        unsigned char ok = 0;
        if (s >= 0) {
            const gramc_dfa_table* tab = tables + table_of[slot];
            if (t >= 0 && t < tab->vocab_size) {
                int nxt = gramc_dfa_next(tab, s, (int)t);
                if (nxt != 0) {
                    states[slot] = nxt;
                    ok = 1;
                } else if (tab->accept[s] && gramc_is_eos(tab, t)) {
                    states[slot] = -1;
                    ok = 1;
                }
            }
        }
        if (accepted) accepted[r] = ok;
    }
}

extern "C" __global__ void gramc_dfa_advance_i32(
    int n_rows, const int* tokens, long long token_stride, const int* rows, const int* slots,
    int* states, const int* table_of, const gramc_dfa_table* tables, unsigned char* accepted) {
    gramc_dfa_advance<int>(n_rows, tokens, token_stride, rows, slots, states, table_of, tables,
                           accepted);
}

extern "C" __global__ void gramc_dfa_advance_i64(
    int n_rows, const long long* tokens, long long token_stride, const int* rows,
    const int* slots, int* states, const int* table_of, const gramc_dfa_table* tables,
    unsigned char* accepted) {
    gramc_dfa_advance<long long>(n_rows, tokens, token_stride, rows, slots, states, table_of,
                                 tables, accepted);
}

#endif  // GRAMC_DFA_CU
