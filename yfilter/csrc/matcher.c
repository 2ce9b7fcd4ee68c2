/* yfilter._matcher: the per-message runtime of profiles with predicates, in C.
 *
 * The Python side (yfilter.native) compiles each distinct profile into the tables
 * below; this file only evaluates them. Per message: read the lxml tree into flat
 * tables (doc.c), mark the values it holds, take the profiles filed under a value the
 * message holds whose whole need it holds too (the same necessary test as
 * yfilter.keyed), and check each such candidate's path and predicates on the
 * document: top down, the elements each node of its path binds, computed once per
 * node and message from its parent's (node_set), with every (guard, element) and
 * (nested path, element) answer memoised, so profiles sharing a prefix or a
 * predicate share the work. The result is the set of ids of the matching profiles.
 *
 * Predicate code (int32 words; an operand "off" is the absolute offset of another
 * predicate in the same code array):
 *   ALWAYS                           [.]
 *   ATTR name cmp x y                @name with a comparison
 *   TEXT cmp x y                     text() with a comparison (any text node)
 *   SELF cmp x y                     . with a comparison (the string-value)
 *   POS op num                       position() op nums[num]
 *   NESTED rel                       the nested path rel selects something
 *   FUNC fn (kind x tail name)*2     contains / starts-with over two string args
 *   NOT off | AND n off* | OR n off*
 * A comparison is EXISTS, SEQ lit, SNE lit (string = / != the vocabulary string
 * lit) or NUM op num (number(value) op nums[num]). A string argument is a literal
 * (kind 0, x = lit) or string() of the first node a path selects (kind 1, x = rel or
 * -1 for the element itself; tail 0 string-value, 1 attribute name, 2 first text). */
#define _GNU_SOURCE /* memmem */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "doc.h"
#include "number.h"
#include "tables.h"

enum { OP_ALWAYS, OP_ATTR, OP_TEXT, OP_SELF, OP_POS, OP_NESTED, OP_FUNC, OP_NOT, OP_AND, OP_OR };
enum { CMP_EXISTS, CMP_SEQ, CMP_SNE, CMP_NUM };
enum { REL_EQ, REL_NE, REL_LT, REL_LE, REL_GT, REL_GE };
enum { FN_CONTAINS, FN_STARTS_WITH };
enum { AXIS_CHILD, AXIS_DESC };
enum { KEY_NONE, KEY_BASE, KEY_SELF };

/* lxml's public element struct (lxml/etree.h, struct LxmlElement): only the node. */
typedef struct {
    PyObject_HEAD
    void *doc;
    xmlNode *c_node;
} LxmlElement;

typedef struct {
    int32_t test, npreds, preds; /* preds: offset in guard_preds */
    uint32_t positional;         /* bit j: predicate j reads position() */
    int32_t cheap;               /* no nested path, function or position: not memoised */
} Guard;

typedef struct {
    int32_t axis, test, guard;
} PStep;

typedef struct {
    int32_t parent, axis, test, guard; /* node 0 is the document */
    uint32_t gen;                      /* the message whose node_set is at off */
    int32_t off;
} PNode;

typedef struct {
    int32_t node, key_table, key;
    PyObject *ids; /* a tuple of the profile ids, NULL once discarded */
} Query;

typedef struct {
    int32_t first, n;
} Range;

typedef struct {
    PyObject_HEAD
    PyTypeObject *element_type; /* lxml.etree._Element */
    Vocab vocab;
    IVec code, guard_preds, rel_steps;
    double *nums;
    int32_t nnums;
    size_t capnums;
    Guard *guards;
    int32_t nguards;
    size_t capguards;
    Range *rels;
    int32_t nrels;
    size_t caprels;
    PStep *steps; /* of the nested paths (rels) */
    PNode *nodes;
    int32_t nnodes;
    size_t capnodes;
    int32_t *node_slots; /* (parent, axis, test, guard) -> node */
    size_t node_mask;
    Query *queries;
    int32_t nqueries, live;
    size_t capqueries;
    /* Vocabulary id -> the queries filed under it, as records [query, path node,
     * nbase, nself, its need: nbase values the message must hold, nself
     * string-values of its elements], scanned in sequence; a discarded query's is -1. */
    IVec *by_base, *by_self;
    IVec always;
    size_t capkeys;
    int32_t nself_keyed;
    /* per message */
    Doc doc;
    uint32_t gen;
    uint32_t *present, *self_present, *tag_gen;
    int32_t *tag_first, *tag_last;
    IVec present_ids, self_ids;
    IVec sets, scratch; /* node_set's element sets, and its working space */
    IVec cands, hits;   /* (query, node) whose need the message meets; queries that match */
    PyObject **idv;     /* the ids to report */
    size_t capidv;
    Memo m_guard, m_rel, m_pos;
    int selves_done;
    int failed; /* out of memory during a match */
    /* totals over all messages, for stats() */
    uint64_t messages, filed_hits, need_met, matched;
} Matcher;

/* -- growth helpers -------------------------------------------------------- */

