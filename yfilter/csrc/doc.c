#include "doc.h"

#include <stdlib.h>
#include <string.h>

#define MAX_ELEMENTS (1 << 24) /* element indexes fit the memo keys' 24 bits */

struct Chunk {
    Chunk *next;
    size_t used, cap;
    char data[];
};

static char *arena_alloc(Arena *a, size_t n)
{
    Chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        Chunk *fresh = malloc(sizeof *fresh + cap);
        if (!fresh)
            return NULL;
        fresh->next = c;
        fresh->used = 0;
        fresh->cap = cap;
        a->head = c = fresh;
    }
    char *p = c->data + c->used;
    c->used += n;
    return p;
}

/* Keep one chunk: most messages fit in it. */
static void arena_reset(Arena *a)
{
    Chunk *c = a->head;
    if (!c)
        return;
    Chunk *rest = c->next;
    while (rest) {
        Chunk *next = rest->next;
        free(rest);
        rest = next;
    }
    c->next = NULL;
    c->used = 0;
}

static void arena_free(Arena *a)
{
    arena_reset(a);
    free(a->head);
    a->head = NULL;
}

void doc_init(Doc *d)
{
    memset(d, 0, sizeof *d);
}

void doc_free(Doc *d)
{
    free(d->el);
    free(d->at);
    free(d->tx);
    free(d->sv);
    free(d->sv_ok);
    arena_free(&d->arena);
    memset(d, 0, sizeof *d);
}

/* The id of a node's Clark name ({href}local, as lxml spells it). */
static int32_t name_id(Doc *d, const Vocab *v, const xmlNs *ns, const xmlChar *name)
{
    size_t n = strlen((const char *)name);
    if (!ns || !ns->href)
        return vocab_find(v, (const char *)name, n);
    size_t h = strlen((const char *)ns->href);
    char *buf = arena_alloc(&d->arena, h + n + 2);
    if (!buf)
        return -1;
    buf[0] = '{';
    memcpy(buf + 1, ns->href, h);
    buf[h + 1] = '}';
    memcpy(buf + h + 2, name, n);
    return vocab_find(v, buf, h + n + 2);
}

static int is_text(const xmlNode *n)
{
    return n->type == XML_TEXT_NODE || n->type == XML_CDATA_SECTION_NODE;
}

static const char *content(const xmlNode *n)
{
    return n->content ? (const char *)n->content : "";
}

/* The text of nodes first .. before stop, joined (borrowed when it is one node). */
static int join(Doc *d, const xmlNode *first, const xmlNode *stop, Span *out)
{
    if (first->next == stop) {
        *out = (Span){content(first), strlen(content(first))};
        return DOC_OK;
    }
    size_t total = 0;
    for (const xmlNode *c = first; c != stop; c = c->next)
        total += strlen(content(c));
    char *buf = arena_alloc(&d->arena, total ? total : 1);
    if (!buf)
        return DOC_NOMEM;
    size_t at = 0;
    for (const xmlNode *c = first; c != stop; c = c->next) {
        size_t k = strlen(content(c));
        memcpy(buf + at, content(c), k);
        at += k;
    }
    *out = (Span){buf, total};
    return DOC_OK;
}

/* The id of x's name NUL value (an atom is only interned with its name), or -1.
 * 0, or -1 when out of memory. */
static int set_atom(Doc *d, const Vocab *v, DAttr *x)
{
    x->atom = -1;
    if (x->name < 0)
        return 0;
    const VStr *nm = &v->strs[x->name];
    char *buf = arena_alloc(&d->arena, nm->n + 1 + x->value.n);
    if (!buf)
        return -1;
    memcpy(buf, nm->s, nm->n);
    buf[nm->n] = '\0';
    memcpy(buf + nm->n + 1, x->value.s, x->value.n);
    x->atom = vocab_find(v, buf, nm->n + 1 + x->value.n);
    return 0;
}

static int load_attrs(Doc *d, Elem *e, const xmlNode *node, const Vocab *v)
{
    e->attr0 = (int32_t)d->nat;
    for (const xmlAttr *a = node->properties; a; a = a->next) {
        if (grow_array((void **)&d->at, &d->capat, d->nat + 1, sizeof *d->at) < 0)
            return DOC_NOMEM;
        DAttr *x = &d->at[d->nat++];
        for (const xmlNode *c = a->children; c; c = c->next)
            if (c->type != XML_TEXT_NODE)
                return DOC_UNSUPPORTED;  /* e.g. an entity reference lxml would expand */
        if (!a->children)
            x->value = (Span){"", 0};
        else if (join(d, a->children, NULL, &x->value) < 0)
            return DOC_NOMEM;
        x->name = name_id(d, v, a->ns, a->name);
        if (set_atom(d, v, x) < 0)
            return DOC_NOMEM;
    }
    e->nattr = (int32_t)d->nat - e->attr0;
    return DOC_OK;
}

