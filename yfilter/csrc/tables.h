/* Hash tables of the native matcher: interned strings and per-message memos. */
#ifndef ONYX_TABLES_H
#define ONYX_TABLES_H

#include <stddef.h>
#include <stdint.h>

uint64_t hash_bytes(const char *s, size_t n);

static inline uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27; x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Byte strings interned to dense ids 0, 1, 2, ... (the vocabulary of the profiles). */
typedef struct {
    char *s;
    size_t n;
    uint64_t h;
} VStr;

typedef struct {
    int32_t *slots;  /* id, or -1: empty */
    size_t mask;
    VStr *strs;
    size_t n, cap;
} Vocab;

int vocab_init(Vocab *v);
void vocab_free(Vocab *v);
/* The id of s, or -1. */
int32_t vocab_find(const Vocab *v, const char *s, size_t n);
/* The id of s, added if new; -1 when out of memory. */
int32_t vocab_intern(Vocab *v, const char *s, size_t n);

/* A map from 64-bit keys to int32 values that forgets everything at memo_reset (a
 * new generation; old entries count as empty), so a message starts afresh without
 * clearing memory. Callers never hold a pointer into it across another call. */
typedef struct {
    uint64_t key;
    uint32_t gen;
    int32_t val;
} MemoEntry;

typedef struct {
    MemoEntry *e;
    size_t mask, used;
    uint32_t gen;
} Memo;

int memo_init(Memo *m);
void memo_free(Memo *m);
void memo_reset(Memo *m);
/* 1 and *val if key is in the current generation, else 0. */
static inline int memo_get(const Memo *m, uint64_t key, int32_t *val)
{
    for (size_t i = hash_u64(key) & m->mask;; i = (i + 1) & m->mask) {
        const MemoEntry *e = &m->e[i];
        if (e->gen != m->gen)
            return 0;
        if (e->key == key) {
            *val = e->val;
            return 1;
        }
    }
}
/* 0, or -1 when out of memory. */
int memo_put(Memo *m, uint64_t key, int32_t val);

/* Make room for need items of size bytes in *p (capacity *cap, doubled as needed);
 * the new items are zeroed. 0, or -1 when out of memory (*p is then unchanged). */
int grow_array(void **p, size_t *cap, size_t need, size_t size);

/* A growable vector of int32. */
typedef struct {
    int32_t *a;
    int32_t n, cap;
} IVec;

/* Room for need elements: 0, or -1 when out of memory. */
int ivec_reserve(IVec *v, int32_t need);

/* 0, or -1 when out of memory. */
static inline int ivec_push(IVec *v, int32_t x)
{
    if (v->n == v->cap && ivec_reserve(v, v->n + 1) < 0)
        return -1;
    v->a[v->n++] = x;
    return 0;
}

#endif
