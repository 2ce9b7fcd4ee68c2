#include "tables.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)
#define BIG_TABLE (2 * HUGE_PAGE)

uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)n;
    uint64_t w;
    while (n >= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
    return hash_u64(h);
}

/* -- vocabulary --------------------------------------------------------------- */

int vocab_init(Vocab *v)
{
    memset(v, 0, sizeof *v);
    v->mask = 63;
    v->slots = malloc((v->mask + 1) * sizeof *v->slots);
    if (!v->slots)
        return -1;
    memset(v->slots, 0xff, (v->mask + 1) * sizeof *v->slots);
    return 0;
}

void vocab_free(Vocab *v)
{
    for (size_t i = 0; i < v->n; i++)
        free(v->strs[i].s);
    free(v->strs);
    free(v->slots);
    memset(v, 0, sizeof *v);
}

int32_t vocab_find(const Vocab *v, const char *s, size_t n)
{
    uint64_t h = hash_bytes(s, n);
    for (size_t i = h & v->mask;; i = (i + 1) & v->mask) {
        int32_t id = v->slots[i];
        if (id < 0)
            return -1;
        const VStr *x = &v->strs[id];
        if (x->h == h && x->n == n && memcmp(x->s, s, n) == 0)
            return id;
    }
}

static int vocab_grow(Vocab *v)
{
    size_t mask = v->mask * 2 + 1;
    int32_t *slots = malloc((mask + 1) * sizeof *slots);
    if (!slots)
        return -1;
    memset(slots, 0xff, (mask + 1) * sizeof *slots);
    for (size_t id = 0; id < v->n; id++) {
        size_t i = v->strs[id].h & mask;
        while (slots[i] >= 0)
            i = (i + 1) & mask;
        slots[i] = (int32_t)id;
    }
    free(v->slots);
    v->slots = slots;
    v->mask = mask;
    return 0;
}

int32_t vocab_intern(Vocab *v, const char *s, size_t n)
{
    int32_t id = vocab_find(v, s, n);
    if (id >= 0)
        return id;
    if ((v->n + 1) * 2 > v->mask + 1 && vocab_grow(v) < 0)
        return -1;
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        VStr *strs = realloc(v->strs, cap * sizeof *strs);
        if (!strs)
            return -1;
        v->strs = strs;
        v->cap = cap;
    }
    char *copy = malloc(n ? n : 1);
    if (!copy)
        return -1;
    memcpy(copy, s, n);
    uint64_t h = hash_bytes(s, n);
    id = (int32_t)v->n++;
    v->strs[id] = (VStr){copy, n, h};
    size_t i = h & v->mask;
    while (v->slots[i] >= 0)
        i = (i + 1) & v->mask;
    v->slots[i] = id;
    return id;
}

/* -- memo --------------------------------------------------------------------- */

int memo_init(Memo *m)
{
    m->mask = 255;
    m->used = 0;
    m->gen = 1;
    m->e = calloc(m->mask + 1, sizeof *m->e);
    return m->e ? 0 : -1;
}

void memo_free(Memo *m)
{
    free(m->e);
    m->e = NULL;
}

void memo_reset(Memo *m)
{
    m->used = 0;
    if (++m->gen == 0) {  /* wrapped: old entries could look current */
        memset(m->e, 0, (m->mask + 1) * sizeof *m->e);
        m->gen = 1;
    }
}

static int memo_grow(Memo *m)
{
    size_t mask = m->mask * 2 + 1;
    MemoEntry *e = calloc(mask + 1, sizeof *e);
    if (!e)
        return -1;
    for (size_t j = 0; j <= m->mask; j++) {
        if (m->e[j].gen != m->gen)
            continue;
        size_t i = hash_u64(m->e[j].key) & mask;
        while (e[i].gen == m->gen)
            i = (i + 1) & mask;
        e[i] = m->e[j];
    }
    free(m->e);
    m->e = e;
    m->mask = mask;
    return 0;
}

int memo_put(Memo *m, uint64_t key, int32_t val)
{
    if ((m->used + 1) * 2 > m->mask + 1 && memo_grow(m) < 0)
        return -1;
    for (size_t i = hash_u64(key) & m->mask;; i = (i + 1) & m->mask) {
        MemoEntry *e = &m->e[i];
        if (e->gen != m->gen) {
            *e = (MemoEntry){key, m->gen, val};
            m->used++;
            return 0;
        }
        if (e->key == key) {
            e->val = val;
            return 0;
        }
    }
}

int grow_array(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t cap2 = *cap ? *cap : 16;
    while (cap2 < need)
        cap2 *= 2;
    char *q = realloc(*p, cap2 * size);
    if (!q)
        return -1;
    memset(q + *cap * size, 0, (cap2 - *cap) * size);
    *p = q;
    *cap = cap2;
    return 0;
}

int ivec_reserve(IVec *v, int32_t need)
{
    if (need <= v->cap)
        return 0;
    int32_t cap = v->cap ? v->cap : 4;
    while (cap < need)
        cap *= 2;
    size_t bytes = (size_t)cap * sizeof *v->a;
    int32_t *a;
    if (bytes < BIG_TABLE) {
        a = realloc(v->a, bytes);
    } else {
        /* A large table is read at random (the matcher's blocks): on huge pages, if
         * the kernel grants them, a read misses the TLB far less often. Asked for
         * before the pages are first touched, so the copy below faults them in. */
        void *p = NULL;
        if (posix_memalign(&p, HUGE_PAGE, bytes) != 0)
            return -1;
        madvise(p, bytes, MADV_HUGEPAGE);
        a = p;
        if (v->n)
            memcpy(a, v->a, (size_t)v->n * sizeof *a);
        free(v->a);
    }
    if (!a)
        return -1;
    v->a = a;
    v->cap = cap;
    return 0;
}