/* Per-vocabulary-id arrays follow the vocabulary's size. */
static int fit_keys(Matcher *m)
{
    size_t need = m->vocab.n, cap = m->capkeys;
    void **arrays[] = {(void **)&m->by_base, (void **)&m->by_self, (void **)&m->present,
                       (void **)&m->self_present, (void **)&m->tag_gen, (void **)&m->tag_first,
                       (void **)&m->tag_last};
    size_t sizes[] = {sizeof(IVec), sizeof(IVec), sizeof(uint32_t), sizeof(uint32_t),
                      sizeof(uint32_t), sizeof(int32_t), sizeof(int32_t)};
    for (int k = 0; k < 7; k++) {
        size_t c = m->capkeys; /* each array grows from the common capacity */
        if (grow_array(arrays[k], &c, need, sizes[k]) < 0)
            return -1;
        cap = c;
    }
    m->capkeys = cap;
    return 0;
}

/* -- evaluation on one message ----------------------------------------------- */

/* A memo key: an id below 2^40 (a guard id and predicate count for positions), an
 * element below 2^24 (doc.c refuses larger messages). */
#define KEY(id, e) (((uint64_t)(id) << 24) | (uint64_t)(uint32_t)(e))

static int guard_check(Matcher *m, int32_t g, int32_t e);
static int rel_exists(Matcher *m, int32_t r, int32_t e);

static int rel_op(int32_t op, double a, double b)
{
    switch (op) {
    case REL_EQ: return a == b;
    case REL_NE: return a != b;
    case REL_LT: return a < b;
    case REL_LE: return a <= b;
    case REL_GT: return a > b;
    default: return a >= b;
    }
}

static int compare(Matcher *m, int32_t kind, int32_t x, int32_t y, Span s)
{
    if (kind == CMP_EXISTS)
        return 1;
    if (kind == CMP_NUM)
        return rel_op(x, xpath_number(s.s, s.n), m->nums[y]);
    const VStr *lit = &m->vocab.strs[x];
    int eq = lit->n == s.n && memcmp(lit->s, s.s, s.n) == 0;
    return kind == CMP_SEQ ? eq : !eq;
}

static Span string_value(Matcher *m, int32_t e)
{
    Span s = doc_string_value(&m->doc, e);
    if (!s.s) {
        m->failed = 1;
        s = (Span){"", 0};
    }
    return s;
}

static const DAttr *find_attr(const Doc *d, int32_t e, int32_t name)
{
    const Elem *el = &d->el[e];
    for (int32_t k = 0; k < el->nattr; k++)
        if (d->at[el->attr0 + k].name == name)
            return &d->at[el->attr0 + k];
    return NULL;
}

static int name_ok(const Doc *d, int32_t e, int32_t test)
{
    return test < 0 || d->el[e].tag == test;
}

