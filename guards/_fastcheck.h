/* Shared definitions of the guard program engine (_fastcheck.c, _fastcheck_capture.c).
 *
 * A Program is one guard set compiled for C: a table of nodes (the sources, each fetched
 * from its parent by one accessor: L[i], G[name], C[i].cell_contents, getattr, [key], type)
 * and a list of ops (one per guard, or one per tensor batch).  See _fastcheck.c for the
 * fast path and _fastcheck_capture.c for how a snapshot decides what cannot have changed.
 *
 * CPython versions: 3.11, 3.12 and 3.13 (GIL builds).  The differences are behind FC_*:
 *   - FC_WATCHERS (3.12+): a dict is known unchanged because a dict watcher
 *     (PyDict_AddWatcher) would have told us; 3.11 has no watchers, so the dict's
 *     ma_version_tag is compared instead.  Why not tags everywhere: 3.12 deprecates the tag
 *     for use outside CPython, and 3.13 stores an attribute into an object's inline values
 *     while its materialised __dict__ shares them, notifying watchers but not bumping the
 *     tag; 3.14 removes it.  On 3.11 every mutation of a dict goes through insertdict /
 *     delitem / clear / pop ... which all assign a new, globally unique tag, and an object's
 *     materialised __dict__ owns its values for good (_PyObject_GetDictPtr clears the
 *     inline values pointer), so an equal tag means the same dict with the same contents.
 *     3.13.0 did not report that inline-values store to the watcher either (tested in
 *     tests/test_fastcheck_program.py), so guards/fastpath.py does not use the program on
 *     3.13 yet; it builds there.
 *   - FC_WEAK_TARGET: PyWeakref_GET_OBJECT is deprecated in 3.13 (PyWeakref_GetRef).
 */
#ifndef FASTCHECK_H
#define FASTCHECK_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stddef.h>
#include <stdint.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030E0000
#error "guards/_fastcheck supports CPython 3.11, 3.12 and 3.13"
#endif
#ifdef Py_GIL_DISABLED
#error "guards/_fastcheck does not support free-threaded builds"
#endif

#if PY_VERSION_HEX >= 0x030C0000
#define FC_WATCHERS 1
#else
#define FC_WATCHERS 0
#define FC_DICT_TAG(d) (((PyDictObject *)(d))->ma_version_tag)
#endif

/* Borrowed target of a weak reference, Py_None when it died (only compared, never used). */
static inline PyObject *FC_WEAK_TARGET(PyObject *ref)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *obj;
    if (PyWeakref_GetRef(ref, &obj) <= 0) {
        PyErr_Clear();
        return Py_None;
    }
    Py_DECREF(obj);  /* still alive: the referent had other references before we asked */
    return obj;
#else
    return PyWeakref_GET_OBJECT(ref);
#endif
}

/* node kinds: how a source's value is fetched from its parent's (or from L, G, C) */
enum { N_LOCAL, N_GLOBAL, N_CELL, N_CONST, N_GLOBALS, N_ATTR, N_GENERIC_ATTR, N_ITEM, N_TYPE,
       N_PY };

/* op kinds (one guard, or one batch of tensor guards) */
enum { O_ID, O_TYPE, O_IS, O_EQ, O_LEN, O_DICTKEYS, O_SAME, O_DISTINCT, O_TENSORS, O_CALL_IS,
       O_KEY_ABSENT, O_PY1, O_PYLGC, O_FUNC, O_STATE, O_MODULE_NE };

/* freeze rules of O_PY1 ops (what makes the Python condition's answer unchangeable) */
enum { R_NEVER, R_NODE, R_ODICT_EMPTY, R_ATTRS, R_FALSY, R_LACKS, R_LACKS_GENERIC, R_CLASS_ENTRY };

/* snapshot steps, run in order on the fast path */
enum { S_FETCH, S_ANCHOR, S_TYPEPIN, S_CLASSTAG, S_INSTDICT, S_SLOT, S_DICT };

/* kinds whose consecutive steps run as one loop (the first one's node: the run's length) */
#define FC_RUN_KIND(kind) ((kind) >= S_TYPEPIN && (kind) <= S_SLOT)

/* snapshot states */
enum { SNAP_NONE, SNAP_POS, SNAP_NEG };

/* step results */
enum { R_FAIL = 0, R_PASS = 1, R_UNSURE = 2, R_ERROR = -1 };

typedef struct {
    int kind;
    Py_ssize_t parent;   /* -1 for roots */
    Py_ssize_t index;    /* N_LOCAL, N_CELL */
    PyObject *arg;       /* name, key, constant or fetch function (strong) */
    Py_ssize_t anchor;   /* an O_ID op on this node, or -1 */
    Py_ssize_t soft;     /* an O_TYPE op with num 1 on this node (a soft anchor), or -1 */
} Node;

