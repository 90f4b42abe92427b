/* The frontier's memo of offered URLs (crawlfleet/frontier/offered.py, decisions 0022, 0067).
 *
 * Each URL is held as two hashes in flat arrays, open addressing with linear probing, at
 * most 3/4 full: Python's hash of the str (SipHash, keyed per process; 0 is taken as 1, since
 * 0 marks a free slot) and the CRC-32 of its UTF-8 bytes (lone surrogates passed through, as
 * Python's "surrogatepass" does): 12 bytes a slot. It holds at most 3/4 of its slots, so a
 * probe always meets a free one; it doubles rather than pass that, up to max_slots, past which
 * add() remembers no more (and forgets nothing).
 *
 * The same table and the same two hashes as the pure-Python memo it replaces; seen() costs
 * ~60 ns here against ~300-440 ns there (an embedded crawl asks ~29 times a page).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stddef.h>
#include <stdint.h>

#define FIRST_SLOTS ((Py_ssize_t)1 << 16)
#define MAX_SLOTS ((Py_ssize_t)1 << 22)

static uint32_t crc_table[256];

static void fill_crc_table(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[n] = c;
    }
}

static uint32_t crc32_of(const char *data, Py_ssize_t len) {
    uint32_t c = 0xFFFFFFFFu;
    for (Py_ssize_t i = 0; i < len; i++) c = crc_table[(c ^ (unsigned char)data[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

typedef struct {
    PyObject_HEAD
    uint64_t *keys; /* 0: a free slot */
    uint32_t *tags;
    Py_ssize_t slots; /* a power of two */
    Py_ssize_t count;
    Py_ssize_t max_slots;
} Memo;

/* The key of url, or 0 with an exception set. */
static uint64_t key_of(PyObject *url) {
    if (!PyUnicode_Check(url)) {
        PyErr_Format(PyExc_TypeError, "a URL must be a str, not %.100s", Py_TYPE(url)->tp_name);
        return 0;
    }
    Py_hash_t hash = PyObject_Hash(url);
    if (hash == -1 && PyErr_Occurred()) return 0;
    uint64_t key = (uint64_t)hash;
    return key ? key : 1;
}

/* The tag of url (a str), or sets *failed with an exception set. */
static uint32_t tag_of(PyObject *url, int *failed) {
    Py_ssize_t len;
    const char *utf8 = PyUnicode_AsUTF8AndSize(url, &len);
    if (utf8 != NULL) return crc32_of(utf8, len);
    if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
        *failed = 1;
        return 0;
    }
    PyErr_Clear(); /* a lone surrogate: its bytes as "surrogatepass" writes them */
    PyObject *encoded = PyUnicode_AsEncodedString(url, "utf-8", "surrogatepass");
    if (encoded == NULL) {
        *failed = 1;
        return 0;
    }
    uint32_t tag = crc32_of(PyBytes_AS_STRING(encoded), PyBytes_GET_SIZE(encoded));
    Py_DECREF(encoded);
    return tag;
}

/* The slot holding (key, tag), else the free slot where it goes. */
static Py_ssize_t slot_of(const Memo *memo, uint64_t key, uint32_t tag) {
    size_t mask = (size_t)memo->slots - 1;
    size_t slot = (size_t)key & mask;
    for (;;) {
        uint64_t held = memo->keys[slot];
        if (held == 0 || (held == key && memo->tags[slot] == tag)) return (Py_ssize_t)slot;
        slot = (slot + 1) & mask;
    }
}

static int put(Memo *memo, uint64_t key, uint32_t tag) {
    Py_ssize_t slot = slot_of(memo, key, tag);
    if (memo->keys[slot]) return 0;
    memo->keys[slot] = key;
    memo->tags[slot] = tag;
    return 1;
}

/* Zeroed arrays of slots in place of the memo's, the old ones (NULL at first) in *old_keys
 * and *old_tags: 0, or -1 out of memory (the memo unchanged). */
static int new_table(Memo *memo, Py_ssize_t slots, uint64_t **old_keys, uint32_t **old_tags) {
    uint64_t *keys = PyMem_Calloc((size_t)slots, sizeof(uint64_t));
    uint32_t *tags = PyMem_Calloc((size_t)slots, sizeof(uint32_t));
    if (keys == NULL || tags == NULL) {
        PyMem_Free(keys);
        PyMem_Free(tags);
        PyErr_NoMemory();
        return -1;
    }
    *old_keys = memo->keys;
    *old_tags = memo->tags;
    memo->keys = keys;
    memo->tags = tags;
    memo->slots = slots;
    return 0;
}