static int cmp_int(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The elements nested path r selects from e, in document order (owned by out). */
static void rel_select(Matcher *m, int32_t r, int32_t e, IVec *out)
{
    const Doc *d = &m->doc;
    IVec cur = {0}, next = {0};
    if (ivec_push(&cur, e) < 0)
        goto oom;
    Range rg = m->rels[r];
    for (int32_t i = 0; i < rg.n && cur.n; i++) {
        PStep st = m->steps[rg.first + i];
        next.n = 0;
        for (int32_t k = 0; k < cur.n; k++) {
            int32_t c = cur.a[k];
            for (int32_t j = c + 1; j < d->el[c].end; j = st.axis == AXIS_CHILD ? d->el[j].end : j + 1)
                if (name_ok(d, j, st.test) && (st.guard < 0 || guard_check(m, st.guard, j)))
                    if (ivec_push(&next, j) < 0)
                        goto oom;
        }
        qsort(next.a, (size_t)next.n, sizeof *next.a, cmp_int);
        int32_t u = 0;
        for (int32_t k = 0; k < next.n; k++)
            if (!u || next.a[u - 1] != next.a[k])
                next.a[u++] = next.a[k];
        next.n = u;
        IVec t = cur;
        cur = next;
        next = t;
    }
    free(next.a);
    *out = cur;
    return;
oom:
    m->failed = 1;
    free(cur.a);
    free(next.a);
    *out = (IVec){0};
}

static Span str_arg(Matcher *m, const int32_t *a, int32_t e)
{
    int32_t kind = a[0], x = a[1], tail = a[2], name = a[3];
    if (kind == 0)
        return (Span){m->vocab.strs[x].s, m->vocab.strs[x].n};
    IVec nodes = {0};
    if (x < 0) {
        if (ivec_push(&nodes, e) < 0)
            m->failed = 1;
    } else {
        rel_select(m, x, e, &nodes);
    }
    Span out = {"", 0};
    const Doc *d = &m->doc;
    for (int32_t k = 0; k < nodes.n; k++) {
        int32_t n = nodes.a[k];
        if (tail == 0) {
            out = string_value(m, n);
            break;
        }
        if (tail == 1) {
            const DAttr *at = find_attr(d, n, name);
            if (at) {
                out = at->value;
                break;
            }
        } else if (d->el[n].ntext) {
            out = d->tx[d->el[n].text0].s;
            break;
        }
    }
    free(nodes.a);
    return out;
}

static int contains(Span a, Span b)
{
    if (b.n == 0)
        return 1;
    if (b.n > a.n)
        return 0;
    return memmem(a.s, a.n, b.s, b.n) != NULL;
}

static int ev(Matcher *m, int32_t off, int32_t e, int32_t pos)
{
    const int32_t *c = m->code.a + off;
    const Doc *d = &m->doc;
    switch (c[0]) {
    case OP_ALWAYS:
        return 1;
    case OP_ATTR: {
        const DAttr *at = find_attr(d, e, c[1]);
        return at && compare(m, c[2], c[3], c[4], at->value);
    }
    case OP_TEXT: {
        const Elem *el = &d->el[e];
        for (int32_t k = 0; k < el->ntext; k++)
            if (compare(m, c[1], c[2], c[3], d->tx[el->text0 + k].s))
                return 1;
        return 0;
    }
    case OP_SELF:
        return compare(m, c[1], c[2], c[3], string_value(m, e));
    case OP_POS:
        return rel_op(c[1], (double)pos, m->nums[c[2]]);
    case OP_NESTED:
        return rel_exists(m, c[1], e);
    case OP_FUNC: {
        Span a = str_arg(m, c + 2, e), b = str_arg(m, c + 6, e);
        if (c[1] == FN_CONTAINS)
            return contains(a, b);
        return b.n <= a.n && memcmp(a.s, b.s, b.n) == 0;
    }
    case OP_NOT:
        return !ev(m, c[1], e, pos);
    case OP_AND:
        for (int32_t k = 0; k < c[1]; k++)
            if (!ev(m, c[2 + k], e, pos))
                return 0;
        return 1;
    default: /* OP_OR */
        for (int32_t k = 0; k < c[1]; k++)
            if (ev(m, c[2 + k], e, pos))
                return 1;
        return 0;
    }
}

static int guard_prefix(Matcher *m, int32_t g, int32_t e, int32_t k);

/* e's position among its preceding siblings that pass g's name test and its first
 * k predicates (each with its own position, as yfilter.operators.Guard does). */
static int32_t position(Matcher *m, int32_t g, int32_t e, int32_t k)
{
    const Doc *d = &m->doc;
    int32_t p = d->el[e].parent, test = m->guards[g].test, pos = 1;
    if (p < 0)
        return 1;
    for (int32_t s = p + 1; s < e; s = d->el[s].end) {
        if (!name_ok(d, s, test))
            continue;
        int32_t r;
        uint64_t key = KEY(((uint64_t)g << 10) | (uint64_t)k, s);
        if (k >= 1024 || !memo_get(&m->m_pos, key, &r)) {
            r = guard_prefix(m, g, s, k);
            if (k < 1024 && memo_put(&m->m_pos, key, r) < 0)
                m->failed = 1;
        }
        pos += r;
    }
    return pos;
}

static int guard_prefix(Matcher *m, int32_t g, int32_t e, int32_t k)
{
    const Guard *gd = &m->guards[g];
    for (int32_t j = 0; j < k; j++) {
        int32_t pos = j < 32 && (gd->positional >> j & 1) ? position(m, g, e, j) : 0;
        if (!ev(m, m->guard_preds.a[gd->preds + j], e, pos))
            return 0;
    }
    return 1;
}

static int guard_check(Matcher *m, int32_t g, int32_t e)
{
    int32_t r;
    if (m->guards[g].cheap) /* evaluating costs less than a lookup in a large memo */
        return guard_prefix(m, g, e, m->guards[g].npreds);
    if (memo_get(&m->m_guard, KEY(g, e), &r))
        return r;
    r = guard_prefix(m, g, e, m->guards[g].npreds);
    if (memo_put(&m->m_guard, KEY(g, e), r) < 0)
        m->failed = 1;
    return r;
}

static int exists_from(Matcher *m, Range rg, int32_t i, int32_t e)
{
    const Doc *d = &m->doc;
    PStep st = m->steps[rg.first + i];
    int last = i + 1 == rg.n;
    for (int32_t j = e + 1; j < d->el[e].end; j = st.axis == AXIS_CHILD ? d->el[j].end : j + 1)
        if (name_ok(d, j, st.test) && (st.guard < 0 || guard_check(m, st.guard, j))
            && (last || exists_from(m, rg, i + 1, j)))
            return 1;
    return 0;
}

static int rel_exists(Matcher *m, int32_t r, int32_t e)
{
    int32_t v;
    if (memo_get(&m->m_rel, KEY(r, e), &v))
        return v;
    v = exists_from(m, m->rels[r], 0, e);
    if (memo_put(&m->m_rel, KEY(r, e), v) < 0)
        m->failed = 1;
    return v;
}

/* The elements path node t binds (those the path from the document to t reaches
 * with every guard on the way holding), in document order: computed once per node
 * and message from its parent's (so profiles sharing a prefix share the work), kept
 * in m->sets as [n, e1 .. en]; returns its offset there. */
static int32_t node_set(Matcher *m, int32_t t)
{
    if (m->nodes[t].gen == m->gen)
        return m->nodes[t].off;
    const Doc *d = &m->doc;
    PNode n = m->nodes[t];
    IVec *out = &m->scratch;
    out->n = 0;
    int sorted = 1;
    if (n.parent == 0) {
        if (n.axis == AXIS_CHILD) {
            if (name_ok(d, 0, n.test) && (n.guard < 0 || guard_check(m, n.guard, 0))
                && ivec_push(out, 0) < 0)
                m->failed = 1;
        } else if (n.test >= 0) {
            if (m->tag_gen[n.test] == m->gen)
                for (int32_t e = m->tag_first[n.test]; e >= 0; e = d->el[e].next_same)
                    if ((n.guard < 0 || guard_check(m, n.guard, e)) && ivec_push(out, e) < 0)
                        m->failed = 1;
        } else {
            for (int32_t e = 0; e < (int32_t)d->nel; e++)
                if ((n.guard < 0 || guard_check(m, n.guard, e)) && ivec_push(out, e) < 0)
                    m->failed = 1;
        }
    } else {
        int32_t poff = node_set(m, n.parent);
        out->n = 0; /* the parent's computation used the scratch too */
        int32_t np = m->sets.a[poff], covered = -1;
        for (int32_t k = 0; k < np; k++) {
            int32_t p = m->sets.a[poff + 1 + k];
            if (n.axis == AXIS_DESC) {
                if (p < covered)
                    continue; /* inside the previous one's subtree: already scanned */
                covered = d->el[p].end;
            }
            for (int32_t j = p + 1; j < d->el[p].end; j = n.axis == AXIS_CHILD ? d->el[j].end : j + 1)
                if (name_ok(d, j, n.test) && (n.guard < 0 || guard_check(m, n.guard, j))) {
                    if (out->n && out->a[out->n - 1] > j)
                        sorted = 0;
                    if (ivec_push(out, j) < 0)
                        m->failed = 1;
                }
        }
    }
    if (!sorted)
        qsort(out->a, (size_t)out->n, sizeof *out->a, cmp_int);
    int32_t off = m->sets.n;
    if (ivec_push(&m->sets, out->n) < 0)
        m->failed = 1;
    for (int32_t k = 0; k < out->n; k++)
        if (ivec_push(&m->sets, out->a[k]) < 0)
            m->failed = 1;
    m->nodes[t].gen = m->gen;
    m->nodes[t].off = off;
    return off;
}

static void mark(Matcher *m, uint32_t *stamps, IVec *list, int32_t id)
{
    if (id < 0 || stamps[id] == m->gen)
        return;
    stamps[id] = m->gen;
    if (ivec_push(list, id) < 0)
        m->failed = 1;
}

static void collect_selves(Matcher *m)
{
    m->selves_done = 1;
    for (int32_t e = 0; e < (int32_t)m->doc.nel; e++) {
        Span s = string_value(m, e);
        mark(m, m->self_present, &m->self_ids, vocab_find(&m->vocab, s.s, s.n));
    }
}

/* Add to m->cands the queries of a posting list whose whole need the message meets. */
static void take_candidates(Matcher *m, const IVec *list)
{
    const int32_t *a = list->a;
    for (int32_t k = 0; k < list->n;) {
        int32_t q = a[k], node = a[k + 1], nb = a[k + 2], ns = a[k + 3];
        const int32_t *need = a + k + 4;
        k += 4 + nb + ns;
        m->filed_hits++;
        if (q < 0)
            continue;
        int32_t j = 0;
        while (j < nb && m->present[need[j]] == m->gen)
            j++;
        if (j < nb)
            continue;
        if (ns && !m->selves_done)
            collect_selves(m);
        while (j < nb + ns && m->self_present[need[j]] == m->gen)
            j++;
        if (j < nb + ns)
            continue;
        m->need_met++;
        __builtin_prefetch(&m->nodes[node]);
        if (ivec_push(&m->cands, q) < 0 || ivec_push(&m->cands, node) < 0)
            m->failed = 1;
    }
}

/* Bring the candidates' path nodes, guards, predicate code and ids into the cache a
 * level at a time, each level's loads independent of one another, so their misses
 * overlap: at 100k profiles these tables are megabytes, and checking candidates one
 * by one would wait for each miss in turn. Hints only: nothing here is required. */
static void prefetch_candidates(const Matcher *m)
{
    const int32_t *c = m->cands.a;
    int32_t n = m->cands.n;
    for (int32_t k = 0; k < n; k += 2) {
        const PNode *t = &m->nodes[c[k + 1]];
        if (t->guard >= 0)
            __builtin_prefetch(&m->guards[t->guard]);
        __builtin_prefetch(&m->nodes[t->parent]);
        __builtin_prefetch(&m->queries[c[k]]);
    }
    for (int32_t k = 0; k < n; k += 2) {
        const PNode *t = &m->nodes[c[k + 1]];
        if (t->guard >= 0)
            __builtin_prefetch(&m->guard_preds.a[m->guards[t->guard].preds]);
        const PNode *p = &m->nodes[t->parent];
        if (p->guard >= 0)
            __builtin_prefetch(&m->guards[p->guard]);
        __builtin_prefetch(m->queries[c[k]].ids);
    }
    for (int32_t k = 0; k < n; k += 2) {
        const PNode *t = &m->nodes[c[k + 1]];
        if (t->guard >= 0)
            __builtin_prefetch(&m->code.a[m->guard_preds.a[m->guards[t->guard].preds]]);
        const PNode *p = &m->nodes[t->parent];
        if (p->guard >= 0)
            __builtin_prefetch(&m->guard_preds.a[m->guards[p->guard].preds]);
        PyObject *ids = m->queries[c[k]].ids;
        if (ids && PyTuple_GET_SIZE(ids))
            __builtin_prefetch(PyTuple_GET_ITEM(ids, 0));
    }
}

/* The ids of the matching candidates, as a frozenset. The id strings are spread
 * over the heap: touch them all first (prefetch) so their cache misses overlap. */
static PyObject *report(Matcher *m)
{
    m->hits.n = 0;
    prefetch_candidates(m);
    for (int32_t k = 0; k < m->cands.n; k += 2) {
        int32_t q = m->cands.a[k];
        int32_t off = node_set(m, m->cands.a[k + 1]); /* before reading sets.a: it moves */
        if (m->sets.a[off] && ivec_push(&m->hits, q) < 0)
            m->failed = 1;
    }
    m->matched += (uint64_t)m->hits.n;
    for (int32_t k = 0; k < m->hits.n; k++)
        __builtin_prefetch(m->queries[m->hits.a[k]].ids);
    size_t n = 0;
    for (int32_t k = 0; k < m->hits.n; k++)
        n += (size_t)PyTuple_GET_SIZE(m->queries[m->hits.a[k]].ids);
    if (n > m->capidv) {
        PyObject **idv = realloc(m->idv, n * sizeof *idv);
        if (!idv)
            return PyErr_NoMemory();
        m->idv = idv;
        m->capidv = n;
    }
    n = 0;
    for (int32_t k = 0; k < m->hits.n; k++) {
        PyObject *ids = m->queries[m->hits.a[k]].ids;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(ids); j++) {
            PyObject *id = PyTuple_GET_ITEM(ids, j);
            __builtin_prefetch(id);
            m->idv[n++] = id;
        }
    }
    PyObject *out = PyFrozenSet_New(NULL);
    if (!out)
        return NULL;
    for (size_t k = 0; k < n; k++)
        if (PySet_Add(out, m->idv[k]) < 0) {
            Py_DECREF(out);
            return NULL;
        }
    return out;
}

