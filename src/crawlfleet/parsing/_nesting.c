/* The nesting pre-check's tag scan (crawlfleet/parsing/budget.py, decision 0063).
 *
 * deepest(html, stop_above) scans every tag of html in order: "<" then an optional "/" and
 * a name ([A-Za-z][A-Za-z0-9-]*, compared without case). A start tag opens an element of its
 * name, an end tag closes one if one of its name is open (else it is ignored, as a parser
 * does); the names of NOT_NESTING never open anything. It returns the deepest nesting seen,
 * or the first depth above stop_above, where it stops.
 *
 * The open elements are counted by name in a hash table (linear probing) that holds only the
 * names with an element open, so it never holds more than stop_above + 1 of them whatever
 * the page: a name whose last element closes leaves it (backward-shift deletion). The table
 * points into html, which is not copied. The scan lets the GIL go: a parse thread's page of
 * megabytes never holds the event loop.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const unsigned char *name; /* NULL: an empty slot */
    Py_ssize_t len;
    uint64_t hash;
    Py_ssize_t open; /* elements of the name open; NEVER_OPENS for NOT_NESTING */
} Slot;

typedef struct {
    Slot *slots;
    size_t mask; /* capacity - 1, a power of two */
    size_t used;
} Table;

#define NEVER_OPENS (-1)
#define FIRST_CAPACITY 128

/* Void elements and those whose start tag closes an open sibling (optional end tags): their
 * start tags do not deepen the tree. */
static const char *const NOT_NESTING[] = {
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
    "track", "wbr", "param", "keygen", "frame", "basefont", "bgsound", "p", "li", "dt", "dd",
    "tr", "td", "th", "option", "optgroup", "rb", "rt", "rp", "rtc", "thead", "tbody",
    "tfoot", "colgroup", "caption", "html", "head", "body",
};
#define N_NOT_NESTING (sizeof(NOT_NESTING) / sizeof(NOT_NESTING[0]))

static inline unsigned char lower(unsigned char c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

static inline int is_alpha(unsigned char c) { return (unsigned char)((c | 32) - 'a') < 26; }

static inline int is_name(unsigned char c) {
    return is_alpha(c) || (unsigned char)(c - '0') < 10 || c == '-';
}

static inline uint64_t hash_name(const unsigned char *s, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a over the lower-cased name */
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ lower(s[i])) * 1099511628211ULL;
    return h ^ (h >> 29);
}

static inline int same_name(const Slot *slot, const unsigned char *s, Py_ssize_t n, uint64_t h) {
    if (slot->hash != h || slot->len != n) return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (lower(slot->name[i]) != lower(s[i])) return 0;
    return 1;
}

/* The slot holding name s, or the empty slot where it would go. */
static inline Slot *find(const Table *t, const unsigned char *s, Py_ssize_t n, uint64_t h) {
    size_t i = (size_t)h & t->mask;
    while (t->slots[i].name != NULL && !same_name(&t->slots[i], s, n, h)) i = (i + 1) & t->mask;
    return &t->slots[i];
}

static int grow(Table *t) {
    size_t old_capacity = t->mask + 1, capacity = 2 * old_capacity;
    Slot *old = t->slots, *slots = calloc(capacity, sizeof(Slot));
    if (slots == NULL) return -1;
    t->slots = slots;
    t->mask = capacity - 1;
    for (size_t i = 0; i < old_capacity; i++) {
        if (old[i].name == NULL) continue;
        size_t j = (size_t)old[i].hash & t->mask;
        while (slots[j].name != NULL) j = (j + 1) & t->mask;
        slots[j] = old[i];
    }
    free(old);
    return 0;
}

/* The table every scan starts from, NOT_NESTING in it: filled once, at import. */
static Slot FIRST_SLOTS[FIRST_CAPACITY];

static void fill_first_slots(void) {
    Table t = {FIRST_SLOTS, FIRST_CAPACITY - 1, 0};
    for (size_t k = 0; k < N_NOT_NESTING; k++) {
        const unsigned char *name = (const unsigned char *)NOT_NESTING[k];
        Py_ssize_t n = (Py_ssize_t)strlen(NOT_NESTING[k]);
        uint64_t h = hash_name(name, n);
        *find(&t, name, n, h) = (Slot){name, n, h, NEVER_OPENS};
    }
}

/* Empties a slot, moving back each later slot of its cluster whose home is not after the
 * hole (else a lookup would stop at the hole before reaching it). */
static void remove_slot(Table *t, Slot *slot) {
    size_t hole = (size_t)(slot - t->slots), j = hole;
    t->slots[hole] = (Slot){0};
    t->used--;
    for (;;) {
        j = (j + 1) & t->mask;
        if (t->slots[j].name == NULL) return;
        size_t home = (size_t)t->slots[j].hash & t->mask;
        int stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (!stays) {
            t->slots[hole] = t->slots[j];
            t->slots[j] = (Slot){0};
            hole = j;
        }
    }
}

/* The deepest nesting, or the first depth above stop_above; -1 when memory ran out. */
static Py_ssize_t scan(const unsigned char *p, const unsigned char *end, Py_ssize_t stop_above) {
    Table t = {malloc(sizeof FIRST_SLOTS), FIRST_CAPACITY - 1, N_NOT_NESTING};
    if (t.slots == NULL) return -1;
    memcpy(t.slots, FIRST_SLOTS, sizeof FIRST_SLOTS);
    Py_ssize_t depth = 0, deepest = 0;
    while ((p = memchr(p, '<', (size_t)(end - p))) != NULL) {
        p++;
        int closing = p < end && *p == '/';
        p += closing;
        if (p >= end || !is_alpha(*p)) continue; /* not a tag: the next "<" may start one */
        const unsigned char *name = p;
        while (p < end && is_name(*p)) p++;
        Py_ssize_t n = p - name;
        uint64_t h = hash_name(name, n);
        Slot *slot = find(&t, name, n, h);
        if (slot->open == NEVER_OPENS) continue;
        if (closing) {
            if (slot->name != NULL) { /* an element of the name is open: this closes it */
                depth--;
                if (--slot->open == 0) remove_slot(&t, slot);
            }
            continue;
        }
        if (slot->name == NULL) {
            *slot = (Slot){name, n, h, 0};
            t.used++;
        }
        slot->open++;
        if (++depth > deepest && (deepest = depth) > stop_above) break;
        if (2 * t.used > t.mask && grow(&t) < 0) {
            deepest = -1;
            break;
        }
    }
    free(t.slots);
    return deepest;
}

static PyObject *deepest(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer html;
    Py_ssize_t stop_above, found;
    if (!PyArg_ParseTuple(args, "y*n:deepest", &html, &stop_above)) return NULL;
    const unsigned char *start = html.buf;
    Py_BEGIN_ALLOW_THREADS
    found = scan(start, start + html.len, stop_above);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&html);
    if (found < 0) return PyErr_NoMemory();
    return PyLong_FromSsize_t(found);
}

static PyMethodDef methods[] = {
    {"deepest", deepest, METH_VARARGS,
     "deepest(html, stop_above, /)\n--\n\nThe deepest nesting of html's tags, or the first "
     "depth above stop_above."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "crawlfleet.parsing._nesting", NULL, 0, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__nesting(void) {
    fill_first_slots();
    return PyModule_Create(&module);
}