typedef struct {
    int kind;
    int rule;            /* O_PY1 */
    Py_ssize_t n;        /* nodes */
    Py_ssize_t *nodes;
    PyObject *a, *b, *c; /* arguments (strong, may be NULL) */
    Py_ssize_t num;      /* O_LEN length, O_ID weak flag, O_DICTKEYS key count */
    PyObject *guards;    /* tuple of guard indices this op checks */
    /* O_DISTINCT: sorted values of the members frozen by the snapshot */
    void **frozen_ptrs;
    Py_ssize_t n_frozen_ptrs;
    /* O_TENSORS: metadata recorded after TensorGuards passed (guards/_tensormeta.h) */
    void *fps;
    int fps_state;       /* 0 none, 1 recorded, -1 a member cannot be recorded */
    void **fp_frozen;    /* sorted values of the frozen members when recorded */
    Py_ssize_t n_fp_frozen;
    PyObject **tobjs;    /* O_TENSORS per member: the frozen object (borrowed) or this call's */
    Py_ssize_t *vol;     /* O_TENSORS, O_DISTINCT: positions of the members fetched per call */
    Py_ssize_t n_vol;
} Op;

typedef struct {
    int kind;
    Py_ssize_t node;     /* S_FETCH, S_ANCHOR */
    PyObject *obj;       /* the (frozen) object a pin is about: valid once earlier steps passed */
    PyObject **dictslot; /* S_INSTDICT: where obj keeps its __dict__ pointer */
    void *ptr;           /* recorded dict or type */
    uint64_t tag;        /* dict version (3.11) or type version tag */
    PyObject *ref;       /* S_ANCHOR: weakref or object (borrowed from the op) */
    int weak;
    Py_ssize_t level;    /* depth of the object it dereferences (steps run by level) */
} Step;

/* The fast path's copy of the sorted steps (capture keeps the full Step): 40 bytes each,
 * and a run of S_DICT steps of one level is one S_DICTS entry over a packed (dict, tag)
 * array.  Why: on 3.11 a model's check is ~10 dict tags per submodule, and the cost is the
 * memory those reads touch, not the compares. */
enum { S_DICTS = S_DICT + 1 };

typedef struct {
    int32_t kind;
    int32_t weak;        /* S_ANCHOR: 1 a weak reference; 2 a soft anchor's (unsure on mismatch) */
    Py_ssize_t node;     /* S_FETCH, S_ANCHOR; S_DICTS: first index into Program.pins;
                          * first of a run of TYPEPIN/CLASSTAG/INSTDICT/SLOT: its length */
    void *a;             /* S_TYPEPIN/S_CLASSTAG obj, S_INSTDICT/S_SLOT dictslot,
                          * S_ANCHOR ref; S_DICTS: count */
    void *ptr;           /* recorded dict or type */
    uint64_t tag;
} HotStep;

typedef struct {
    void *dict;
    uint64_t tag;
} DictPin;

typedef struct Program {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *slow;      /* Python: (L, G, C) -> bool, when the snapshot cannot answer */
    PyObject *full;      /* the generated Python check (disabled program, re-entrant call) */
    Py_ssize_t n_nodes;
    Node *nodes;
    Py_ssize_t n_ops;
    Op *ops;
    /* snapshot */
    int state;
    int busy;
    int disabled;
    int capturing;
    Py_ssize_t misses;   /* slow paths since the last fast answer */
    unsigned long gen;   /* capture count: a commit applies to the capture it decided on */
    PyObject **rec;      /* per node: recorded value (borrowed) of a frozen node */
    Py_ssize_t *slot;    /* per node: index into the per-call fetched values, or -1 */
    char *frozen;        /* per node */
    char *has_step;      /* per node: bit 1 S_TYPEPIN/S_CLASSTAG, 2 S_INSTDICT, 4 S_DICT */
    Py_ssize_t *depth;   /* per node: steps from its root */
    Py_ssize_t cur_level; /* capture: level of the op being frozen (its extra dicts' is +1) */
    Py_ssize_t n_fetch;
    Step *steps;
    Py_ssize_t n_steps, cap_steps;
    HotStep *hot;        /* the steps as the fast path runs them (built by fc_capture) */
    Py_ssize_t n_hot;
    DictPin *pins;       /* S_DICTS runs */
    Py_ssize_t n_pins;
    Py_ssize_t *active;  /* ops not frozen, in order */
    Py_ssize_t n_active;
    Py_ssize_t *seq;     /* after the steps: op index >= 0, or -1 - node to fetch first */
    Py_ssize_t n_seq, cap_seq;
    char *op_frozen;
    PyObject *held;      /* list: strong references to pinned types */
    unsigned long long fast_hits, slow_calls, captures;
#if FC_WATCHERS
    void **watched;      /* dicts this snapshot relies on (sorted once captured) */
    Py_ssize_t n_watched, cap_watched;
    int dirty;           /* a watched dict changed since the capture */
    struct Program *prev, *next;
#endif
} Program;

/* _fastcheck.c */
PyObject *fc_fetch(Program *p, Py_ssize_t i, PyObject *parent, PyObject *L, PyObject *G,
                   PyObject *C);
int fc_swallow(void);
extern PyObject *fc_str_getattribute, *fc_str_getattr, *fc_str_dict, *fc_obj_getattribute;

int fc_cmp_ptr(const void *a, const void *b);

/* _fastcheck_capture.c */
int fc_capture(Program *p, PyObject *L, PyObject *G, PyObject *C);
void fc_clear_snapshot(Program *p);
int fc_run_steps(Program *p, PyObject **cur, PyObject *L, PyObject *G, PyObject *C);

/* _fastcheck_watch.c (3.12+) */
#if FC_WATCHERS
int fc_watcher_init(void);
void fc_link(Program *p);
void fc_unlink(Program *p);
int fc_watch(Program *p, PyObject *d);
#endif

#endif