static void start_message(Matcher *m)
{
    if (++m->gen == 0) { /* wrapped: old stamps could look current */
        memset(m->present, 0, m->capkeys * sizeof *m->present);
        memset(m->self_present, 0, m->capkeys * sizeof *m->self_present);
        memset(m->tag_gen, 0, m->capkeys * sizeof *m->tag_gen);
        for (int32_t t = 0; t < m->nnodes; t++)
            m->nodes[t].gen = 0;
        m->gen = 1;
    }
    m->present_ids.n = m->self_ids.n = m->sets.n = m->cands.n = 0;
    m->selves_done = m->failed = 0;
    memo_reset(&m->m_guard);
    memo_reset(&m->m_rel);
    memo_reset(&m->m_pos);
}

/* Mark the values the message holds and chain its elements by tag. */
static void index_message(Matcher *m)
{
    Doc *d = &m->doc;
    mark(m, m->present, &m->present_ids, vocab_find(&m->vocab, "", 0));
    for (int32_t e = 0; e < (int32_t)d->nel; e++) {
        Elem *el = &d->el[e];
        int32_t t = el->tag;
        if (t >= 0) {
            mark(m, m->present, &m->present_ids, t);
            if (m->tag_gen[t] != m->gen) {
                m->tag_gen[t] = m->gen;
                m->tag_first[t] = e;
            } else {
                d->el[m->tag_last[t]].next_same = e;
            }
            m->tag_last[t] = e;
        }
        for (int32_t k = 0; k < el->nattr; k++)
            mark(m, m->present, &m->present_ids, d->at[el->attr0 + k].atom);
        for (int32_t k = 0; k < el->ntext; k++)
            mark(m, m->present, &m->present_ids, d->tx[el->text0 + k].id);
    }
}

