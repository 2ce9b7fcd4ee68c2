/* A message as flat tables, read from the libxml2 tree lxml parsed (no copy of the
 * text unless several libxml2 nodes make one XPath text node or attribute value), or
 * from the columns of a decoded message (Table).
 *
 * Elements are in document order (preorder), the root at depth 1; the subtree of
 * element i is i+1 .. end-1. Its attributes and text nodes are ranges of their own
 * tables; a text node is what XPath and lxml call one: a run of adjacent text and
 * CDATA nodes (a comment or processing instruction ends it). Names are the vocabulary
 * ids of the Clark names lxml reports ({uri}local), -1 when no profile uses them. */
#ifndef ONYX_DOC_H
#define ONYX_DOC_H

#include <libxml/tree.h>

#include "tables.h"

typedef struct {
    const char *s;
    size_t n;
} Span;

typedef struct {
    const xmlNode *node;
    int32_t tag, depth, parent, end;
    int32_t attr0, nattr, text0, ntext;
    int32_t nchild;
    int32_t height; /* levels of elements below it (0: none) */
} Elem;

typedef struct {
    int32_t name, atom;  /* ids of the name and of name NUL value, or -1 */
    Span value;
} DAttr;

typedef struct {
    Span s;
    int32_t id;  /* its vocabulary id, or -1 */
} DText;

/* A message as columns (a decoded formats.Message), element after element in
 * document order: its Clark name, depth (the root at 1), text (before its first
 * child) and tail (after it, before its next sibling; empty: no text node), and
 * attribute count; then the attributes' names and values, element after element. */
typedef struct {
    size_t n, nattr;
    const Span *tags, *texts, *tails, *attr_names, *attr_values;
    const int32_t *depths, *attr_counts;
} Table;

/* A bump allocator for the strings one message needs built (reset per message). */
typedef struct Chunk Chunk;

typedef struct {
    Chunk *head;
} Arena;

typedef struct {
    Elem *el;
    size_t nel, capel;
    DAttr *at;
    size_t nat, capat;
    DText *tx;
    size_t ntx, captx;
    Span *sv;  /* string-values, computed on demand (sv_ok) */
    unsigned char *sv_ok;
    size_t capsv;
    const Table *table; /* the columns loaded from, or NULL: a tree */
    Arena arena;
} Doc;

enum { DOC_OK = 0, DOC_UNSUPPORTED = 1, DOC_NOMEM = -1 };

void doc_init(Doc *d);
void doc_free(Doc *d);
/* Read the tree under root (an element). DOC_UNSUPPORTED: it holds a node kind this
 * reader does not model (an entity reference, say), or too many elements; the
 * caller then uses the general runtime. */
int doc_load(Doc *d, const xmlNode *root, const Vocab *v);
/* Read a message's columns (borrowed until the next load). DOC_UNSUPPORTED: the
 * depths describe no tree, the attribute counts do not add up to the attributes, or
 * too many elements; the caller then uses the general runtime. */
int doc_load_table(Doc *d, const Table *t, const Vocab *v);
/* The XPath string-value of element i (NULL s on out of memory). */
Span doc_string_value(Doc *d, int32_t i);
/* The length of every element's string-value (out[i] for element i), none built. */
void doc_value_lengths(const Doc *d, size_t *out);

#endif