/* Double the slots and place every entry again: 1, 0 at max_slots, -1 out of memory. */
static int grow(Memo *memo) {
    Py_ssize_t old_slots = memo->slots;
    if (old_slots * 2 > memo->max_slots) return 0;
    uint64_t *old_keys;
    uint32_t *old_tags;
    if (new_table(memo, old_slots * 2, &old_keys, &old_tags) < 0) return -1;
    for (Py_ssize_t i = 0; i < old_slots; i++) {
        if (old_keys[i]) put(memo, old_keys[i], old_tags[i]);
    }
    PyMem_Free(old_keys);
    PyMem_Free(old_tags);
    return 1;
}

static int is_power_of_two(Py_ssize_t n) { return n > 0 && (n & (n - 1)) == 0; }

static int memo_init(Memo *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"first_slots", "max_slots", NULL};
    Py_ssize_t first = FIRST_SLOTS, max_slots = MAX_SLOTS;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|nn:OfferedUrls", names, &first, &max_slots))
        return -1;
    if (!is_power_of_two(first) || max_slots < first) {
        PyErr_SetString(PyExc_ValueError,
                        "first_slots must be a power of two, and max_slots at least as many");
        return -1;
    }
    uint64_t *old_keys;
    uint32_t *old_tags;
    if (new_table(self, first, &old_keys, &old_tags) < 0) return -1;
    PyMem_Free(old_keys);
    PyMem_Free(old_tags);
    self->count = 0;
    self->max_slots = max_slots;
    return 0;
}

static void memo_dealloc(Memo *self) {
    PyMem_Free(self->keys);
    PyMem_Free(self->tags);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int ready(const Memo *memo) {
    if (memo->keys != NULL) return 1;
    PyErr_SetString(PyExc_RuntimeError, "OfferedUrls.__init__ was not called");
    return 0;
}

static PyObject *memo_seen(Memo *self, PyObject *url) {
    if (!ready(self)) return NULL;
    uint64_t key = key_of(url);
    if (key == 0) return NULL;
    size_t mask = (size_t)self->slots - 1;
    size_t slot = (size_t)key & mask;
    uint64_t held = self->keys[slot];
    if (!held) Py_RETURN_FALSE; /* the tag only when a slot is held */
    int failed = 0;
    uint32_t tag = tag_of(url, &failed);
    if (failed) return NULL;
    while (held) {
        if (held == key && self->tags[slot] == tag) Py_RETURN_TRUE;
        slot = (slot + 1) & mask;
        held = self->keys[slot];
    }
    Py_RETURN_FALSE;
}

static PyObject *memo_add(Memo *self, PyObject *urls) {
    if (!ready(self)) return NULL;
    PyObject *iterator = PyObject_GetIter(urls);
    if (iterator == NULL) return NULL;
    PyObject *url;
    while ((url = PyIter_Next(iterator)) != NULL) {
        if ((self->count + 1) * 4 > self->slots * 3) { /* one free slot at least, always */
            int grown = grow(self);
            if (grown <= 0) {
                Py_DECREF(url);
                Py_DECREF(iterator);
                if (grown < 0) return NULL;
                Py_RETURN_NONE; /* at max_slots: no more is remembered */
            }
        }
        uint64_t key = key_of(url);
        int failed = key == 0;
        uint32_t tag = failed ? 0 : tag_of(url, &failed);
        Py_DECREF(url);
        if (failed) {
            Py_DECREF(iterator);
            return NULL;
        }
        self->count += put(self, key, tag);
    }
    Py_DECREF(iterator);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

static Py_ssize_t memo_len(Memo *self) { return self->count; }

static PyMethodDef memo_methods[] = {
    {"seen", (PyCFunction)memo_seen, METH_O,
     "seen(url, /)\n--\n\nWhether url was offered before (held as its two hashes)."},
    {"add", (PyCFunction)memo_add, METH_O,
     "add(urls, /)\n--\n\nHold each URL of urls; past max_slots, remember no more."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef memo_members[] = {
    {"max_slots", T_PYSSIZET, offsetof(Memo, max_slots), READONLY,
     "The most slots the table grows to (12 bytes each, 3/4 of them used)."},
    {NULL, 0, 0, 0, NULL},
};

static PySequenceMethods memo_as_sequence = {
    .sq_length = (lenfunc)memo_len,
};

static PyTypeObject MemoType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "crawlfleet.frontier._offered.OfferedUrls",
    .tp_doc = "OfferedUrls(first_slots=65536, max_slots=4194304)\n--\n\n"
              "URLs offered to the store, held as hashes; grows up to max_slots.",
    .tp_basicsize = sizeof(Memo),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)memo_init,
    .tp_dealloc = (destructor)memo_dealloc,
    .tp_methods = memo_methods,
    .tp_members = memo_members,
    .tp_as_sequence = &memo_as_sequence,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "crawlfleet.frontier._offered", NULL, -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__offered(void) {
    fill_crc_table();
    if (PyType_Ready(&MemoType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "OfferedUrls", (PyObject *)&MemoType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