static PyObject *Matcher_match(Matcher *m, PyObject *root)
{
    if (!PyObject_TypeCheck(root, m->element_type)) {
        PyErr_Format(PyExc_TypeError, "match() needs an lxml element, not %.100s",
                     Py_TYPE(root)->tp_name);
        return NULL;
    }
    xmlNode *node = ((LxmlElement *)root)->c_node;
    if (!node || node->type != XML_ELEMENT_NODE) {
        PyErr_SetString(PyExc_TypeError, "match() needs an lxml element");
        return NULL;
    }
    start_message(m);
    int r = doc_load(&m->doc, node, &m->vocab);
    if (r == DOC_UNSUPPORTED)
        Py_RETURN_NONE;
    if (r == DOC_NOMEM)
        return PyErr_NoMemory();
    index_message(m);
    m->messages++;
    int32_t npresent = m->present_ids.n;
    for (int32_t k = 0; k < npresent; k++)
        take_candidates(m, &m->by_base[m->present_ids.a[k]]);
    if (m->nself_keyed) {
        if (!m->selves_done)
            collect_selves(m);
        for (int32_t k = 0; k < m->self_ids.n; k++)
            take_candidates(m, &m->by_self[m->self_ids.a[k]]);
    }
    take_candidates(m, &m->always);
    PyObject *out = report(m);
    if (out && m->failed) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    return out;
}

