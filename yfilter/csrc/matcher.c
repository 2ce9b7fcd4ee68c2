/* yfilter._matcher: the per-message runtime of profiles with predicates, in C.
 *
 * The Python side (yfilter.native) compiles each distinct profile into the tables
 * below; this file only evaluates them. Per message: read the lxml tree (or a
 * decoded message's columns) into flat tables (doc.c), mark the values it holds,
 * take the profiles filed under a value the message holds whose whole need it holds
 * too (the same necessary test as yfilter.keyed, plus the (parent, child) tag pairs
 * of its child steps), and check each such candidate's path and predicates on the
 * document: from each element with the tag of its last named step (or, where fewer,
 * holding the attribute or text value its anchor step requires), the steps before on
 * the element's ancestors, the steps after on its descendants (block_matches).
 * Profiles are filed under the value the compiler thought rarest, and after 64
 * messages (then 16 times as many each time) again under the value the messages
 * held least often (rekey), the blocks copied then in the order of the
 * lists (relayout_blocks) and the id strings to report into one stretch of memory
 * (copy_ids). Everything a candidate's check reads is in one run of words, its
 * block, loaded a few candidates ahead, so that at 100k profiles the check costs
 * about one cache miss; besides the block it only reads the message's own small
 * tables. Nested paths (and guards that read position()) are memoised per (nested
 * path, element), and first steps from the root checked once per message (root_holds),
 * so profiles sharing them share the work.
 * The result is the set of ids of the matching profiles.
 *
 * Block (see Matcher_add_query): query, nsteps, anchor step and its value (anchor_of;
 * -1 -1: none), last step that names a tag, first step's id in m->roots (-1: it is on
 * the descendant axis), the ids in m->tails of the steps after the last named step
 * and after the anchor step (-1: none, or only '*' steps without predicates), how
 * many such '*' steps follow each of the two (a subtree that high holds them), what
 * to report (a PyObject *, two words: the id, or the tuple of ids when there are
 * several), each step's offset in the block, then per step axis, test, guard:
 *   G_NONE | G_REF g (m->guards[g], memoised) | G_INLINE len pred*
 * where a pred is its predicate code copied, a nested path's as
 *   NESTED_IN len rel nsteps (axis test guard)*   (its steps inline, same layout).
 * The nested paths of m->rels keep their steps in this layout too (rel_words).
 *
 * Predicate code (int32 words; an operand "off" is the absolute offset of another
 * predicate in the same code array):
 *   ALWAYS                           [.]
 *   ATTR name cmp x y                @name with a comparison (for SEQ and SNE, y is
 *                                    the vocabulary id of name NUL lit, as doc.c
 *                                    interns the message's attributes)
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

#include <math.h>
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
enum { OP_NESTED_IN = 16 }; /* only in blocks and nested paths (emit_guard) */
enum { G_NONE, G_REF, G_INLINE };

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
    int32_t block, key_table, key;
    PyObject *ids; /* a tuple of the profile ids, NULL once discarded */
} Query;

/* String-value lengths from this one on are one class (self_lens). */
#define SELF_LEN_CAP 255

typedef struct {
    int32_t first, n, words; /* a nested path: where its steps are, how many, their words */
} Range;

/* A message's elements listed by a key (a tag; the value of an attribute or text
 * node): those with key k are elems.a[start[k]] ... in document order, count[k] of
 * them, if stamp[k] is the message's (else none). Arrays indexed by key follow the
 * vocabulary (fit_keys). */
typedef struct {
    uint32_t *stamp;
    int32_t *start, *count;
    IVec keys, elems;
} ElemIndex;