static int load_texts(Doc *d, Elem *e, const xmlNode *node, const Vocab *v)
{
    e->text0 = (int32_t)d->ntx;
    for (const xmlNode *c = node->children; c;) {
        if (!is_text(c)) {
            if (c->type != XML_ELEMENT_NODE && c->type != XML_COMMENT_NODE && c->type != XML_PI_NODE)
                return DOC_UNSUPPORTED;
            c = c->next;
            continue;
        }
        const xmlNode *stop = c->next;
        while (stop && is_text(stop))
            stop = stop->next;
        if (grow_array((void **)&d->tx, &d->captx, d->ntx + 1, sizeof *d->tx) < 0)
            return DOC_NOMEM;
        DText *t = &d->tx[d->ntx++];
        if (join(d, c, stop, &t->s) < 0)
            return DOC_NOMEM;
        t->id = vocab_find(v, t->s.s, t->s.n);
        c = stop;
    }
    e->ntext = (int32_t)d->ntx - e->text0;
    return DOC_OK;
}

static int load(Doc *d, const xmlNode *node, int32_t depth, int32_t parent, const Vocab *v)
{
    if (d->nel >= MAX_ELEMENTS)
        return DOC_UNSUPPORTED;
    if (grow_array((void **)&d->el, &d->capel, d->nel + 1, sizeof *d->el) < 0)
        return DOC_NOMEM;
    int32_t me = (int32_t)d->nel++;
    Elem *e = &d->el[me];
    e->node = node;
    e->depth = depth;
    e->parent = parent;
    e->nchild = 0;
    if (parent >= 0)
        d->el[parent].nchild++;
    e->tag = name_id(d, v, node->ns, node->name);
    int r = load_attrs(d, e, node, v);
    if (r == DOC_OK)
        r = load_texts(d, &d->el[me], node, v);
    if (r != DOC_OK)
        return r;
    for (const xmlNode *c = node->children; c; c = c->next)
        if (c->type == XML_ELEMENT_NODE && (r = load(d, c, depth + 1, me, v)) != DOC_OK)
            return r;
    d->el[me].end = (int32_t)d->nel;
    return DOC_OK;
}

static void start_load(Doc *d, const Table *t)
{
    d->nel = d->nat = d->ntx = 0;
    d->table = t;
    arena_reset(&d->arena);
}

/* Each element's height (children come after their parent), and room for the
 * string-values of the elements loaded, none computed yet. */
static int finish_load(Doc *d)
{
    Elem *el = d->el;
    for (size_t i = 0; i < d->nel; i++)
        el[i].height = 0;
    for (int32_t i = (int32_t)d->nel - 1; i > 0; i--)
        if (el[el[i].parent].height <= el[i].height)
            el[el[i].parent].height = el[i].height + 1;
    if (grow_array((void **)&d->sv, &d->capsv, d->nel, sizeof *d->sv) < 0)
        return DOC_NOMEM;
    unsigned char *ok = realloc(d->sv_ok, d->capsv);
    if (!ok)
        return DOC_NOMEM;
    d->sv_ok = ok;
    memset(d->sv_ok, 0, d->nel);
    return DOC_OK;
}

int doc_load(Doc *d, const xmlNode *root, const Vocab *v)
{
    start_load(d, NULL);
    int r = load(d, root, 1, -1, v);
    return r != DOC_OK ? r : finish_load(d);
}

static int push_text(Doc *d, Span s, const Vocab *v)
{
    if (!s.n)
        return DOC_OK;
    if (grow_array((void **)&d->tx, &d->captx, d->ntx + 1, sizeof *d->tx) < 0)
        return DOC_NOMEM;
    d->tx[d->ntx++] = (DText){s, vocab_find(v, s.s, s.n)};
    return DOC_OK;
}

/* Elements with their tree (parent, end, children) from the depths; then each
 * element's attributes and text nodes (its text, then its children's tails). */