/* -- building the tables ----------------------------------------------------- */

static int as_ints(PyObject *seq, IVec *out)
{
    PyObject *fast = PySequence_Fast(seq, "expected a sequence of ints");
    if (!fast)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    out->n = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        long x = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
        if (x == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
        if (ivec_push(out, (int32_t)x) < 0) {
            Py_DECREF(fast);
            PyErr_NoMemory();
            return -1;
        }
    }
    Py_DECREF(fast);
    return 0;
}

static PyObject *Matcher_intern(Matcher *m, PyObject *arg)
{
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(arg, &n);
    if (!s)
        return NULL;
    int32_t id = vocab_intern(&m->vocab, s, (size_t)n);
    if (id < 0 || fit_keys(m) < 0)
        return PyErr_NoMemory();
    return PyLong_FromLong(id);
}

static PyObject *Matcher_emit(Matcher *m, PyObject *arg)
{
    IVec words = {0};
    if (as_ints(arg, &words) < 0) {
        free(words.a);
        return NULL;
    }
    int32_t base = m->code.n;
    for (int32_t k = 0; k < words.n; k++)
        if (ivec_push(&m->code, words.a[k]) < 0) {
            free(words.a);
            return PyErr_NoMemory();
        }
    free(words.a);
    return PyLong_FromLong(base);
}

static PyObject *Matcher_add_number(Matcher *m, PyObject *arg)
{
    double x = PyFloat_AsDouble(arg);
    if (x == -1.0 && PyErr_Occurred())
        return NULL;
    if (grow_array((void **)&m->nums, &m->capnums, m->nnums + 1, sizeof *m->nums) < 0)
        return PyErr_NoMemory();
    m->nums[m->nnums] = x;
    return PyLong_FromLong(m->nnums++);
}

/* Is the predicate at off made of tests on the element's own attributes and text? */
static int cheap(const Matcher *m, int32_t off)
{
    const int32_t *c = m->code.a + off;
    switch (c[0]) {
    case OP_ALWAYS: case OP_ATTR: case OP_TEXT: case OP_SELF:
        return 1;
    case OP_NOT:
        return cheap(m, c[1]);
    case OP_AND: case OP_OR:
        for (int32_t k = 0; k < c[1]; k++)
            if (!cheap(m, c[2 + k]))
                return 0;
        return 1;
    default:
        return 0;
    }
}

static PyObject *Matcher_add_guard(Matcher *m, PyObject *args)
{
    int test;
    PyObject *preds, *positional;
    if (!PyArg_ParseTuple(args, "iOO", &test, &preds, &positional))
        return NULL;
    IVec offs = {0}, flags = {0};
    if (as_ints(preds, &offs) < 0 || as_ints(positional, &flags) < 0 || offs.n != flags.n) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "one positional flag per predicate");
        goto fail;
    }
    if (grow_array((void **)&m->guards, &m->capguards, m->nguards + 1, sizeof *m->guards) < 0) {
        PyErr_NoMemory();
        goto fail;
    }
    Guard g = {test, offs.n, m->guard_preds.n, 0, 1};
    for (int32_t k = 0; k < offs.n; k++) {
        if (ivec_push(&m->guard_preds, offs.a[k]) < 0) {
            PyErr_NoMemory();
            goto fail;
        }
        if (flags.a[k] && k >= 32) {
            PyErr_SetString(PyExc_ValueError, "position() is supported in the first 32 predicates");
            goto fail;
        }
        if (flags.a[k])
            g.positional |= 1u << k;
        if (offs.a[k] < 0 || offs.a[k] >= m->code.n) {
            PyErr_SetString(PyExc_ValueError, "a predicate offset outside the code");
            goto fail;
        }
        g.cheap = g.cheap && !flags.a[k] && cheap(m, offs.a[k]);
    }
    free(offs.a);
    free(flags.a);
    m->guards[m->nguards] = g;
    return PyLong_FromLong(m->nguards++);
fail:
    free(offs.a);
    free(flags.a);
    return NULL;
}

static PyObject *Matcher_add_rel(Matcher *m, PyObject *arg)
{
    IVec w = {0};
    if (as_ints(arg, &w) < 0 || w.n % 3 || !w.n) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "a nested path is (axis, test, guard) triples");
        free(w.a);
        return NULL;
    }
    if (grow_array((void **)&m->rels, &m->caprels, m->nrels + 1, sizeof *m->rels) < 0)
        goto oom;
    Range rg = {m->rel_steps.n / 3, w.n / 3};
    for (int32_t k = 0; k < w.n; k++)
        if (ivec_push(&m->rel_steps, w.a[k]) < 0)
            goto oom;
    m->steps = (PStep *)m->rel_steps.a;
    free(w.a);
    m->rels[m->nrels] = rg;
    return PyLong_FromLong(m->nrels++);
oom:
    free(w.a);
    return PyErr_NoMemory();
}

static size_t node_hash(const PNode *n)
{
    return (size_t)hash_u64(((uint64_t)(uint32_t)n->parent << 32 | (uint32_t)n->guard)
                            ^ hash_u64((uint64_t)(uint32_t)n->test << 1 | (uint64_t)n->axis));
}