typedef struct {
    PyObject_HEAD
    PyTypeObject *element_type; /* lxml.etree._Element */
    Vocab vocab;
    IVec code, guard_preds, rel_words; /* rel_words: the nested paths' steps */
    double *nums;
    int32_t nnums;
    size_t capnums;
    Guard *guards;
    int32_t nguards;
    size_t capguards;
    Range *rels;
    int32_t nrels;
    size_t caprels;
    /* Per query, all its check reads, in one run of words (see the top). */
    IVec blocks;
    Query *queries;
    int32_t nqueries, live;
    size_t capqueries;
    /* Vocabulary id -> the queries filed under it, as records [block, its length,
     * nbase, nself, its need: nbase values the message must hold, nself
     * string-values of its elements], scanned in sequence; a discarded query's
     * block is -1. */
    IVec *by_base, *by_self;
    IVec always;
    size_t capkeys;
    int32_t nself_keyed;
    /* bit n (n < SELF_LEN_CAP; longer ones at SELF_LEN_CAP): some query needs a
     * string-value n bytes long (see collect_selves) */
    uint64_t self_lens[SELF_LEN_CAP / 64 + 1];
    /* In how many messages each value was, and when to file the queries again
     * under their values found least often (rekey): at message rekey_at, or once
     * the queries added or discarded since the last time (changed) are more than a
     * quarter of the live ones then. */
    uint32_t *df;
    uint64_t rekey_at;
    int32_t live_at_rekey, changed;
    int has_edges; /* some query needs a (parent, child) tag pair (edge_value) */
    int has_counts; /* some query needs n children of one name (count_value) */
    IVec ctags;     /* mark_counts' scratch: an element's children's tags */
    /* Character trigrams some query needs (values "\2" + three characters, for
     * contains / starts-with with a literal): a bit per hash of one, so that the
     * message's text is looked up only where a query may need it (mark_grams). */
    uint64_t *gram_bits;
    /* per message */
    Doc doc;
    uint32_t gen;
    uint32_t *present, *self_present;
    IVec present_ids, self_ids;
    /* its elements by tag, and by the values of their attributes (atoms) and text
     * nodes when some query is anchored at one (has_anchors) */
    ElemIndex by_tag, by_value;
    int has_anchors;
    /* The distinct first steps on the child axis (their block words), and whether
     * each holds on the message's root, once known (root_gen) */
    Vocab roots;
    uint32_t *root_gen;
    uint8_t *root_ok;
    size_t caproots;
    /* The distinct steps that follow an anchor (their block words): whether they
     * select something below an element is memoised per message in m_tail */
    Vocab tails;
    IVec cands;     /* blocks (offset, length) of the queries whose need the message meets */
    PyObject **idv; /* what the matching ones report (see block_ids) */
    size_t capidv;
    Span *tspans;   /* match_table's columns: their strings, then their ints */
    int32_t *tints;
    size_t captspans, captints;
    Memo m_guard, m_rel, m_pos, m_tail;
    size_t *vlen; /* its elements' string-value lengths (collect_selves) */
    size_t capvlen;
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
                       (void **)&m->self_present, (void **)&m->by_tag.stamp,
                       (void **)&m->by_tag.start, (void **)&m->by_tag.count, (void **)&m->df,
                       (void **)&m->by_value.stamp, (void **)&m->by_value.start,
                       (void **)&m->by_value.count};
    size_t sizes[] = {sizeof(IVec), sizeof(IVec), sizeof(uint32_t), sizeof(uint32_t),
                      sizeof(uint32_t), sizeof(int32_t), sizeof(int32_t), sizeof(uint32_t),
                      sizeof(uint32_t), sizeof(int32_t), sizeof(int32_t)};
    for (int k = 0; k < 11; k++) {
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
static int nested(Matcher *m, int32_t r, const int32_t *st, int32_t n, int32_t e);
static int guard_ok(Matcher *m, const int32_t *g, int32_t e);
static int exists_in(Matcher *m, const int32_t *st, int32_t n, int32_t e);

/* The words of a guard in a block (see the top): how many, and each predicate's. */
static inline int32_t guard_size(const int32_t *g)
{
    return g[0] == G_NONE ? 1 : g[0] == G_REF ? 2 : 2 + g[1];
}

static int32_t pred_size(const int32_t *c)
{
    switch (c[0]) {
    case OP_ALWAYS: return 1;
    case OP_ATTR: return 5;
    case OP_TEXT: case OP_SELF: return 4;
    case OP_POS: return 3;
    case OP_NESTED: case OP_NOT: return 2;
    case OP_FUNC: return 10;
    default: return 2 + c[1]; /* OP_AND, OP_OR, OP_NESTED_IN */
    }
}

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

static inline int name_ok(const Doc *d, int32_t e, int32_t test)
{
    return test < 0 || d->el[e].tag == test;
}

/* How many of the message's elements x lists under key k. */
static inline int32_t listed(const Matcher *m, const ElemIndex *x, int32_t k)
{
    return x->stamp[k] == m->gen ? x->count[k] : 0;
}

/* Count element under key k (the first pass of listing them). */
static void list_count(Matcher *m, ElemIndex *x, int32_t k)
{
    if (x->stamp[k] != m->gen) {
        x->stamp[k] = m->gen;
        x->count[k] = 0;
        if (ivec_push(&x->keys, k) < 0)
            m->failed = 1;
    }
    x->count[k]++;
}

/* After counting: where each key's elements go (its count is then set again as
 * list_place places them). */
static void list_layout(Matcher *m, ElemIndex *x)
{
    int32_t at = 0;
    for (int32_t j = 0; j < x->keys.n; j++) {
        int32_t k = x->keys.a[j];
        x->start[k] = at;
        at += x->count[k];
        x->count[k] = 0;
    }
    if (ivec_reserve(&x->elems, at) < 0)
        m->failed = 1;
}

static void list_place(Matcher *m, ElemIndex *x, int32_t k, int32_t e)
{
    if (!m->failed)
        x->elems.a[x->start[k] + x->count[k]++] = e;
}

/* The elements a location step (axis, name test) selects from element p (-1: the
 * document), in document order, one by one (sel_next). When the test names a tag,
 * from the list of the message's elements with that tag, those below p (a binary
 * search), unless p's children are fewer; else by walking p's subtree. */
typedef struct {
    const int32_t *tagged; /* NULL: walk the tree */
    int32_t k, n, parent, j, end, child, test;
} Sel;

static inline void sel_start(const Matcher *m, Sel *s, int32_t p, int32_t axis, int32_t test)
{
    const Doc *d = &m->doc;
    s->parent = p;
    s->j = p + 1;
    s->end = p < 0 ? (int32_t)d->nel : d->el[p].end;
    s->child = axis == AXIS_CHILD;
    s->test = test;
    s->tagged = NULL;
    s->k = s->n = 0;
    if (test < 0)
        return;
    int32_t count = listed(m, &m->by_tag, test);
    if (!count) {
        s->j = s->end; /* no element has the tag */
        return;
    }
    const int32_t *a = m->by_tag.elems.a + m->by_tag.start[test];
    int32_t lo = 0, hi = count;
    while (lo < hi) {
        int32_t mid = (lo + hi) >> 1;
        if (a[mid] <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (s->child && count - lo > (p < 0 ? 1 : d->el[p].nchild))
        return;
    s->tagged = a;
    s->k = lo;
    s->n = count;
}

static inline int32_t sel_next(const Matcher *m, Sel *s)
{
    const Elem *el = m->doc.el;
    if (s->tagged) {
        while (s->k < s->n) {
            int32_t j = s->tagged[s->k++];
            if (j >= s->end)
                break;
            if (!s->child || el[j].parent == s->parent)
                return j;
        }
        s->k = s->n;
        return -1;
    }
    while (s->j < s->end) {
        int32_t j = s->j;
        s->j = s->child ? el[j].end : j + 1;
        if (name_ok(&m->doc, j, s->test))
            return j;
    }
    return -1;
}

static int cmp_int(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The elements nested path r selects from e, in document order (owned by out). */
static void rel_select(Matcher *m, int32_t r, int32_t e, IVec *out)
{
    IVec cur = {0}, next = {0};
    if (ivec_push(&cur, e) < 0)
        goto oom;
    Range rg = m->rels[r];
    const int32_t *st = m->rel_words.a + rg.first;
    for (int32_t i = 0; i < rg.n && cur.n; i++) {
        const int32_t *g = st + 2;
        next.n = 0;
        for (int32_t k = 0; k < cur.n; k++) {
            Sel sel;
            sel_start(m, &sel, cur.a[k], st[0], st[1]);
            for (int32_t j; (j = sel_next(m, &sel)) >= 0;)
                if (guard_ok(m, g, j) && ivec_push(&next, j) < 0)
                    goto oom;
        }
        st = g + guard_size(g);
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

/* Does the predicate at c hold on e (at position pos)? Operands of NOT, AND and OR
 * are offsets in m->code; NESTED_IN carries its nested path's steps inline. */
static int ev_at(Matcher *m, const int32_t *c, int32_t e, int32_t pos)
{
    const Doc *d = &m->doc;
    switch (c[0]) {
    case OP_ALWAYS:
        return 1;
    case OP_ATTR: {
        const DAttr *at = find_attr(d, e, c[1]);
        if (!at)
            return 0;
        if (c[2] == CMP_SEQ || c[2] == CMP_SNE) /* equal strings have one id */
            return (at->atom == c[4]) == (c[2] == CMP_SEQ);
        return compare(m, c[2], c[3], c[4], at->value);
    }
    case OP_TEXT: {
        const Elem *el = &d->el[e];
        for (int32_t k = 0; k < el->ntext; k++) {
            const DText *t = &d->tx[el->text0 + k];
            if (c[1] == CMP_SEQ ? t->id == c[2] : compare(m, c[1], c[2], c[3], t->s))
                return 1;
        }
        return 0;
    }
    case OP_SELF:
        return compare(m, c[1], c[2], c[3], string_value(m, e));
    case OP_POS:
        return rel_op(c[1], (double)pos, m->nums[c[2]]);
    case OP_NESTED:
        return nested(m, c[1], m->rel_words.a + m->rels[c[1]].first, m->rels[c[1]].n, e);
    case OP_FUNC: {
        Span a = str_arg(m, c + 2, e), b = str_arg(m, c + 6, e);
        if (c[1] == FN_CONTAINS)
            return contains(a, b);
        return b.n <= a.n && memcmp(a.s, b.s, b.n) == 0;
    }
    case OP_NOT:
        return !ev_at(m, m->code.a + c[1], e, pos);
    case OP_AND:
        for (int32_t k = 0; k < c[1]; k++)
            if (!ev_at(m, m->code.a + c[2 + k], e, pos))
                return 0;
        return 1;
    case OP_OR:
        for (int32_t k = 0; k < c[1]; k++)
            if (ev_at(m, m->code.a + c[2 + k], e, pos))
                return 1;
        return 0;
    case OP_NESTED_IN:
        return nested(m, c[2], c + 4, c[3], e);
    default:
        return 0; /* not made by emit_guard or the compiler */
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
        if (!ev_at(m, m->code.a + m->guard_preds.a[gd->preds + j], e, pos))
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

/* Does the guard at g (block words) hold on e? */
static int guard_ok(Matcher *m, const int32_t *g, int32_t e)
{
    if (g[0] == G_NONE)
        return 1;
    if (g[0] == G_REF)
        return guard_check(m, g[1], e);
    for (const int32_t *c = g + 2, *stop = g + 2 + g[1]; c < stop; c += pred_size(c))
        if (!ev_at(m, c, e, 0))
            return 0;
    return 1;
}

/* Does the nested path whose n steps are at st (axis, test, guard) select anything
 * from e? */
static int exists_in(Matcher *m, const int32_t *st, int32_t n, int32_t e)
{
    const int32_t *g = st + 2, *next = g + guard_size(g);
    Sel sel;
    sel_start(m, &sel, e, st[0], st[1]);
    for (int32_t j; (j = sel_next(m, &sel)) >= 0;)
        if (guard_ok(m, g, j) && (n == 1 || exists_in(m, next, n - 1, j)))
            return 1;
    return 0;
}

/* exists_in, memoised per (nested path r, element). */
static int nested(Matcher *m, int32_t r, const int32_t *st, int32_t n, int32_t e)
{
    int32_t v;
    if (memo_get(&m->m_rel, KEY(r, e), &v))
        return v;
    v = exists_in(m, st, n, e);
    if (memo_put(&m->m_rel, KEY(r, e), v) < 0)
        m->failed = 1;
    return v;
}

/* Where a block's ids to report and its step offsets are (see the top). */
enum { B_QUERY, B_NSTEPS, B_ANCHOR, B_VALUE, B_LAST_NAMED, B_ROOT, B_TAIL, B_ANCHOR_TAIL,
       B_TAIL_STARS, B_ANCHOR_TAIL_STARS, BLOCK_IDS };
#define BLOCK_OFFSETS (BLOCK_IDS + (int32_t)(sizeof(PyObject *) / sizeof(int32_t)))

static inline PyObject *block_ids(const int32_t *b)
{
    PyObject *ids;
    memcpy(&ids, b + BLOCK_IDS, sizeof ids);
    return ids;
}

/* Report q's ids (q->ids, which holds the references) from its block. */
static void set_block_ids(Matcher *m, const Query *q)
{
    PyObject *ids = PyTuple_GET_SIZE(q->ids) == 1 ? PyTuple_GET_ITEM(q->ids, 0) : q->ids;
    memcpy(m->blocks.a + q->block + BLOCK_IDS, &ids, sizeof ids);
}

static int block_cmp(const void *x, const void *y, void *queries)
{
    const Query *q = queries;
    int32_t a = q[*(const int32_t *)x].block, b = q[*(const int32_t *)y].block;
    return (a > b) - (a < b);
}

/* Replace every query's ids with equal strings made one after another, in the order
 * of the blocks (that of the posting lists), before any tuple that holds them.
 * Reporting touches each matching id string (its hash, its reference count); the
 * ones the profiles were added with lie all over the heap, one page and cache miss
 * each, while the copies sit together (100k of them in a few MB), those of the
 * candidates of one list next to one another. */
static int copy_ids(Matcher *m)
{
    IVec order = {0};
    int ok = 0;
    for (int32_t k = 0; k < m->nqueries; k++)
        if (m->queries[k].ids && ivec_push(&order, k) < 0)
            goto done;
    qsort_r(order.a, (size_t)order.n, sizeof *order.a, block_cmp, m->queries);
    PyObject *strings = PyList_New(0);
    if (!strings)
        goto done;
    for (int32_t i = 0; i < order.n; i++) {
        PyObject *ids = m->queries[order.a[i]].ids;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(ids); j++) {
            PyObject *u = PyTuple_GET_ITEM(ids, j);
            PyObject *c = PyUnicode_FromKindAndData(PyUnicode_KIND(u), PyUnicode_DATA(u),
                                                    PyUnicode_GET_LENGTH(u));
            if (!c || PyList_Append(strings, c) < 0) {
                Py_XDECREF(c);
                goto fail;
            }
            Py_DECREF(c);
        }
    }
    Py_ssize_t at = 0;
    for (int32_t i = 0; i < order.n; i++) {
        Query *q = &m->queries[order.a[i]];
        Py_ssize_t n = PyTuple_GET_SIZE(q->ids);
        PyObject *t = PyTuple_New(n);
        if (!t)
            goto fail;
        for (Py_ssize_t j = 0; j < n; j++, at++) {
            PyObject *c = PyList_GET_ITEM(strings, at);
            Py_INCREF(c);
            PyTuple_SET_ITEM(t, j, c);
        }
        Py_SETREF(q->ids, t);
        set_block_ids(m, q);
    }
    ok = 1;
fail:
    Py_DECREF(strings);
done:
    free(order.a);
    return ok ? 0 : -1;
}

/* Do the name test and guard of step s (axis, test, guard) hold on e? */
static inline int step_holds(Matcher *m, const int32_t *s, int32_t e)
{
    return name_ok(&m->doc, e, s[1]) && (s[2] == G_NONE || guard_ok(m, s + 2, e));
}

/* Step i of the block at b: axis, test, guard. */
static inline const int32_t *block_step(const int32_t *b, int32_t i)
{
    return b + b[BLOCK_OFFSETS + i];
}

/* Does step i of the block at b bind e, and the steps before it e's ancestors, as
 * their axes say? A first step on the child axis (it binds the root only) is taken
 * as checked on the root (block_matches checks it first). */
static int binds(Matcher *m, const int32_t *b, int32_t i, int32_t e)
{
    const int32_t *s = block_step(b, i);
    if (i == 0 && s[0] == AXIS_CHILD)
        return e == 0;
    if (!step_holds(m, s, e))
        return 0;
    if (i == 0)
        return 1; /* from the document, on the descendant axis */
    const Elem *el = m->doc.el;
    int32_t p = el[e].parent;
    if (s[0] == AXIS_CHILD)
        return p >= 0 && binds(m, b, i - 1, p);
    for (; p >= 0; p = el[p].parent)
        if (binds(m, b, i - 1, p))
            return 1;
    return 0;
}

/* Does the first step s, on the child axis, hold on the root? Once per distinct
 * first step (id r) and message: most profiles start at the root with one of a few
 * hundred steps. */
static int root_holds(Matcher *m, int32_t r, const int32_t *s)
{
    if (m->root_gen[r] != m->gen) {
        m->root_gen[r] = m->gen;
        m->root_ok[r] = (uint8_t)step_holds(m, s, 0);
    }
    return m->root_ok[r];
}

/* Do the steps of the block at b after step 'at' (tail t in m->tails) select
 * something below e? Memoised per (tail, element): profiles ending alike share it. */
static int tail_holds(Matcher *m, const int32_t *b, int32_t at, int32_t t, int32_t e)
{
    int32_t v;
    if (memo_get(&m->m_tail, KEY(t, e), &v))
        return v;
    v = exists_in(m, block_step(b, at + 1), b[B_NSTEPS] - 1 - at, e);
    if (memo_put(&m->m_tail, KEY(t, e), v) < 0)
        m->failed = 1;
    return v;
}

/* Does step 'at' of the block at b bind one of the count elements x lists under key,
 * the steps before it the element's ancestors, the steps after it (tail t, -1: none;
 * or 'stars' steps '*' without predicates, which need that many levels below)
 * something below it? */
static int binds_one(Matcher *m, const int32_t *b, int32_t at, int32_t t, int32_t stars,
                     const ElemIndex *x, int32_t key, int32_t count)
{
    const int32_t *a = x->elems.a + x->start[key];
    const Elem *el = m->doc.el;
    for (int32_t k = 0; k < count; k++)
        if (el[a[k]].height >= stars && binds(m, b, at, a[k])
            && (t < 0 || tail_holds(m, b, at, t, a[k])))
            return 1;
    return 0;
}

/* From an anchor on a '*' step after the last named one, how many times as many
 * elements as those with the tag may hold its value and still be where a check
 * starts: from the tag, that step is looked for in each element's subtree, while from
 * the value the steps are checked up a few ancestors. (Measured: 2, 4 and 16 times;
 * 4 checked the candidates in the fewest cycles.) */
#define BELOW_ANCHOR_BIAS 4

/* Does the path of the query whose block is at b bind an element? Bottom up: from
 * the elements its last step that names a tag could select, or, when fewer hold it
 * (BELOW_ANCHOR_BIAS), those holding the value of its anchor (anchor_of), the steps
 * before checked on their ancestors, the steps after on their descendants (on the
 * message's own small tables; nested paths memoised). */
static int block_matches(Matcher *m, const int32_t *b)
{
    if (b[B_ROOT] >= 0 && !root_holds(m, b[B_ROOT], block_step(b, 0)))
        return 0;
    int32_t anchor = b[B_ANCHOR], value = b[B_VALUE], at = b[B_LAST_NAMED];
    int32_t test = block_step(b, at)[1];
    int32_t ntagged = test < 0 ? -1 : listed(m, &m->by_tag, test);
    if (anchor >= 0) {
        int32_t nvalued = listed(m, &m->by_value, value);
        if (!nvalued)
            return 0;
        if (ntagged < 0 || nvalued < ntagged
            || (anchor > at && nvalued <= BELOW_ANCHOR_BIAS * ntagged))
            return binds_one(m, b, anchor, b[B_ANCHOR_TAIL], b[B_ANCHOR_TAIL_STARS], &m->by_value,
                             value, nvalued);
    }
    if (ntagged > 0)
        return binds_one(m, b, at, b[B_TAIL], b[B_TAIL_STARS], &m->by_tag, test, ntagged);
    for (int32_t e = 0; ntagged < 0 && e < (int32_t)m->doc.nel; e++)
        if (binds(m, b, b[B_NSTEPS] - 1, e))
            return 1;
    return 0;
}

static void mark(Matcher *m, uint32_t *stamps, IVec *list, int32_t id)
{
    if (id < 0 || stamps[id] == m->gen)
        return;
    stamps[id] = m->gen;
    if (ivec_push(list, id) < 0)
        m->failed = 1;
}

static inline size_t len_class(size_t n)
{
    return n < SELF_LEN_CAP ? n : SELF_LEN_CAP;
}

/* Mark the string-values of the message's elements that queries need (as selves).
 * Only those of a length some query needs are built and looked up: most elements
 * hold others, and building one (the root's is all the message's text) costs more
 * than the lookup. A leaf's one text node has its id already. */
static void collect_selves(Matcher *m)
{
    m->selves_done = 1;
    const Doc *d = &m->doc;
    if (grow_array((void **)&m->vlen, &m->capvlen, d->nel, sizeof *m->vlen) < 0) {
        m->failed = 1;
        return;
    }
    doc_value_lengths(d, m->vlen);
    for (int32_t e = 0; e < (int32_t)d->nel; e++) {
        size_t c = len_class(m->vlen[e]);
        if (!(m->self_lens[c / 64] >> (c % 64) & 1))
            continue;
        const Elem *el = &d->el[e];
        int32_t id;
        if (el->end == e + 1 && el->ntext == 1)
            id = d->tx[el->text0].id;
        else {
            Span s = string_value(m, e);
            id = vocab_find(&m->vocab, s.s, s.n);
        }
        mark(m, m->self_present, &m->self_ids, id);
    }
}

/* Start loading the cache lines of n words at a. */
static inline void prefetch_words(const int32_t *a, int32_t n)
{
    for (int32_t at = 0; at < n; at += 64 / (int32_t)sizeof *a)
        __builtin_prefetch(a + at);
}

/* The words of the posting record at r: block, length, nbase, nself, then its need. */
static inline int32_t record_words(const int32_t *r)
{
    return 4 + r[2] + r[3];
}

/* Add to m->cands the blocks (offset, length) of the queries of a posting list whose
 * whole need the message meets, its first 'known' values known to be held (a base
 * list's records start with its own value). */
static void take_candidates(Matcher *m, const IVec *list, int32_t known)
{
    const int32_t *a = list->a;
    int32_t records = 0;
    for (int32_t k = 0; k < list->n; records++) {
        if (k + 64 < list->n) /* lists are short: the hardware is slow to start */
            __builtin_prefetch(a + k + 64);
        int32_t block = a[k], len = a[k + 1], nb = a[k + 2], ns = a[k + 3];
        const int32_t *need = a + k + 4;
        k += 4 + nb + ns;
        if (block < 0)
            continue;
        int32_t j = known;
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
        if (ivec_push(&m->cands, block) < 0 || ivec_push(&m->cands, len) < 0)
            m->failed = 1;
    }
    m->filed_hits += (uint64_t)records;
}

/* How many candidates ahead of the one being checked to start loading. */
#define AHEAD 6

/* How many ids ahead of the one being added to the set to start loading. */
#define ID_AHEAD 16

/* The ids of the matching candidates, as a frozenset. The id strings are spread
 * over the heap: each is loaded (prefetch) when its query matches, and added once
 * all candidates are checked, so their cache misses overlap with the checks. */
static PyObject *report(Matcher *m)
{
    size_t n = 0;
    const int32_t *c = m->cands.a;
    for (int32_t k = 0; k < m->cands.n; k += 2) {
        if (k + 2 * AHEAD < m->cands.n)
            prefetch_words(m->blocks.a + c[k + 2 * AHEAD], c[k + 2 * AHEAD + 1]);
        const int32_t *b = m->blocks.a + c[k];
        if (!block_matches(m, b))
            continue;
        PyObject *ids = block_ids(b);
        __builtin_prefetch(ids);
        if (n == m->capidv) {
            size_t cap = n ? 2 * n : 256;
            PyObject **idv = realloc(m->idv, cap * sizeof *idv);
            if (!idv)
                return PyErr_NoMemory();
            m->idv = idv;
            m->capidv = cap;
        }
        m->idv[n++] = ids;
    }
    m->matched += n;
    PyObject *out = PyFrozenSet_New(NULL);
    if (!out)
        return NULL;
    for (size_t k = 0; k < n; k++) {
        if (k + ID_AHEAD < n) { /* its reference count and hash may be two lines */
            __builtin_prefetch(m->idv[k + ID_AHEAD]);
            __builtin_prefetch((char *)m->idv[k + ID_AHEAD] + offsetof(PyASCIIObject, hash));
        }
        PyObject *ids = m->idv[k];
        int bad = 0;
        if (PyTuple_CheckExact(ids))
            for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(ids) && !bad; j++)
                bad = PySet_Add(out, PyTuple_GET_ITEM(ids, j)) < 0;
        else
            bad = PySet_Add(out, ids) < 0;
        if (bad) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

static void start_message(Matcher *m)
{
    if (++m->gen == 0) { /* wrapped: old stamps could look current */
        memset(m->present, 0, m->capkeys * sizeof *m->present);
        memset(m->self_present, 0, m->capkeys * sizeof *m->self_present);
        memset(m->by_tag.stamp, 0, m->capkeys * sizeof *m->by_tag.stamp);
        memset(m->by_value.stamp, 0, m->capkeys * sizeof *m->by_value.stamp);
        memset(m->root_gen, 0, m->caproots * sizeof *m->root_gen);
        m->gen = 1;
    }
    m->present_ids.n = m->self_ids.n = m->cands.n = 0;
    m->selves_done = m->failed = 0;
    memo_reset(&m->m_guard);
    memo_reset(&m->m_rel);
    memo_reset(&m->m_pos);
    memo_reset(&m->m_tail);
}

/* The value that stands for "an element named child has a parent named parent"
 * (tag ids): a string no message holds (XML has no U+0001), interned when add is
 * set (-1 on OOM), else looked up (-1: no profile needs it). */
static int32_t edge_value(Matcher *m, int32_t parent, int32_t child, int add)
{
    char key[1 + 2 * sizeof(int32_t)] = {1};
    memcpy(key + 1, &parent, sizeof parent);
    memcpy(key + 1 + sizeof parent, &child, sizeof child);
    if (!add)
        return vocab_find(&m->vocab, key, sizeof key);
    int32_t id = vocab_intern(&m->vocab, key, sizeof key);
    if (id < 0 || fit_keys(m) < 0)
        return -1;
    m->has_edges = 1;
    return id;
}

/* Positions [n] need n siblings of one name: the value that stands for "an element
 * named parent (-1: any) has at least n children named child" (2 <= n <= MAX_COUNT;
 * more is written MAX_COUNT), interned when add is set, else looked up. */
#define MAX_COUNT 8

static int32_t count_value(Matcher *m, int32_t parent, int32_t child, int32_t n, int add)
{
    char key[1 + 3 * sizeof(int32_t)] = {3};
    memcpy(key + 1, &parent, sizeof parent);
    memcpy(key + 1 + sizeof parent, &child, sizeof child);
    memcpy(key + 1 + 2 * sizeof parent, &n, sizeof n);
    if (!add)
        return vocab_find(&m->vocab, key, sizeof key);
    int32_t id = vocab_intern(&m->vocab, key, sizeof key);
    if (id < 0 || fit_keys(m) < 0)
        return -1;
    m->has_counts = 1;
    return id;
}

/* Mark the count values of element e's children (see count_value). */
static void mark_counts(Matcher *m, int32_t e)
{
    const Doc *d = &m->doc;
    IVec *tags = &m->ctags;
    tags->n = 0;
    for (int32_t c = e + 1; c < d->el[e].end; c = d->el[c].end)
        if (d->el[c].tag >= 0 && ivec_push(tags, d->el[c].tag) < 0) {
            m->failed = 1;
            return;
        }
    if (tags->n < 2)
        return;
    qsort(tags->a, (size_t)tags->n, sizeof *tags->a, cmp_int);
    int32_t ptag = d->el[e].tag;
    for (int32_t k = 0; k < tags->n;) {
        int32_t j = k;
        while (j < tags->n && tags->a[j] == tags->a[k])
            j++;
        for (int32_t n = 2; n <= j - k && n <= MAX_COUNT; n++) {
            mark(m, m->present, &m->present_ids, count_value(m, -1, tags->a[k], n, 0));
            if (ptag >= 0)
                mark(m, m->present, &m->present_ids, count_value(m, ptag, tags->a[k], n, 0));
        }
        k = j;
    }
}

/* List element e under the ids of its attributes and text nodes (count, or place). */
static void list_values(Matcher *m, int32_t e, int place)
{
    const Doc *d = &m->doc;
    const Elem *el = &d->el[e];
    for (int32_t k = 0; k < el->nattr + el->ntext; k++) {
        int32_t v = k < el->nattr ? d->at[el->attr0 + k].atom : d->tx[el->text0 + k - el->nattr].id;
        if (v < 0)
            continue;
        if (place)
            list_place(m, &m->by_value, v, e);
        else
            list_count(m, &m->by_value, v);
    }
}

#define GRAM_BITS ((uint32_t)1 << 20)

/* The code point at *p (UTF-8; a stray byte stands for itself), *p moved past it. */
static inline uint32_t next_cp(const unsigned char **p, const unsigned char *end)
{
    const unsigned char *c = *p;
    uint32_t b = c[0];
    size_t n = b < 0xC0 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    if ((size_t)(end - c) < n)
        n = 1;
    uint32_t cp = n == 1 ? b : b & (0x3F >> (n - 1));
    for (size_t k = 1; k < n; k++)
        cp = cp << 6 | (c[k] & 0x3F);
    *p = c + n;
    return cp;
}

static inline uint32_t gram_hash3(uint32_t a, uint32_t b, uint32_t c)
{
    uint32_t h = a * 0x9E3779B1u ^ b * 0x85EBCA77u ^ c * 0xC2B2AE3Du;
    return (h ^ h >> 15) & (GRAM_BITS - 1);
}

/* The hash of a trigram value ("\2" and three characters). */
static uint32_t gram_hash(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    uint32_t a = next_cp(&p, end), b = p < end ? next_cp(&p, end) : 0,
             c = p < end ? next_cp(&p, end) : 0;
    return gram_hash3(a, b, c);
}

/* Mark the trigrams of s (three characters each) that some query needs: a bit test
 * per character, a lookup only where the bit is set. A string-value of any element
 * is a stretch of the root's, and an attribute value is its own string: their
 * trigrams hold every trigram of any string() a contains() or starts-with() reads. */
static void mark_grams(Matcher *m, Span s)
{
    const unsigned char *p = (const unsigned char *)s.s, *end = p + s.n;
    if (s.n < 3)
        return;
    const unsigned char *s0 = p;
    uint32_t a = next_cp(&p, end);
    if (p >= end)
        return;
    const unsigned char *s1 = p;
    uint32_t b = next_cp(&p, end);
    if (p >= end)
        return;
    const unsigned char *s2 = p;
    char key[1 + 12];
    key[0] = 2;
    while (p < end) {
        uint32_t c = next_cp(&p, end);
        uint32_t h = gram_hash3(a, b, c);
        if (m->gram_bits[h / 64] >> (h % 64) & 1) {
            size_t n = (size_t)(p - s0);
            if (n <= 12) {
                memcpy(key + 1, s0, n);
                mark(m, m->present, &m->present_ids, vocab_find(&m->vocab, key, n + 1));
            }
        }
        s0 = s1;
        s1 = s2;
        s2 = p;
        a = b;
        b = c;
    }
}

/* Mark the values the message holds and list its elements by tag (for sel_start)
 * and, if some query is anchored at one, by the values of their attributes and text
 * nodes (block_matches). */
static void index_message(Matcher *m)
{
    const Doc *d = &m->doc;
    mark(m, m->present, &m->present_ids, vocab_find(&m->vocab, "", 0));
    m->by_tag.keys.n = m->by_value.keys.n = 0;
    for (int32_t e = 0; e < (int32_t)d->nel; e++) {
        const Elem *el = &d->el[e];
        int32_t t = el->tag;
        if (t >= 0) {
            mark(m, m->present, &m->present_ids, t);
            list_count(m, &m->by_tag, t);
        }
        if (m->has_edges && t >= 0 && el->parent >= 0 && d->el[el->parent].tag >= 0)
            mark(m, m->present, &m->present_ids, edge_value(m, d->el[el->parent].tag, t, 0));
        if (m->has_counts && el->nchild >= 2)
            mark_counts(m, e);
        for (int32_t k = 0; k < el->nattr; k++)
            mark(m, m->present, &m->present_ids, d->at[el->attr0 + k].atom);
        for (int32_t k = 0; k < el->ntext; k++)
            mark(m, m->present, &m->present_ids, d->tx[el->text0 + k].id);
        if (m->has_anchors)
            list_values(m, e, 0);
    }
    if (m->gram_bits && d->nel) {
        Span root = doc_string_value(&m->doc, 0);
        if (!root.s)
            m->failed = 1;
        else
            mark_grams(m, root);
        for (size_t k = 0; k < d->nat; k++)
            mark_grams(m, d->at[k].value);
    }
    list_layout(m, &m->by_tag);
    if (m->has_anchors)
        list_layout(m, &m->by_value);
    for (int32_t e = 0; e < (int32_t)d->nel; e++) {
        if (d->el[e].tag >= 0)
            list_place(m, &m->by_tag, d->el[e].tag, e);
        if (m->has_anchors)
            list_values(m, e, 1);
    }
}

/* Records by their need after the key (the value next most likely missing first):
 * records that need the same values follow one another, so as a message's list is
 * scanned the need test's branches mostly go the way they went for the last one. */
static int record_cmp(const void *x, const void *y, void *list)
{
    const int32_t *a = (const int32_t *)list + *(const int32_t *)x;
    const int32_t *b = (const int32_t *)list + *(const int32_t *)y;
    int32_t na = a[2] + a[3], nb = b[2] + b[3];
    for (int32_t j = 1; j < na && j < nb; j++)
        if (a[4 + j] != b[4 + j])
            return a[4 + j] < b[4 + j] ? -1 : 1;
    return (na > nb) - (na < nb);
}

static int sort_records(IVec *list)
{
    IVec at = {0}, out = {0};
    for (int32_t k = 0; k < list->n; k += record_words(list->a + k))
        if (ivec_push(&at, k) < 0)
            goto oom;
    if (at.n > 1) /* an empty list has no array: qsort_r's base must not be NULL (UBSan) */
        qsort_r(at.a, (size_t)at.n, sizeof *at.a, record_cmp, list->a);
    if (ivec_reserve(&out, list->n) < 0)
        goto oom;
    for (int32_t r = 0; r < at.n; r++) {
        const int32_t *rec = list->a + at.a[r];
        int32_t words = record_words(rec);
        memcpy(out.a + out.n, rec, (size_t)words * sizeof *rec);
        out.n += words;
    }
    free(at.a);
    free(list->a);
    *list = out;
    return 0;
oom:
    free(at.a);
    free(out.a);
    return -1;
}

/* Append the live blocks of a posting list's records to out, in their order, and
 * point the records and their queries at the copies. */
static void relayout_list(Matcher *m, IVec *list, IVec *out)
{
    int32_t *a = list->a, ahead = 0;
    for (int32_t j = 0; j < 8 && ahead < list->n; j++) /* the blocks lie all over */
        ahead += record_words(a + ahead);
    for (int32_t k = 0; k < list->n; k += record_words(a + k)) {
        if (ahead < list->n) {
            if (a[ahead] >= 0)
                prefetch_words(m->blocks.a + a[ahead], a[ahead + 1]);
            ahead += record_words(a + ahead);
        }
        if (a[k] < 0)
            continue;
        memcpy(out->a + out->n, m->blocks.a + a[k], (size_t)a[k + 1] * sizeof *out->a);
        m->queries[out->a[out->n]].block = a[k] = out->n;
        out->n += a[k + 1];
    }
}

/* Copy the live blocks into a new array in the order the posting lists hold them,
 * so that the candidates of one list, checked in that order, read memory forwards
 * (pages and cache lines shared, and ahead of a sequential prefetcher) rather than
 * all over the blocks of 100k profiles. A discarded query's block is dropped. */
static int relayout_blocks(Matcher *m)
{
    IVec out = {0};
    if (ivec_reserve(&out, m->blocks.n) < 0)
        return -1;
    for (size_t v = 0; v < m->capkeys; v++)
        relayout_list(m, &m->by_base[v], &out);
    for (size_t v = 0; v < m->capkeys; v++)
        relayout_list(m, &m->by_self[v], &out);
    relayout_list(m, &m->always, &out);
    free(m->blocks.a);
    m->blocks = out;
    return 0;
}

/* The message at which rekey first runs. */
#define FIRST_REKEY 64

static int df_less(const Matcher *m, int32_t a, int32_t b)
{
    return m->df[a] < m->df[b];
}

/* File every query in the base lists again under the value of its need seen in the
 * fewest messages so far, its need sorted the same way (the value most likely
 * missing is tested first). The keys the compiler chose (yfilter.keyed.choose_key)
 * only know the profiles; after a few messages the messages themselves tell which
 * values are rare. Runs after 64 messages, then 16 times as many each time, and
 * after the first time whenever the queries added or discarded since are more than
 * a quarter of the live ones: the added ones were filed under the compiler's key,
 * the discarded ones are still scanned; filing again drops them (and their blocks,
 * relayout_blocks). */
static int rekey(Matcher *m)
{
    if (m->messages >= m->rekey_at)
        m->rekey_at *= 16;
    m->live_at_rekey = m->live;
    m->changed = 0;
    IVec *lists = calloc(m->capkeys, sizeof *lists);
    if (!lists)
        return -1;
    for (size_t v = 0; v < m->vocab.n; v++) {
        int32_t *a = m->by_base[v].a;
        for (int32_t k = 0; k < m->by_base[v].n; k += record_words(a + k)) {
            if (a[k] < 0)
                continue;
            int32_t *need = a + k + 4, nb = a[k + 2];
            for (int32_t i = 1; i < nb; i++) /* insertion sort: needs are short */
                for (int32_t j = i; j > 0 && df_less(m, need[j], need[j - 1]); j--) {
                    int32_t t = need[j];
                    need[j] = need[j - 1];
                    need[j - 1] = t;
                }
            IVec *to = &lists[need[0]];
            int32_t words = 4 + nb + a[k + 3];
            if (ivec_reserve(to, to->n + words) < 0) {
                for (size_t u = 0; u < m->vocab.n; u++)
                    free(lists[u].a);
                free(lists);
                return -1;
            }
            memcpy(to->a + to->n, a + k, (size_t)words * sizeof *a);
            to->n += words;
            m->queries[m->blocks.a[a[k]]].key = need[0];
        }
    }
    for (size_t v = 0; v < m->capkeys; v++) {
        free(m->by_base[v].a);
        if (sort_records(&lists[v]) < 0) {
            for (size_t u = v + 1; u < m->capkeys; u++)
                free(m->by_base[u].a);
            free(m->by_base);
            m->by_base = lists;
            return -1;
        }
    }
    free(m->by_base);
    m->by_base = lists;
    return relayout_blocks(m);
}

/* The ids of the profiles matching the message doc_load* just read (r: its result),
 * as a frozenset; None if the reader does not model the message. */
static PyObject *match_loaded(Matcher *m, int r)
{
    if (r == DOC_UNSUPPORTED)
        Py_RETURN_NONE;
    if (r == DOC_NOMEM)
        return PyErr_NoMemory();
    index_message(m);
    int32_t npresent = m->present_ids.n;
    for (int32_t k = 0; k < npresent; k++)
        m->df[m->present_ids.a[k]]++;
    int due = ++m->messages >= m->rekey_at
           || (m->rekey_at > FIRST_REKEY && m->changed > m->live_at_rekey / 4);
    if (due && (rekey(m) < 0 || copy_ids(m) < 0))
        return PyErr_NoMemory();
    for (int32_t k = 0; k < npresent; k++) {
        if (k + 2 < npresent) { /* the list after next: its first lines */
            const IVec *next = &m->by_base[m->present_ids.a[k + 2]];
            prefetch_words(next->a, next->n < 64 ? next->n : 64);
        }
        take_candidates(m, &m->by_base[m->present_ids.a[k]], 1);
    }
    if (m->nself_keyed) {
        if (!m->selves_done)
            collect_selves(m);
        for (int32_t k = 0; k < m->self_ids.n; k++)
            take_candidates(m, &m->by_self[m->self_ids.a[k]], 0);
    }
    take_candidates(m, &m->always, 0);
    PyObject *out = report(m);
    if (out && m->failed) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    return out;
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
    return match_loaded(m, doc_load(&m->doc, node, &m->vocab));
}

/* The UTF-8 of each str of a sequence (PySequence_Fast): 0; 1 if an item is no str
 * or holds what UTF-8 cannot (a lone surrogate); -1 on another error. */
static int utf8_column(PyObject *seq, Span *out)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t len;
        const char *s = PyUnicode_Check(items[k]) ? PyUnicode_AsUTF8AndSize(items[k], &len) : NULL;
        if (!s) {
            if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
                return -1;
            PyErr_Clear();
            return 1;
        }
        out[k] = (Span){s, (size_t)len};
    }
    return 0;
}

/* The ints of a sequence (PySequence_Fast): 0; 1 if one is no int32; -1 on error. */
static int int_column(PyObject *seq, int32_t *out)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t k = 0; k < n; k++) {
        long x = PyLong_Check(items[k]) ? PyLong_AsLong(items[k]) : -1;
        if (x == -1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError))
                return -1;
            PyErr_Clear();
            return 1;
        }
        if (!PyLong_Check(items[k]) || x < INT32_MIN || x > INT32_MAX)
            return 1;
        out[k] = (int32_t)x;
    }
    return 0;
}

/* match_table(tags, depths, texts, tails, attr_counts, attr_names, attr_values): the
 * same as match() on a message given as the columns of a formats.Message (see
 * Table in doc.h); None when they describe no message the reader models (no tree,
 * columns of different lengths, an item of the wrong type). */
static PyObject *Matcher_match_table(Matcher *m, PyObject *args)
{
    static const char *what[7] = {
        "match_table(): tags must be a sequence", "match_table(): depths must be a sequence",
        "match_table(): texts must be a sequence", "match_table(): tails must be a sequence",
        "match_table(): attr_counts must be a sequence",
        "match_table(): attr_names must be a sequence",
        "match_table(): attr_values must be a sequence"};
    PyObject *in[7], *col[7] = {NULL};
    if (!PyArg_UnpackTuple(args, "match_table", 7, 7, &in[0], &in[1], &in[2], &in[3], &in[4],
                           &in[5], &in[6]))
        return NULL;
    PyObject *out = NULL;
    for (int k = 0; k < 7; k++)
        if (!(col[k] = PySequence_Fast(in[k], what[k])))
            goto done;
    size_t n = (size_t)PySequence_Fast_GET_SIZE(col[0]);
    size_t nattr = (size_t)PySequence_Fast_GET_SIZE(col[5]);
    int bad = (size_t)PySequence_Fast_GET_SIZE(col[6]) != nattr;
    for (int k = 1; k < 5; k++)
        bad |= (size_t)PySequence_Fast_GET_SIZE(col[k]) != n;
    if (bad) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    size_t nspans = 3 * n + 2 * nattr;
    if (grow_array((void **)&m->tspans, &m->captspans, nspans, sizeof *m->tspans) < 0
        || grow_array((void **)&m->tints, &m->captints, 2 * n, sizeof *m->tints) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    Span *sp = m->tspans;
    Table t = {.n = n, .nattr = nattr, .tags = sp, .texts = sp + n, .tails = sp + 2 * n,
               .attr_names = sp + 3 * n, .attr_values = sp + 3 * n + nattr,
               .depths = m->tints, .attr_counts = m->tints + n};
    int r = 0;
    Span *spans[7] = {sp, NULL, sp + n, sp + 2 * n, NULL, sp + 3 * n, sp + 3 * n + nattr};
    int32_t *ints[7] = {NULL, m->tints, NULL, NULL, m->tints + n, NULL, NULL};
    for (int k = 0; k < 7 && !r; k++)
        r = spans[k] ? utf8_column(col[k], spans[k]) : int_column(col[k], ints[k]);
    if (r < 0)
        goto done;
    if (r > 0) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    start_message(m);
    out = match_loaded(m, doc_load_table(&m->doc, &t, &m->vocab));
done:
    for (int k = 0; k < 7; k++)
        Py_XDECREF(col[k]);
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

/* Is guard g one whose predicates can be copied into a block: no position(), and
 * each a leaf (its operands are no offsets in m->code)? */
static int inlinable(const Matcher *m, int32_t g)
{
    const Guard *gd = &m->guards[g];
    if (gd->positional)
        return 0;
    for (int32_t j = 0; j < gd->npreds; j++) {
        int32_t op = m->code.a[m->guard_preds.a[gd->preds + j]];
        if (op == OP_NOT || op == OP_AND || op == OP_OR)
            return 0;
    }
    return 1;
}

/* Append guard g (-1: none) to out as block words: G_NONE; G_REF g (evaluated by
 * guard_check, memoised); or G_INLINE len, then its predicates' code, a nested
 * path's as NESTED_IN len r nsteps and its steps. 0, or -1 when out of memory. */
static int emit_guard(Matcher *m, IVec *out, int32_t g)
{
    if (g < 0)
        return ivec_push(out, G_NONE);
    if (!inlinable(m, g))
        return ivec_push(out, G_REF) | ivec_push(out, g);
    int32_t at = out->n;
    if (ivec_push(out, G_INLINE) < 0 || ivec_push(out, 0) < 0)
        return -1;
    const Guard *gd = &m->guards[g];
    for (int32_t j = 0; j < gd->npreds; j++) {
        const int32_t *c = m->code.a + m->guard_preds.a[gd->preds + j];
        if (c[0] == OP_NESTED) {
            Range rg = m->rels[c[1]];
            if (ivec_push(out, OP_NESTED_IN) < 0 || ivec_push(out, 2 + rg.words) < 0
                || ivec_push(out, c[1]) < 0 || ivec_push(out, rg.n) < 0
                || ivec_reserve(out, out->n + rg.words) < 0)
                return -1;
            memcpy(out->a + out->n, m->rel_words.a + rg.first, (size_t)rg.words * sizeof *out->a);
            out->n += rg.words;
            continue;
        }
        int32_t n = pred_size(c);
        if (ivec_reserve(out, out->n + n) < 0)
            return -1;
        memcpy(out->a + out->n, c, (size_t)n * sizeof *c);
        out->n += n;
    }
    out->a[at + 1] = out->n - at - 2;
    return 0;
}

/* Are the (axis, test, guard) triples in w valid? Else a ValueError. */
static int check_steps(const Matcher *m, const IVec *w)
{
    for (int32_t k = 0; k < w->n; k += 3)
        if ((w->a[k] != AXIS_CHILD && w->a[k] != AXIS_DESC) || w->a[k + 1] < -1
            || w->a[k + 1] >= (int32_t)m->vocab.n || w->a[k + 2] < -1 || w->a[k + 2] >= m->nguards) {
            PyErr_SetString(PyExc_ValueError, "a step's axis, name or guard is unknown");
            return -1;
        }
    return 0;
}

/* Are the values in v interned? Else a ValueError. */
static int check_values(const Matcher *m, const IVec *v)
{
    for (int32_t k = 0; k < v->n; k++)
        if (v->a[k] < 0 || (size_t)v->a[k] >= m->vocab.n) {
            PyErr_SetString(PyExc_ValueError, "a value of the need is not interned");
            return -1;
        }
    return 0;
}

/* Append (axis, test, guard) steps as block words: axis, test, then the guard. */
static int emit_steps(Matcher *m, IVec *out, const IVec *w)
{
    for (int32_t k = 0; k < w->n; k += 3)
        if (ivec_push(out, w->a[k]) < 0 || ivec_push(out, w->a[k + 1]) < 0
            || emit_guard(m, out, w->a[k + 2]) < 0)
            return -1;
    return 0;
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
    if (check_steps(m, &w) < 0) {
        free(w.a);
        return NULL;
    }
    if (grow_array((void **)&m->rels, &m->caprels, m->nrels + 1, sizeof *m->rels) < 0)
        goto oom;
    Range rg = {m->rel_words.n, w.n / 3, 0};
    if (emit_steps(m, &m->rel_words, &w) < 0) {
        m->rel_words.n = rg.first;
        goto oom;
    }
    rg.words = m->rel_words.n - rg.first;
    free(w.a);
    m->rels[m->nrels] = rg;
    return PyLong_FromLong(m->nrels++);
oom:
    free(w.a);
    return PyErr_NoMemory();
}

static IVec *posting_list(Matcher *m, int32_t table, int32_t key)
{
    return table == KEY_BASE ? &m->by_base[key] : table == KEY_SELF ? &m->by_self[key] : &m->always;
}

/* The id in v of the words of the block at b (of length len) from the start of step
 * 'from' to that of step 'to' (its end when 'to' is its number of steps): -2 when out
 * of memory. */
static int32_t intern_steps(Vocab *v, const int32_t *b, int32_t len, int32_t from, int32_t to)
{
    int32_t start = b[BLOCK_OFFSETS + from], end = to < b[B_NSTEPS] ? b[BLOCK_OFFSETS + to] : len;
    int32_t id = vocab_intern(v, (const char *)(b + start), (size_t)(end - start) * sizeof *b);
    return id < 0 ? -2 : id;
}

/* The id in m->roots of the first step of the block at b (of length len), its arrays
 * grown to hold it: -2 when out of memory. */
static int32_t root_id(Matcher *m, const int32_t *b, int32_t len)
{
    int32_t r = intern_steps(&m->roots, b, len, 0, 1);
    size_t cap = m->caproots;
    if (r < 0 || grow_array((void **)&m->root_gen, &cap, m->roots.n, sizeof *m->root_gen) < 0)
        return -2;
    cap = m->caproots;
    if (grow_array((void **)&m->root_ok, &cap, m->roots.n, sizeof *m->root_ok) < 0)
        return -2;
    m->caproots = cap;
    return r;
}

/* How many steps follow step 'at' of the block at b if all are '*' without
 * predicates (on either axis: then a subtree that many levels high holds them), else
 * -1. */
static int32_t star_steps(const int32_t *b, int32_t at)
{
    for (int32_t i = at + 1; i < b[B_NSTEPS]; i++)
        if (block_step(b, i)[1] >= 0 || block_step(b, i)[2] != G_NONE)
            return -1;
    return b[B_NSTEPS] - 1 - at;
}

/* The tail after step 'at' of the block at b (of length len) to t[0] (B_TAIL: its id
 * in m->tails, -1 if only unguarded '*' steps or none follow) and t[1] (B_TAIL_STARS:
 * how many of those); -1 when out of memory. */
static int tail_of(Matcher *m, const int32_t *b, int32_t len, int32_t at, int32_t *t)
{
    int32_t stars = star_steps(b, at);
    t[0] = stars >= 0 ? -1 : intern_steps(&m->tails, b, len, at + 1, b[B_NSTEPS]);
    t[1] = stars >= 0 ? stars : 0;
    return t[0] == -2 ? -1 : 0;
}

/* The anchor of a query whose (axis, test, guard) steps are w and whose last step
 * that names a tag is 'at', to out[0] and out[1]: its deepest step from 'at' on whose
 * guard requires an attribute or a text node to equal a literal, and that value (-1,
 * -1: none). Only elements holding the value can bind the step; where they are fewer
 * than those with the tag, block_matches starts from them. (Not from a step before
 * 'at': checking the steps after it downwards costs more than it saves.) */
static void anchor_of(const Matcher *m, const IVec *w, int32_t at, int32_t *out)
{
    out[0] = out[1] = -1;
    for (int32_t k = 3 * at; k < w->n; k += 3) {
        int32_t g = w->a[k + 2];
        if (g < 0)
            continue;
        const Guard *gd = &m->guards[g];
        for (int32_t j = 0; j < gd->npreds; j++) {
            const int32_t *c = m->code.a + m->guard_preds.a[gd->preds + j];
            if (c[0] == OP_ATTR && c[2] == CMP_SEQ) {
                out[0] = k / 3;
                out[1] = c[4];
            } else if (c[0] == OP_TEXT && c[1] == CMP_SEQ) {
                out[0] = k / 3;
                out[1] = c[2];
            }
        }
    }
}

/* Move key to the front of need (a base list's records start with its own value:
 * take_candidates need not test it); -1 if need lacks it. */
static int key_first(IVec *need, int32_t key)
{
    for (int32_t k = 0; k < need->n; k++)
        if (need->a[k] == key) {
            need->a[k] = need->a[0];
            need->a[0] = key;
            return 0;
        }
    return -1;
}

/* How many children of one name a step (name test, guard id) needs: its guard has
 * a predicate position() = n, >= n or > n - 1 (each counts elements among those
 * named test, after the predicates before it, so at least n such siblings are
 * there); at most MAX_COUNT, 0 if none or the test is '*'. */
static int32_t position_need(const Matcher *m, int32_t test, int32_t g)
{
    if (test < 0 || g < 0)
        return 0;
    const Guard *gd = &m->guards[g];
    int32_t best = 0;
    for (int32_t j = 0; j < gd->npreds; j++) {
        const int32_t *c = m->code.a + m->guard_preds.a[gd->preds + j];
        if (c[0] != OP_POS)
            continue;
        double x = m->nums[c[2]], n;
        if (c[1] == REL_EQ || c[1] == REL_GE)
            n = ceil(x);
        else if (c[1] == REL_GT)
            n = floor(x) + 1;
        else
            continue;
        if (!(n >= 2)) /* NaN too */
            continue;
        int32_t k = n > MAX_COUNT ? MAX_COUNT : (int32_t)n;
        if (k > best)
            best = k;
    }
    return best;
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
    if (check_steps(m, &w) < 0 || check_values(m, &nb) < 0 || check_values(m, &ns) < 0)
        goto fail;
    if (key_table == KEY_BASE && key_first(&nb, key) < 0) {
        PyErr_SetString(PyExc_ValueError, "the key is not one of the values the query needs");
        goto fail;
    }
    for (int32_t k = 3; k < w.n; k += 3) /* the (parent, child) tag pairs it needs too */
        if (w.a[k] == AXIS_CHILD && w.a[k + 1] >= 0 && w.a[k - 2] >= 0) {
            int32_t edge = edge_value(m, w.a[k - 2], w.a[k + 1], 1);
            if (edge < 0 || ivec_push(&nb, edge) < 0)
                goto oom;
        }
    for (int32_t k = 0; k < w.n; k += 3) { /* positions: the siblings they need */
        int32_t need = position_need(m, w.a[k + 1], w.a[k + 2]);
        if (need < 2)
            continue;
        int32_t parent = k && w.a[k] == AXIS_CHILD ? w.a[k - 2] : -1;
        int32_t v = count_value(m, parent < 0 ? -1 : parent, w.a[k + 1], need, 1);
        if (v < 0 || ivec_push(&nb, v) < 0)
            goto oom;
    }
    if (grow_array((void **)&m->queries, &m->capqueries, m->nqueries + 1, sizeof *m->queries) < 0)
        goto oom;
    int32_t block = m->blocks.n, n = w.n / 3, at = n - 1;
    if (ivec_reserve(&m->blocks, block + BLOCK_OFFSETS + n) < 0)
        goto oom;
    while (at > 0 && w.a[3 * at + 1] < 0)
        at--;
    int32_t *b = m->blocks.a + block;
    b[B_QUERY] = m->nqueries;
    b[B_NSTEPS] = n;
    anchor_of(m, &w, at, b + B_ANCHOR);
    b[B_LAST_NAMED] = at;
    m->has_anchors |= b[B_ANCHOR] >= 0;
    m->blocks.n = block + BLOCK_OFFSETS + n;
    if (emit_steps(m, &m->blocks, &w) < 0)
        goto oom_block;
    b = m->blocks.a + block;
    for (int32_t i = 0, off = BLOCK_OFFSETS + n; i < n; i++) {
        b[BLOCK_OFFSETS + i] = off;
        off += 2 + guard_size(b + off + 2);
    }
    int32_t len = m->blocks.n - block;
    b[B_ROOT] = w.a[0] == AXIS_CHILD ? root_id(m, b, len) : -1;
    int32_t tail[2], anchor_tail[2] = {-1, 0};
    if (b[B_ROOT] == -2 || tail_of(m, b, len, at, tail) < 0
        || (b[B_ANCHOR] >= 0 && tail_of(m, b, len, b[B_ANCHOR], anchor_tail) < 0))
        goto oom_block;
    b[B_TAIL] = tail[0];
    b[B_TAIL_STARS] = tail[1];
    b[B_ANCHOR_TAIL] = anchor_tail[0];
    b[B_ANCHOR_TAIL_STARS] = anchor_tail[1];
    for (int32_t k = 0; k < nb.n; k++) { /* trigrams it needs: the message's filter */
        const VStr *v = &m->vocab.strs[nb.a[k]];
        if (v->n < 2 || v->s[0] != 2)
            continue;
        if (!m->gram_bits && !(m->gram_bits = calloc(GRAM_BITS / 64, sizeof *m->gram_bits)))
            goto oom_block;
        uint32_t h = gram_hash(v->s + 1, v->n - 1);
        m->gram_bits[h / 64] |= (uint64_t)1 << (h % 64);
    }
    IVec *list = posting_list(m, key_table, key);
    int32_t end = list->n;
    int ok = ivec_push(list, block) == 0 && ivec_push(list, m->blocks.n - block) == 0
          && ivec_push(list, nb.n) == 0 && ivec_push(list, ns.n) == 0;
    for (int32_t k = 0; ok && k < nb.n; k++)
        ok = ivec_push(list, nb.a[k]) == 0;
    for (int32_t k = 0; ok && k < ns.n; k++)
        ok = ivec_push(list, ns.a[k]) == 0;
    if (!ok) {
        list->n = end;
        goto oom_block;
    }
    m->nself_keyed += key_table == KEY_SELF;
    for (int32_t k = 0; k < ns.n; k++) {
        size_t c = len_class(m->vocab.strs[ns.a[k]].n);
        m->self_lens[c / 64] |= (uint64_t)1 << (c % 64);
    }
    Py_INCREF(ids);
    m->queries[m->nqueries] = (Query){block, key_table, key, ids};
    set_block_ids(m, &m->queries[m->nqueries]);
    m->live++;
    m->changed++;
    free(w.a);
    free(nb.a);
    free(ns.a);
    return PyLong_FromLong(m->nqueries++);
oom_block:
    m->blocks.n = block;
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
    set_block_ids(m, q);
    Py_RETURN_NONE;
}

static PyObject *Matcher_discard(Matcher *m, PyObject *arg)
{
    Query *q = query_arg(m, arg);
    if (!q)
        return NULL;
    IVec *list = posting_list(m, q->key_table, q->key);
    for (int32_t k = 0; k < list->n; k += record_words(list->a + k))
        if (list->a[k] == q->block)
            list->a[k] = -1;
    Py_CLEAR(q->ids);
    m->live--;
    m->changed++;
    Py_RETURN_NONE;
}

static PyObject *Matcher_stats(Matcher *m, PyObject *Py_UNUSED(ignored))
{
    return Py_BuildValue("{s:i,s:i,s:n,s:i,s:i,s:n,s:K,s:K,s:K,s:K}", "queries", m->live,
                         "discarded", m->nqueries - m->live, "values", (Py_ssize_t)m->vocab.n,
                         "guards", m->nguards, "nested_paths", m->nrels, "block_words",
                         (Py_ssize_t)m->blocks.n, "messages", m->messages, "filed_hits", m->filed_hits,
                         "need_met", m->need_met, "matched", m->matched);
}

/* -- the type ----------------------------------------------------------------- */

static int Matcher_init(Matcher *m, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"element_type", NULL};
    PyObject *etype;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!", kwlist, &PyType_Type, &etype))
        return -1;
    if (m->element_type) {
        PyErr_SetString(PyExc_RuntimeError, "Matcher is already initialised");
        return -1;
    }
    doc_init(&m->doc);
    if (vocab_init(&m->vocab) < 0 || vocab_init(&m->roots) < 0 || memo_init(&m->m_guard) < 0
        || memo_init(&m->m_rel) < 0 || memo_init(&m->m_pos) < 0 || memo_init(&m->m_tail) < 0
        || vocab_init(&m->tails) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    Py_INCREF(etype);
    m->element_type = (PyTypeObject *)etype;
    m->rekey_at = FIRST_REKEY;
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
    free(m->gram_bits);
    free(m->ctags.a);
    free(m->df);
    free(m->always.a);
    free(m->present);
    free(m->self_present);
    free(m->vlen);
    ElemIndex *indexes[] = {&m->by_tag, &m->by_value};
    for (int k = 0; k < 2; k++) {
        free(indexes[k]->stamp);
        free(indexes[k]->start);
        free(indexes[k]->count);
        free(indexes[k]->keys.a);
        free(indexes[k]->elems.a);
    }
    free(m->present_ids.a);
    free(m->self_ids.a);
    free(m->code.a);
    free(m->guard_preds.a);
    free(m->cands.a);
    free(m->idv);
    free(m->tspans);
    free(m->tints);
    free(m->rel_words.a);
    free(m->nums);
    free(m->guards);
    free(m->rels);
    free(m->queries);
    memo_free(&m->m_guard);
    memo_free(&m->m_rel);
    memo_free(&m->m_pos);
    memo_free(&m->m_tail);
    vocab_free(&m->tails);
    free(m->blocks.a);
    doc_free(&m->doc);
    vocab_free(&m->vocab);
    vocab_free(&m->roots);
    free(m->root_gen);
    free(m->root_ok);
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
    {"match_table", (PyCFunction)Matcher_match_table, METH_VARARGS,
     "match_table(tags, depths, texts, tails, attr_counts, attr_names, attr_values) -> "
     "match() on a formats.Message's columns (None: they describe no message it models)"},
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

/* number(s) -> float: XPath number() of a str, as every part of yfilter computes it
 * (yfilter.values.number is this function). */
static PyObject *module_number(PyObject *self, PyObject *arg)
{
    (void)self;
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(arg, &n);
    if (!s)
        return NULL;
    return PyFloat_FromDouble(xpath_number(s, (size_t)n));
}

static PyMethodDef module_methods[] = {
    {"number", module_number, METH_O,
     "number(s) -> XPath number() of the string s, as libxml2 computes it"},
    {NULL, NULL, 0, NULL},
};

/* The codes of the predicate code and of add_query's arguments, by name: the one
 * definition (the enums above), which yfilter.native reads as CODES. */
static PyObject *codes(void)
{
    static const struct { const char *group, *name; long value; } table[] = {
        {"op", "ALWAYS", OP_ALWAYS}, {"op", "ATTR", OP_ATTR}, {"op", "TEXT", OP_TEXT},
        {"op", "SELF", OP_SELF}, {"op", "POS", OP_POS}, {"op", "NESTED", OP_NESTED},
        {"op", "FUNC", OP_FUNC}, {"op", "NOT", OP_NOT}, {"op", "AND", OP_AND},
        {"op", "OR", OP_OR}, {"op", "NESTED_IN", OP_NESTED_IN},
        {"cmp", "EXISTS", CMP_EXISTS}, {"cmp", "SEQ", CMP_SEQ}, {"cmp", "SNE", CMP_SNE},
        {"cmp", "NUM", CMP_NUM},
        {"rel", "=", REL_EQ}, {"rel", "!=", REL_NE}, {"rel", "<", REL_LT},
        {"rel", "<=", REL_LE}, {"rel", ">", REL_GT}, {"rel", ">=", REL_GE},
        {"fn", "contains", FN_CONTAINS}, {"fn", "starts-with", FN_STARTS_WITH},
        {"axis", "/", AXIS_CHILD}, {"axis", "//", AXIS_DESC},
        {"key", "none", KEY_NONE}, {"key", "base", KEY_BASE}, {"key", "self", KEY_SELF},
        {"guard", "NONE", G_NONE}, {"guard", "REF", G_REF}, {"guard", "INLINE", G_INLINE},
    };
    PyObject *out = PyDict_New();
    if (!out)
        return NULL;
    for (size_t k = 0; k < sizeof table / sizeof *table; k++) {
        PyObject *group = PyDict_GetItemString(out, table[k].group); /* borrowed */
        if (!group) {
            group = PyDict_New();
            if (!group || PyDict_SetItemString(out, table[k].group, group) < 0) {
                Py_XDECREF(group);
                Py_DECREF(out);
                return NULL;
            }
            Py_DECREF(group); /* the dict holds it */
        }
        PyObject *v = PyLong_FromLong(table[k].value);
        if (!v || PyDict_SetItemString(group, table[k].name, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(v);
    }
    return out;
}

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "yfilter._matcher",
    "The native per-message runtime of yfilter (see yfilter.native).", -1, module_methods,
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
    PyObject *c = codes();
    if (!c || PyModule_AddObject(mod, "CODES", c) < 0) {
        Py_XDECREF(c);
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