int doc_load_table(Doc *d, const Table *t, const Vocab *v)
{
    start_load(d, t);
    if (!t->n || t->n >= MAX_ELEMENTS || t->depths[0] != 1)
        return DOC_UNSUPPORTED;
    if (grow_array((void **)&d->el, &d->capel, t->n, sizeof *d->el) < 0
        || grow_array((void **)&d->at, &d->capat, t->nattr, sizeof *d->at) < 0)
        return DOC_NOMEM;
    Elem *el = d->el;
    for (int32_t i = 0; i < (int32_t)t->n; i++) {
        int32_t depth = t->depths[i], nattr = t->attr_counts[i];
        if (i && (depth < 2 || depth > el[i - 1].depth + 1))
            return DOC_UNSUPPORTED;
        if (nattr < 0 || d->nat + (size_t)nattr > t->nattr)
            return DOC_UNSUPPORTED;
        int32_t p = i - 1; /* the parent: the nearest element before, one level up */
        while (p >= 0 && el[p].depth >= depth)
            p = el[p].parent;
        el[i] = (Elem){.node = NULL, .tag = vocab_find(v, t->tags[i].s, t->tags[i].n),
                       .depth = depth, .parent = p, .end = i + 1, .attr0 = (int32_t)d->nat,
                       .nattr = nattr};
        if (p >= 0)
            el[p].nchild++;
        /* Last first: find_attr takes the first of a name, and a name repeated on one
         * element (only a corrupted decode has one) means its last value, as in the
         * message's own maps. */
        for (int32_t k = nattr - 1; k >= 0; k--) {
            DAttr *x = &d->at[d->nat++];
            Span name = t->attr_names[el[i].attr0 + k];
            x->name = vocab_find(v, name.s, name.n);
            x->value = t->attr_values[el[i].attr0 + k];
            if (set_atom(d, v, x) < 0)
                return DOC_NOMEM;
        }
    }
    d->nel = t->n;
    if (d->nat != t->nattr)
        return DOC_UNSUPPORTED;
    for (int32_t i = (int32_t)t->n - 1; i > 0; i--)
        if (el[i].end > el[el[i].parent].end)
            el[el[i].parent].end = el[i].end;
    for (int32_t i = 0; i < (int32_t)t->n; i++) {
        el[i].text0 = (int32_t)d->ntx;
        int r = push_text(d, t->texts[i], v);
        for (int32_t j = i + 1; r == DOC_OK && j < el[i].end; j = el[j].end)
            r = push_text(d, t->tails[j], v);
        if (r != DOC_OK)
            return r;
        el[i].ntext = (int32_t)d->ntx - el[i].text0;
    }
    return finish_load(d);
}

/* Text and CDATA below n, in document order (comments and PIs hold none). */
static size_t gather(const xmlNode *n, char *out)
{
    size_t at = 0;
    for (const xmlNode *c = n->children; c; c = c->next) {
        if (is_text(c)) {
            size_t k = strlen(content(c));
            if (out)
                memcpy(out + at, content(c), k);
            at += k;
        } else if (c->type == XML_ELEMENT_NODE) {
            at += gather(c, out ? out + at : NULL);
        }
    }
    return at;
}

static size_t put(char *out, size_t at, Span s)
{
    if (out)
        memcpy(out + at, s.s, s.n);
    return at + s.n;
}

/* The same from the columns, in document order without recursion (a decoded
 * message may nest deeper than a C stack): each element's text as it opens, its
 * tail once its subtree is done, i.e. before the next element that is no
 * descendant of it. */
static size_t gather_table(const Doc *d, int32_t i, char *out)
{
    const Table *t = d->table;
    const Elem *el = d->el;
    size_t at = 0;
    for (int32_t k = i; k <= el[i].end; k++) {
        int32_t open = k < el[i].end ? el[k].parent : i; /* what stays open at k */
        for (int32_t j = k - 1; k > i && j != open; j = el[j].parent)
            at = put(out, at, t->tails[j]);
        if (k < el[i].end)
            at = put(out, at, t->texts[k]);
    }
    return at;
}

/* Element i's string-value into out (NULL: only its length), from the tree or the
 * columns it was loaded from. */
static size_t gather_value(const Doc *d, int32_t i, char *out)
{
    return d->table ? gather_table(d, i, out) : gather(d->el[i].node, out);
}

Span doc_string_value(Doc *d, int32_t i)
{
    if (d->sv_ok[i])
        return d->sv[i];
    const Elem *e = &d->el[i];
    Span s;
    if (e->end == i + 1 && e->ntext <= 1) {  /* no element below: its one text node */
        s = e->ntext ? d->tx[e->text0].s : (Span){"", 0};
    } else {
        size_t n = gather_value(d, i, NULL);
        char *buf = arena_alloc(&d->arena, n ? n : 1);
        if (!buf)
            return (Span){NULL, 0};
        gather_value(d, i, buf);
        s = (Span){buf, n};
    }
    d->sv[i] = s;
    d->sv_ok[i] = 1;
    return s;
}

void doc_value_lengths(const Doc *d, size_t *out)
{
    const Elem *el = d->el;
    for (size_t i = 0; i < d->nel; i++) {
        size_t n = 0;
        for (int32_t k = 0; k < el[i].ntext; k++)
            n += d->tx[el[i].text0 + k].s.n;
        out[i] = n;
    }
    for (int32_t i = (int32_t)d->nel - 1; i > 0; i--) /* children after their parent */
        out[el[i].parent] += out[i];
}