static int node_grow(Matcher *m)
{
    size_t mask = m->node_mask ? m->node_mask * 2 + 1 : 255;
    int32_t *slots = malloc((mask + 1) * sizeof *slots);
    if (!slots)
        return -1;
    memset(slots, 0xff, (mask + 1) * sizeof *slots);
    for (int32_t id = 1; id < m->nnodes; id++) {
        size_t i = node_hash(&m->nodes[id]) & mask;
        while (slots[i] >= 0)
            i = (i + 1) & mask;
        slots[i] = id;
    }
    free(m->node_slots);
    m->node_slots = slots;
    m->node_mask = mask;
    return 0;
}

/* The shared path node (parent, axis, test, guard), made if new; -1 on OOM. */
static int32_t path_node(Matcher *m, PNode key)
{
    size_t i = node_hash(&key) & m->node_mask;
    for (; m->node_slots[i] >= 0; i = (i + 1) & m->node_mask) {
        const PNode *n = &m->nodes[m->node_slots[i]];
        if (n->parent == key.parent && n->axis == key.axis && n->test == key.test
            && n->guard == key.guard)
            return m->node_slots[i];
    }
    if ((size_t)(m->nnodes + 1) * 2 > m->node_mask + 1) {
        if (node_grow(m) < 0)
            return -1;
        return path_node(m, key);
    }
    if (grow_array((void **)&m->nodes, &m->capnodes, m->nnodes + 1, sizeof *m->nodes) < 0)
        return -1;
    m->nodes[m->nnodes] = key;
    m->node_slots[i] = m->nnodes;
    return m->nnodes++;
}

static IVec *posting_list(Matcher *m, int32_t table, int32_t key)
{
    return table == KEY_BASE ? &m->by_base[key] : table == KEY_SELF ? &m->by_self[key] : &m->always;
}

static PyObject *Matcher_add_query(Matcher *m, PyObject *args)
{
    PyObject *steps, *need, *selves, *ids;
    int key_table, key;
    if (!PyArg_ParseTuple(args, "OOOiiO!", &steps, &need, &selves, &key_table, &key,
                          &PyTuple_Type, &ids))
        return NULL;
    if (key_table != KEY_NONE && (key < 0 || (size_t)key >= m->vocab.n)) {
        PyErr_SetString(PyExc_ValueError, "the key is not an interned value");
        return NULL;
    }
    IVec w = {0}, nb = {0}, ns = {0};
    if (as_ints(steps, &w) < 0 || as_ints(need, &nb) < 0 || as_ints(selves, &ns) < 0)
        goto fail;
    if (w.n % 3 || !w.n) {
        PyErr_SetString(PyExc_ValueError, "a path is (axis, test, guard) triples");
        goto fail;
    }
    if (grow_array((void **)&m->queries, &m->capqueries, m->nqueries + 1, sizeof *m->queries) < 0)
        goto oom;
    int32_t node = 0;
    for (int32_t k = 0; k < w.n; k += 3) {
        node = path_node(m, (PNode){node, w.a[k], w.a[k + 1], w.a[k + 2], 0, 0});
        if (node < 0)
            goto oom;
    }
    IVec *list = posting_list(m, key_table, key);
    int32_t at = list->n;
    int ok = ivec_push(list, m->nqueries) == 0 && ivec_push(list, node) == 0
          && ivec_push(list, nb.n) == 0 && ivec_push(list, ns.n) == 0;
    for (int32_t k = 0; ok && k < nb.n; k++)
        ok = ivec_push(list, nb.a[k]) == 0;
    for (int32_t k = 0; ok && k < ns.n; k++)
        ok = ivec_push(list, ns.a[k]) == 0;
    if (!ok) {
        list->n = at;
        goto oom;
    }
    m->nself_keyed += key_table == KEY_SELF;
    Py_INCREF(ids);
    m->queries[m->nqueries] = (Query){node, key_table, key, ids};
    m->live++;
    free(w.a);
    free(nb.a);
    free(ns.a);
    return PyLong_FromLong(m->nqueries++);
oom:
    PyErr_NoMemory();
fail:
    free(w.a);
    free(nb.a);
    free(ns.a);
    return NULL;
}

static Query *query_arg(Matcher *m, PyObject *arg)
{
    long q = PyLong_AsLong(arg);
    if (q == -1 && PyErr_Occurred())
        return NULL;
    if (q < 0 || q >= m->nqueries || !m->queries[q].ids) {
        PyErr_Format(PyExc_KeyError, "no query %ld", q);
        return NULL;
    }
    return &m->queries[q];
}

static PyObject *Matcher_set_ids(Matcher *m, PyObject *args)
{
    PyObject *qarg, *ids;
    if (!PyArg_ParseTuple(args, "OO!", &qarg, &PyTuple_Type, &ids))
        return NULL;
    Query *q = query_arg(m, qarg);
    if (!q)
        return NULL;
    Py_INCREF(ids);
    Py_SETREF(q->ids, ids);
    Py_RETURN_NONE;
}

static PyObject *Matcher_discard(Matcher *m, PyObject *arg)
{
    Query *q = query_arg(m, arg);
    if (!q)
        return NULL;
    int32_t qid = (int32_t)(q - m->queries);
    IVec *list = posting_list(m, q->key_table, q->key);
    for (int32_t k = 0; k < list->n; k += 4 + list->a[k + 2] + list->a[k + 3])
        if (list->a[k] == qid)
            list->a[k] = -1;
    Py_CLEAR(q->ids);
    m->live--;
    Py_RETURN_NONE;
}

static PyObject *Matcher_stats(Matcher *m, PyObject *Py_UNUSED(ignored))
{
    return Py_BuildValue("{s:i,s:i,s:n,s:i,s:i,s:i,s:K,s:K,s:K,s:K}", "queries", m->live,
                         "discarded", m->nqueries - m->live, "values", (Py_ssize_t)m->vocab.n,
                         "guards", m->nguards, "nested_paths", m->nrels, "path_nodes",
                         m->nnodes - 1, "messages", m->messages, "filed_hits", m->filed_hits,
                         "need_met", m->need_met, "matched", m->matched);
}

/* -- the type ----------------------------------------------------------------- */

static int Matcher_init(Matcher *m, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"element_type", NULL};
    PyObject *etype;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!", kwlist, &PyType_Type, &etype))
        return -1;
    if (m->nodes) {
        PyErr_SetString(PyExc_RuntimeError, "Matcher is already initialised");
        return -1;
    }
    doc_init(&m->doc);
    if (vocab_init(&m->vocab) < 0 || memo_init(&m->m_guard) < 0
        || memo_init(&m->m_rel) < 0 || memo_init(&m->m_pos) < 0 || node_grow(m) < 0
        || grow_array((void **)&m->nodes, &m->capnodes, 1, sizeof *m->nodes) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    Py_INCREF(etype);
    m->element_type = (PyTypeObject *)etype;
    m->nodes[0] = (PNode){-1, 0, -1, -1, 0, 0};
    m->nnodes = 1;
    return 0;
}

static void Matcher_dealloc(Matcher *m)
{
    for (int32_t k = 0; k < m->nqueries; k++)
        Py_XDECREF(m->queries[k].ids);
    for (size_t k = 0; k < m->capkeys; k++) {
        free(m->by_base[k].a);
        free(m->by_self[k].a);
    }
    free(m->by_base);
    free(m->by_self);
    free(m->always.a);
    free(m->present);
    free(m->self_present);
    free(m->tag_gen);
    free(m->tag_first);
    free(m->tag_last);
    free(m->present_ids.a);
    free(m->self_ids.a);
    free(m->sets.a);
    free(m->scratch.a);
    free(m->code.a);
    free(m->guard_preds.a);
    free(m->cands.a);
    free(m->hits.a);
    free(m->idv);
    free(m->rel_steps.a);
    free(m->nums);
    free(m->guards);
    free(m->rels);
    free(m->nodes);
    free(m->node_slots);
    free(m->queries);
    memo_free(&m->m_guard);
    memo_free(&m->m_rel);
    memo_free(&m->m_pos);
    doc_free(&m->doc);
    vocab_free(&m->vocab);
    Py_XDECREF(m->element_type);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

static PyMethodDef Matcher_methods[] = {
    {"intern", (PyCFunction)Matcher_intern, METH_O, "intern(s) -> id of a vocabulary string"},
    {"emit", (PyCFunction)Matcher_emit, METH_O, "emit(words) -> offset of predicate code"},
    {"add_number", (PyCFunction)Matcher_add_number, METH_O, "add_number(x) -> index"},
    {"add_guard", (PyCFunction)Matcher_add_guard, METH_VARARGS,
     "add_guard(test, pred_offsets, positional_flags) -> guard id"},
    {"add_rel", (PyCFunction)Matcher_add_rel, METH_O,
     "add_rel([axis, test, guard, ...]) -> nested path id"},
    {"add_query", (PyCFunction)Matcher_add_query, METH_VARARGS,
     "add_query(steps, need, selves, key_table, key, ids) -> query id (ids: a tuple)"},
    {"set_ids", (PyCFunction)Matcher_set_ids, METH_VARARGS,
     "set_ids(query id, ids) -> the ids a query reports from now on"},
    {"discard", (PyCFunction)Matcher_discard, METH_O, "discard(query id)"},
    {"match", (PyCFunction)Matcher_match, METH_O,
     "match(root) -> frozenset of ids, or None for a document the C reader does not model"},
    {"stats", (PyCFunction)Matcher_stats, METH_NOARGS, "sizes of the tables"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject MatcherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "yfilter._matcher.Matcher",
    .tp_basicsize = sizeof(Matcher),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Matcher(element_type): compiled profiles with predicates, matched in C (see yfilter.native).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Matcher_init,
    .tp_dealloc = (destructor)Matcher_dealloc,
    .tp_methods = Matcher_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "yfilter._matcher",
    "The native per-message runtime of yfilter (see yfilter.native).", -1, NULL,
};

PyMODINIT_FUNC PyInit__matcher(void)
{
    if (PyType_Ready(&MatcherType) < 0)
        return NULL;
    PyObject *mod = PyModule_Create(&module);
    if (!mod)
        return NULL;
    Py_INCREF(&MatcherType);
    if (PyModule_AddObject(mod, "Matcher", (PyObject *)&MatcherType) < 0) {
        Py_DECREF(&MatcherType);
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
