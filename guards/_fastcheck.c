/* guards._fastcheck: a guard set's check, evaluated in C, skipping what cannot have changed.
 *
 * Why: a cache hit on a real model re-proves hundreds of facts about its module tree
 * (_modules, _parameters, hook dicts, attributes) that almost never change between calls.
 * A Program (built by guards/fastpath.py from a GuardSet) answers check(L, G, C) like the
 * generated Python check, in three layers:
 *
 *   1. steps (the snapshot): fetch the sources that must be read on every call (arguments,
 *      globals), compare the anchors (sources guarded by identity, or soft anchors: a module
 *      guarded by its type, compared with the object captured, unsure if another: the model passed as
 *      `self`), and verify that nothing the frozen part relied on changed: the dicts it read
 *      (version tag on 3.11, dict watchers on 3.12+), the types whose attribute lookup it
 *      relied on (type version tag), the objects' __dict__ pointers.  Cost: a few loads per
 *      dict on 3.11, one flag on 3.12+; no dict lookups, no Python calls.
 *   2. active ops: the guards whose answer can change without any of the above changing
 *      (tensor metadata, global torch state, values passed as arguments), evaluated in C
 *      with the same semantics as their Python conditions, or by calling those conditions.
 *   3. the slow path (Python, GuardSet._slow_check) when the snapshot is missing or stale:
 *      capture a new one, run the generated check, decide.  The generated Python check is
 *      the authority for every frozen guard: a snapshot is only trusted after it passed
 *      (or, for a negative snapshot, after one frozen guard failed on its own).
 *
 * A fast answer is exact: a failed anchor or active op is a failed guard of the Python
 * check.  Any doubt (a changed dict, a type modified) goes to the slow path.
 */
#include "_fastcheck.h"
#include "_tensormeta.h"

static TMetaAPI *tm_api = NULL;  /* guards._tensormeta, when built for the running torch */

PyObject *fc_str_getattribute, *fc_str_getattr, *fc_str_dict, *fc_obj_getattribute;

/* An exception the Python check would catch (`except Exception: return False`) is a
 * failed guard; others (KeyboardInterrupt) propagate. */
int fc_swallow(void)
{
    if (PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        return 1;
    }
    return 0;
}

/* The value of node i, as the generated Python check computes it (new reference). */
PyObject *fc_fetch(Program *p, Py_ssize_t i, PyObject *parent, PyObject *L, PyObject *G,
                   PyObject *C)
{
    Node *n = &p->nodes[i];
    PyObject *v;
    switch (n->kind) {
    case N_LOCAL:                                         /* L[i] */
        if (PyTuple_CheckExact(L) && n->index < PyTuple_GET_SIZE(L))
            return Py_NewRef(PyTuple_GET_ITEM(L, n->index));
        return PySequence_GetItem(L, n->index);
    case N_GLOBAL:                                        /* G[name] */
        if (PyDict_CheckExact(G)) {
            v = PyDict_GetItemWithError(G, n->arg);
            if (v == NULL && !PyErr_Occurred())
                PyErr_SetObject(PyExc_KeyError, n->arg);
            return Py_XNewRef(v);
        }
        return PyObject_GetItem(G, n->arg);
    case N_CELL: {                                        /* C[i].cell_contents */
        PyObject *cell = PySequence_GetItem(C, n->index);
        if (cell == NULL)
            return NULL;
        if (PyCell_Check(cell)) {
            v = Py_XNewRef(PyCell_GET(cell));
            if (v == NULL)
                PyErr_SetString(PyExc_ValueError, "Cell is empty");
        }
        else {
            v = PyObject_GetAttrString(cell, "cell_contents");
        }
        Py_DECREF(cell);
        return v;
    }
    case N_CONST:
        return Py_NewRef(n->arg);
    case N_GLOBALS:
        return Py_NewRef(G);
    case N_ATTR:                                          /* getattr(parent, name) */
        return PyObject_GetAttr(parent, n->arg);
    case N_GENERIC_ATTR:                                  /* object.__getattribute__ */
        return PyObject_GenericGetAttr(parent, n->arg);
    case N_ITEM:                                          /* parent[key] */
        if (PyDict_CheckExact(parent)) {
            v = PyDict_GetItemWithError(parent, n->arg);
            if (v == NULL && !PyErr_Occurred())
                PyErr_SetObject(PyExc_KeyError, n->arg);
            return Py_XNewRef(v);
        }
        return PyObject_GetItem(parent, n->arg);
    case N_TYPE:
        return Py_NewRef((PyObject *)Py_TYPE(parent));
    case N_PY: {                                          /* fn(L, G, C) */
        PyObject *args[3] = {L, G, C};
        return PyObject_Vectorcall(n->arg, args, 3, NULL);
    }
    }
    PyErr_SetString(PyExc_SystemError, "bad node kind");
    return NULL;
}

#define VAL(i) (p->slot[i] >= 0 ? cur[p->slot[i]] : p->rec[i])

static int truth_of(PyObject *r)  /* consumes r: 1, 0, or R_ERROR (propagate) */
{
    if (r == NULL)
        return fc_swallow() ? 0 : R_ERROR;
    int t = PyObject_IsTrue(r);
    Py_DECREF(r);
    if (t < 0)
        return fc_swallow() ? 0 : R_ERROR;
    return t;
}

int fc_cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
    return x < y ? -1 : x > y;
}

static int op_distinct(Program *p, Op *op, PyObject **cur)
{
    /* len({id(v) for v in values}) == n: the frozen members were distinct when the
     * snapshot was taken and are the same objects (op->frozen_ptrs); check the others
     * (op->vol) against them and each other.  Without frozen members, all are others. */
    PyObject *small[16];
    PyObject **seen = small;
    Py_ssize_t n = op->frozen_ptrs != NULL ? op->n_vol : op->n, nv = 0;
    if (n > 16 && (seen = PyMem_Malloc(n * sizeof(PyObject *))) == NULL)
        return R_ERROR;
    int ok = 1;
    for (Py_ssize_t k = 0; k < n && ok; k++) {
        PyObject *v = VAL(op->nodes[op->frozen_ptrs != NULL ? op->vol[k] : k]);
        if (op->frozen_ptrs != NULL &&
            bsearch(&v, op->frozen_ptrs, op->n_frozen_ptrs, sizeof(void *), fc_cmp_ptr))
            ok = 0;
        for (Py_ssize_t j = 0; j < nv && ok; j++)
            ok = seen[j] != v;
        seen[nv++] = v;
    }
    if (seen != small)
        PyMem_Free(seen);
    return ok;
}

/* The tensors are those TensorGuards passed when `op->fps` was recorded, metadata-wise, and
 * pairwise distinct objects (TensorGuards rejects one object twice): 1, else 0. */
static int tensors_match(Program *p, Op *op, PyObject **cur)
{
    TMeta *fps = (TMeta *)op->fps;
    uint64_t inc, exc;
    tm_api->tls(&inc, &exc);  /* the batch was recorded under one thread-local state */
    if (inc != fps[0].tls_included || exc != fps[0].tls_excluded)
        return 0;
    /* frozen members are in op->tobjs since the record (the steps proved them the same
     * objects); only the others are read from this call's values */
    for (Py_ssize_t j = 0; j < op->n_vol; j++)
        op->tobjs[op->vol[j]] = VAL(op->nodes[op->vol[j]]);
    if (!tm_api->match_fields_n(op->tobjs, fps, op->n))
        return 0;
    if (op->n_vol > 64)
        return 0;  /* very many tensors passed per call: TensorGuards decides */
    /* pairwise distinct: by pairs for a few, else in a small open-addressing set (16
     * arguments are 120 pairs, ~800 instructions; the set is ~150) */
    PyObject *seen[128];
    int hashed = op->n_vol > 8;
    if (hashed)
        memset(seen, 0, sizeof seen);
    for (Py_ssize_t j = 0; j < op->n_vol; j++) {
        PyObject *v = op->tobjs[op->vol[j]];
        if (op->n_fp_frozen &&
            bsearch(&v, op->fp_frozen, op->n_fp_frozen, sizeof(void *), fc_cmp_ptr))
            return 0;
        if (hashed) {
            size_t h = ((uintptr_t)v >> 4) & 127;
            for (; seen[h] != NULL; h = (h + 1) & 127)
                if (seen[h] == v)
                    return 0;
            seen[h] = v;
            continue;
        }
        for (Py_ssize_t i = 0; i < j; i++)
            if (seen[i] == v)
                return 0;
        seen[j] = v;
    }
    return 1;
}

static void record_tensors(Program *p, Op *op, PyObject **cur)
{
    if (op->fps == NULL)
        op->fps = PyMem_Malloc(op->n * sizeof(TMeta));
    if (op->tobjs == NULL)
        op->tobjs = PyMem_Malloc(op->n * sizeof(PyObject *));
    if (op->vol == NULL)
        op->vol = PyMem_Malloc(op->n * sizeof(Py_ssize_t));
    if (op->fps == NULL || op->tobjs == NULL || op->vol == NULL) {
        op->fps_state = -1;
        return;
    }
    Py_ssize_t nf = 0;
    op->n_vol = 0;
    for (Py_ssize_t k = 0; k < op->n; k++) {
        TMeta *m = &((TMeta *)op->fps)[k];
        PyObject *v = VAL(op->nodes[k]);
        if (!tm_api->record(v, m) || (k > 0 && (
                m->tls_included != ((TMeta *)op->fps)[0].tls_included ||
                m->tls_excluded != ((TMeta *)op->fps)[0].tls_excluded))) {
            op->fps_state = -1;
            return;
        }
        op->tobjs[k] = v;
        if (p->frozen[op->nodes[k]] && p->slot[op->nodes[k]] < 0)
            nf++;
        else
            op->vol[op->n_vol++] = k;
    }
    PyMem_Free(op->fp_frozen);
    op->fp_frozen = nf ? PyMem_Malloc(nf * sizeof(void *)) : NULL;
    if (nf && op->fp_frozen == NULL) {
        op->fps_state = -1;
        return;
    }
    op->n_fp_frozen = 0;
    for (Py_ssize_t k = 0; k < op->n; k++)
        if (p->frozen[op->nodes[k]] && p->slot[op->nodes[k]] < 0)
            op->fp_frozen[op->n_fp_frozen++] = VAL(op->nodes[k]);
    qsort(op->fp_frozen, op->n_fp_frozen, sizeof(void *), fc_cmp_ptr);
    op->fps_state = 1;
}

static int op_dictkeys(PyObject *d, Op *op)
{
    /* type(v) is T and len(v) == n, then key types (by identity) and keys (==) in order; T
     * is dict, or OrderedDict with n == 0 (fastpath.py): its size is its dict's */
    if (Py_TYPE(d) != (PyTypeObject *)op->a || PyDict_GET_SIZE(d) != op->num)
        return 0;
    if (op->num == 0)
        return 1;
    Py_ssize_t pos = 0, i = 0;
    PyObject *k, *v;
    while (PyDict_Next(d, &pos, &k, &v)) {
        PyObject *want = PyTuple_GET_ITEM(op->b, i++);
        if (Py_TYPE(k) != Py_TYPE(want))
            return 0;
    }
    pos = 0, i = 0;
    while (PyDict_Next(d, &pos, &k, &v)) {
        PyObject *want = PyTuple_GET_ITEM(op->b, i++);
        Py_INCREF(k);
        int eq = PyObject_RichCompareBool(k, want, Py_EQ);
        Py_DECREF(k);
        if (eq < 0)
            return fc_swallow() ? 0 : R_ERROR;
        if (!eq)
            return 0;
    }
    return 1;
}

/* One op, with the semantics of its Python condition: 1 pass, 0 fail, R_ERROR. */
static int run_op(Program *p, Op *op, PyObject **cur, PyObject *L, PyObject *G, PyObject *C)
{
    PyObject *v = op->n > 0 ? VAL(op->nodes[0]) : NULL;
    PyObject *r;
    switch (op->kind) {
    case O_ID:
        if (op->num) {  /* weak: v is ref() is not None */
            PyObject *t = FC_WEAK_TARGET(op->a);
            return v == t && t != Py_None;
        }
        return v == op->a;
    case O_TYPE:
        return (PyObject *)Py_TYPE(v) == op->a;
    case O_IS:
        return v == op->a;
    case O_EQ:  /* type(v) is T and v == value (exact int/str/bytes/device/Size) */
        if ((PyObject *)Py_TYPE(v) != op->a)
            return 0;
        return truth_of(PyObject_RichCompare(v, op->b, Py_EQ));
    case O_LEN: {
        if ((PyObject *)Py_TYPE(v) != op->a)
            return 0;
        Py_ssize_t n = PyObject_Size(v);
        if (n < 0)
            return fc_swallow() ? 0 : R_ERROR;
        return n == op->num;
    }
    case O_DICTKEYS:
        return op_dictkeys(v, op);
    case O_SAME:
        return v == VAL(op->nodes[1]);
    case O_DISTINCT:
        return op_distinct(p, op, cur);
    case O_TENSORS: {
        if (tm_api != NULL && op->fps_state == 1 && tensors_match(p, op, cur))
            return 1;  /* (a nested tensor never matches a record: its dispatch keys differ) */
        if (op->b != Py_None) {  /* b(v) for the members at positions c, before TensorGuards */
            for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(op->c); j++) {
                Py_ssize_t k = PyLong_AsSsize_t(PyTuple_GET_ITEM(op->c, j));
                int ok = truth_of(PyObject_CallOneArg(op->b, VAL(op->nodes[k])));
                if (ok != 1)
                    return ok;
            }
        }
        PyObject *small[32];
        PyObject **args = small;
        if (op->n > 32 && (args = PyMem_Malloc(op->n * sizeof(PyObject *))) == NULL)
            return R_ERROR;
        for (Py_ssize_t k = 0; k < op->n; k++)
            args[k] = VAL(op->nodes[k]);
        r = PyObject_Vectorcall(op->a, args, op->n, NULL);
        if (args != small)
            PyMem_Free(args);
        int t = truth_of(r);
        if (t == 1 && tm_api != NULL && op->fps_state >= 0)
            record_tensors(p, op, cur);  /* what TensorGuards just accepted, under this TLS */
        return t;
    }
    case O_FUNC:  /* a plain function with code a and globals at address num */
        return Py_IS_TYPE(v, &PyFunction_Type) && ((PyFunctionObject *)v)->func_code == op->a &&
               (Py_ssize_t)(uintptr_t)((PyFunctionObject *)v)->func_globals == op->num;
    case O_STATE:  /* a[j]() is b[j] for each j; equal torch state words since they passed */
        if (tm_api != NULL && op->fps_state == 1) {
            uint64_t w[TM_STATE_WORDS];
            tm_api->global_state(w);
            if (memcmp(w, op->fps, sizeof w) == 0)
                return 1;
        }
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(op->a); j++) {
            r = PyObject_CallNoArgs(PyTuple_GET_ITEM(op->a, j));
            if (r == NULL)
                return fc_swallow() ? 0 : R_ERROR;
            Py_DECREF(r);
            if (r != PyTuple_GET_ITEM(op->b, j))
                return 0;
        }
        if (tm_api != NULL && op->fps_state >= 0) {
            if (op->fps == NULL &&
                (op->fps = PyMem_Malloc(TM_STATE_WORDS * sizeof(uint64_t))) == NULL) {
                op->fps_state = -1;
                return 1;
            }
            tm_api->global_state((uint64_t *)op->fps);  /* what the calls just accepted */
            op->fps_state = 1;
        }
        return 1;
    case O_MODULE_NE: {  /* sys.modules.get(a) is None or a.<b[0]>.<b[1]>... != c */
        PyObject *m = PyDict_GetItemWithError(PyImport_GetModuleDict(), op->a);
        if (m == NULL || m == Py_None)
            return m != NULL || !PyErr_Occurred() ? 1 : (fc_swallow() ? 0 : R_ERROR);
        Py_INCREF(m);
        for (Py_ssize_t j = 0; m != NULL && j < PyTuple_GET_SIZE(op->b); j++) {
            PyObject *x = PyObject_GetAttr(m, PyTuple_GET_ITEM(op->b, j));
            Py_DECREF(m);
            m = x;
        }
        if (m == NULL)
            return fc_swallow() ? 0 : R_ERROR;
        int eq = PyObject_RichCompareBool(m, op->c, Py_EQ);
        Py_DECREF(m);
        if (eq < 0)
            return fc_swallow() ? 0 : R_ERROR;
        return !eq;
    }
    case O_CALL_IS:
        r = PyObject_CallNoArgs(op->a);
        if (r == NULL)
            return fc_swallow() ? 0 : R_ERROR;
        Py_DECREF(r);
        return r == op->b;
    case O_KEY_ABSENT: {
        int c = PyDict_CheckExact(v) ? PyDict_Contains(v, op->a) : PySequence_Contains(v, op->a);
        if (c < 0)
            return fc_swallow() ? 0 : R_ERROR;
        return !c;
    }
    case O_PY1:
        return truth_of(PyObject_CallOneArg(op->a, v));
    case O_PYLGC: {
        PyObject *args[3] = {L, G, C};
        return truth_of(PyObject_Vectorcall(op->a, args, 3, NULL));
    }
    }
    PyErr_SetString(PyExc_SystemError, "bad op kind");
    return R_ERROR;
}

static PyObject *call_slow(Program *p, PyObject *const *args)
{
    p->slow_calls++;
    if (++p->misses > 64 && !p->disabled)
        p->disabled = 1;  /* its dicts change on every call: the snapshot only costs */
    return PyObject_Vectorcall(p->slow, args, 3, NULL);
}

static PyObject *program_vectorcall(Program *p, PyObject *const *args, size_t nargsf,
                                    PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 3 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "a guard check takes (L, G, C)");
        return NULL;
    }
    if (p->disabled || p->busy)
        return PyObject_Vectorcall(p->full, args, 3, NULL);
    if (p->state == SNAP_NONE)
        return call_slow(p, args);
    PyObject *L = args[0], *G = args[1], *C = args[2];
    PyObject *small[16];
    PyObject **cur = small;
    if (p->n_fetch > 16 && (cur = PyMem_Calloc(p->n_fetch, sizeof(PyObject *))) == NULL)
        return PyErr_NoMemory();
    if (cur == small)
        memset(small, 0, sizeof(small));
    p->busy++;
    int r = fc_run_steps(p, cur, L, G, C);
    if (r == R_PASS && p->state == SNAP_NEG)
        r = R_FAIL;
    for (Py_ssize_t k = 0; r == R_PASS && k < p->n_seq; k++) {
        Py_ssize_t s = p->seq[k];
        if (s >= 0) {
            r = run_op(p, &p->ops[s], cur, L, G, C);
            continue;
        }
        Py_ssize_t i = -1 - s;  /* a source the next op reads: fetched as the check would */
        Py_ssize_t parent = p->nodes[i].parent;
        PyObject *v = fc_fetch(p, i, parent >= 0 ? VAL(parent) : NULL, L, G, C);
        if (v == NULL)
            r = fc_swallow() ? R_FAIL : R_ERROR;
        cur[p->slot[i]] = v;
    }
    p->busy--;
    for (Py_ssize_t k = 0; k < p->n_fetch; k++)
        Py_XDECREF(cur[k]);
    if (cur != small)
        PyMem_Free(cur);
    if (r == R_ERROR)
        return NULL;
    if (r == R_UNSURE)
        return call_slow(p, args);
    p->fast_hits++;
    p->misses = 0;
    return Py_NewRef(r ? Py_True : Py_False);
}

/* ---- construction ------------------------------------------------------------------------ */

static int parse_nodes(Program *p, PyObject *nodes)
{
    Py_ssize_t n = PyList_GET_SIZE(nodes);
    p->nodes = PyMem_Calloc(n ? n : 1, sizeof(Node));
    if (p->nodes == NULL)
        return -1;
    p->n_nodes = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        Node *nd = &p->nodes[i];
        PyObject *arg;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(nodes, i), "innO", &nd->kind, &nd->parent,
                              &nd->index, &arg))
            return -1;
        if (nd->parent >= i || (nd->parent < 0 && nd->kind >= N_ATTR && nd->kind <= N_TYPE)) {
            PyErr_SetString(PyExc_ValueError, "nodes must come after their parent");
            return -1;
        }
        nd->arg = Py_NewRef(arg);
        nd->anchor = -1;
        nd->soft = -1;
    }
    return 0;
}

static int parse_ops(Program *p, PyObject *ops)
{
    Py_ssize_t n = PyList_GET_SIZE(ops);
    p->ops = PyMem_Calloc(n ? n : 1, sizeof(Op));
    if (p->ops == NULL)
        return -1;
    p->n_ops = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        Op *op = &p->ops[i];
        PyObject *nodes, *a, *b, *c, *guards;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(ops, i), "iiO!OOOnO!", &op->kind, &op->rule,
                              &PyTuple_Type, &nodes, &a, &b, &c, &op->num, &PyTuple_Type,
                              &guards))
            return -1;
        op->n = PyTuple_GET_SIZE(nodes);
        op->nodes = PyMem_Calloc(op->n ? op->n : 1, sizeof(Py_ssize_t));
        if (op->nodes == NULL)
            return -1;
        for (Py_ssize_t k = 0; k < op->n; k++) {
            op->nodes[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(nodes, k));
            if (op->nodes[k] < 0 || op->nodes[k] >= p->n_nodes) {
                PyErr_SetString(PyExc_ValueError, "op refers to a missing node");
                return -1;
            }
        }
        if ((op->kind == O_ID || op->kind == O_TYPE || op->kind == O_IS || op->kind == O_EQ ||
             op->kind == O_LEN || op->kind == O_DICTKEYS || op->kind == O_KEY_ABSENT ||
             op->kind == O_PY1 || op->kind == O_FUNC) && op->n != 1) {
            PyErr_SetString(PyExc_ValueError, "op takes one node");
            return -1;
        }
        if ((op->kind == O_SAME && op->n != 2) ||
            (op->kind == O_DICTKEYS && (!PyTuple_Check(b) || PyTuple_GET_SIZE(b) != op->num))) {
            PyErr_SetString(PyExc_ValueError, "bad op arguments");
            return -1;
        }
        op->a = op->kind == O_SAME || op->kind == O_DISTINCT ? NULL : Py_NewRef(a);
        op->b = Py_NewRef(b);
        op->c = Py_NewRef(c);
        op->guards = Py_NewRef(guards);
        if (op->kind == O_ID && p->nodes[op->nodes[0]].anchor < 0)
            p->nodes[op->nodes[0]].anchor = i;
        if (op->kind == O_TYPE && op->num == 1 && p->nodes[op->nodes[0]].soft < 0)
            p->nodes[op->nodes[0]].soft = i;
    }
    return 0;
}

static PyObject *program_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *full, *slow, *nodes, *ops;
    if (!PyArg_ParseTuple(args, "OOO!O!", &full, &slow, &PyList_Type, &nodes, &PyList_Type,
                          &ops))
        return NULL;
    Program *p = (Program *)type->tp_alloc(type, 0);
    if (p == NULL)
        return NULL;
    p->vectorcall = (vectorcallfunc)program_vectorcall;
    p->full = Py_NewRef(full);
    p->slow = Py_NewRef(slow);
    p->held = PyList_New(0);
#if FC_WATCHERS
    fc_link(p);
#endif
    if (p->held == NULL || parse_nodes(p, nodes) < 0 || parse_ops(p, ops) < 0) {
        Py_DECREF(p);
        return NULL;
    }
    Py_ssize_t n = p->n_nodes ? p->n_nodes : 1;
    p->rec = PyMem_Calloc(n, sizeof(PyObject *));
    p->slot = PyMem_Calloc(n, sizeof(Py_ssize_t));
    p->frozen = PyMem_Calloc(n, 1);
    p->has_step = PyMem_Calloc(n, 1);
    p->depth = PyMem_Calloc(n, sizeof(Py_ssize_t));
    p->active = PyMem_Calloc(p->n_ops ? p->n_ops : 1, sizeof(Py_ssize_t));
    p->op_frozen = PyMem_Calloc(p->n_ops ? p->n_ops : 1, 1);
    if (!p->rec || !p->slot || !p->frozen || !p->has_step || !p->depth || !p->active ||
        !p->op_frozen) {
        Py_DECREF(p);
        return PyErr_NoMemory();
    }
    return (PyObject *)p;
}

static int program_traverse(Program *p, visitproc visit, void *arg)
{
    Py_VISIT(p->full);
    Py_VISIT(p->slow);
    Py_VISIT(p->held);
    for (Py_ssize_t i = 0; p->nodes && i < p->n_nodes; i++)
        Py_VISIT(p->nodes[i].arg);
    for (Py_ssize_t i = 0; p->ops && i < p->n_ops; i++) {
        Py_VISIT(p->ops[i].a);
        Py_VISIT(p->ops[i].b);
        Py_VISIT(p->ops[i].c);
    }
    return 0;
}

static int program_clear(Program *p)
{
    fc_clear_snapshot(p);
    Py_CLEAR(p->full);
    Py_CLEAR(p->slow);
    Py_CLEAR(p->held);
    for (Py_ssize_t i = 0; p->nodes && i < p->n_nodes; i++)
        Py_CLEAR(p->nodes[i].arg);
    for (Py_ssize_t i = 0; p->ops && i < p->n_ops; i++) {
        Py_CLEAR(p->ops[i].a);
        Py_CLEAR(p->ops[i].b);
        Py_CLEAR(p->ops[i].c);
        Py_CLEAR(p->ops[i].guards);
    }
    return 0;
}

static void program_dealloc(Program *p)
{
    PyObject_GC_UnTrack(p);
#if FC_WATCHERS
    fc_unlink(p);
#endif
    program_clear(p);
    for (Py_ssize_t i = 0; p->ops && i < p->n_ops; i++) {
        PyMem_Free(p->ops[i].nodes);
        PyMem_Free(p->ops[i].fps);
        PyMem_Free(p->ops[i].tobjs);
        PyMem_Free(p->ops[i].vol);
    }
    PyMem_Free(p->nodes);
    PyMem_Free(p->ops);
    PyMem_Free(p->rec);
    PyMem_Free(p->slot);
    PyMem_Free(p->frozen);
    PyMem_Free(p->has_step);
    PyMem_Free(p->depth);
    PyMem_Free(p->active);
    PyMem_Free(p->op_frozen);
    PyMem_Free(p->steps);
    PyMem_Free(p->hot);
    PyMem_Free(p->pins);
    PyMem_Free(p->seq);
#if FC_WATCHERS
    PyMem_Free(p->watched);
#endif
    Py_TYPE(p)->tp_free((PyObject *)p);
}

/* ---- methods used by the Python slow path -------------------------------------------------- */

static PyObject *program_capture(Program *p, PyObject *args)
{
    PyObject *L, *G, *C;
    if (!PyArg_ParseTuple(args, "OOO", &L, &G, &C))
        return NULL;
    if (p->busy || p->disabled)
        Py_RETURN_FALSE;
    p->busy++;
    int r = fc_capture(p, L, G, C);
    p->busy--;
    if (r < 0)
        return NULL;
    p->captures++;
    return PyLong_FromUnsignedLong(r ? ++p->gen : 0);
}

static PyObject *program_commit(Program *p, PyObject *args)
{
    /* The slow path decided (positive: every frozen guard held; negative: one failed).
     * Trust the snapshot only if nothing it relies on changed since it was captured. */
    PyObject *L, *G, *C;
    int positive;
    unsigned long gen;
    if (!PyArg_ParseTuple(args, "OOOpk", &L, &G, &C, &positive, &gen))
        return NULL;
    if (p->busy || gen == 0 || gen != p->gen)
        Py_RETURN_FALSE;
    PyObject *small[16];
    PyObject **cur = small;
    if (p->n_fetch > 16 && (cur = PyMem_Calloc(p->n_fetch, sizeof(PyObject *))) == NULL)
        return PyErr_NoMemory();
    if (cur == small)
        memset(small, 0, sizeof(small));
    p->busy++;
    p->state = positive ? SNAP_POS : SNAP_NEG;  /* steps refuse to run on SNAP_NONE */
    int r = fc_run_steps(p, cur, L, G, C);
    p->busy--;
    for (Py_ssize_t k = 0; k < p->n_fetch; k++)
        Py_XDECREF(cur[k]);
    if (cur != small)
        PyMem_Free(cur);
    if (r == R_ERROR) {
        p->state = SNAP_NONE;
        return NULL;
    }
    if (r != R_PASS)
        p->state = SNAP_NONE;
    return PyBool_FromLong(p->state != SNAP_NONE);
}

static PyObject *program_active_guards(Program *p, PyObject *noargs)
{
    /* guard indices checked by ops that the snapshot does not cover */
    PyObject *out = PySet_New(NULL);
    for (Py_ssize_t k = 0; out && k < p->n_ops; k++) {
        if (p->op_frozen[k])
            continue;
        PyObject *g = p->ops[k].guards;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(g); j++) {
            if (PySet_Add(out, PyTuple_GET_ITEM(g, j)) < 0) {
                Py_CLEAR(out);
                break;
            }
        }
    }
    return out;
}

static PyObject *program_stats(Program *p, PyObject *noargs)
{
    Py_ssize_t nf = 0;
    for (Py_ssize_t i = 0; i < p->n_nodes; i++)
        nf += p->frozen[i] != 0;
    return Py_BuildValue(
        "{s:s,s:K,s:K,s:K,s:n,s:n,s:n,s:n,s:n,s:i,s:i}", "state",
        p->state == SNAP_POS ? "positive" : p->state == SNAP_NEG ? "negative" : "none",
        "fast_hits", p->fast_hits, "slow_calls", p->slow_calls, "captures", p->captures,
        "nodes", p->n_nodes, "frozen_nodes", nf, "steps", p->n_steps, "ops", p->n_ops,
        "active_ops", p->n_active, "disabled", p->disabled, "busy", p->busy);
}

static PyObject *program_steps(Program *p, PyObject *noargs)
{
    /* the snapshot's steps as (kind, level, address of what it reads), in run order */
    PyObject *out = PyList_New(0);
    for (Py_ssize_t k = 0; out && k < p->n_steps; k++) {
        Step *s = &p->steps[k];
        void *what = s->kind == S_DICT || s->kind == S_INSTDICT ? s->ptr : (void *)s->obj;
        PyObject *t = Py_BuildValue("(inK)", s->kind, s->level, (unsigned long long)(uintptr_t)what);
        if (t == NULL || PyList_Append(out, t) < 0)
            Py_CLEAR(out);
        Py_XDECREF(t);
    }
    return out;
}

static PyObject *program_invalidate(Program *p, PyObject *noargs)
{
    p->state = SNAP_NONE;
    Py_RETURN_NONE;
}

static PyObject *set_tensor_api(PyObject *mod, PyObject *capsule)
{
    /* guards/fastpath.py hands over guards._tensormeta's capsule once it checked that the
     * module was built for the running torch (None: stop using it) */
    if (capsule == Py_None) {
        tm_api = NULL;
        Py_RETURN_NONE;
    }
    TMetaAPI *api = PyCapsule_GetPointer(capsule, TMETA_CAPSULE);
    if (api == NULL)
        return NULL;
    if (api->version != TMETA_API_VERSION) {
        PyErr_SetString(PyExc_ValueError, "guards._tensormeta API version mismatch");
        return NULL;
    }
    tm_api = api;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"set_tensor_api", set_tensor_api, METH_O,
     "set_tensor_api(capsule or None): tensor metadata records from guards._tensormeta"},
    {NULL}};

static PyMethodDef program_methods[] = {
    {"capture", (PyCFunction)program_capture, METH_VARARGS,
     "capture(L, G, C) -> token (0: nothing recorded): record what a snapshot relies on"},
    {"commit", (PyCFunction)program_commit, METH_VARARGS,
     "commit(L, G, C, positive, token) -> bool: trust that capture if nothing changed since"},
    {"active_guards", (PyCFunction)program_active_guards, METH_NOARGS,
     "set of guard indices re-checked on every call under the current snapshot"},
    {"stats", (PyCFunction)program_stats, METH_NOARGS, "counters and sizes, for tests"},
    {"steps", (PyCFunction)program_steps, METH_NOARGS,
     "the snapshot's steps as (kind, level, address read), for tests"},
    {"invalidate", (PyCFunction)program_invalidate, METH_NOARGS, "drop the snapshot"},
    {NULL}};

static PyTypeObject ProgramType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "guards._fastcheck.Program",
    .tp_basicsize = sizeof(Program),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Program, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = program_new,
    .tp_dealloc = (destructor)program_dealloc,
    .tp_traverse = (traverseproc)program_traverse,
    .tp_clear = (inquiry)program_clear,
    .tp_methods = program_methods,
    .tp_doc = "Program(full, slow, nodes, ops): a guard set's check(L, G, C) in C",
};

static struct PyModuleDef fastcheck_module = {
    PyModuleDef_HEAD_INIT, "_fastcheck",
    "Guard programs evaluated in C, skipping what cannot have changed (see _fastcheck.c).", -1,
    module_methods};

PyMODINIT_FUNC PyInit__fastcheck(void)
{
    fc_str_getattribute = PyUnicode_InternFromString("__getattribute__");
    fc_str_getattr = PyUnicode_InternFromString("__getattr__");
    fc_str_dict = PyUnicode_InternFromString("__dict__");
    if (!fc_str_getattribute || !fc_str_getattr || !fc_str_dict)
        return NULL;
    fc_obj_getattribute = _PyType_Lookup(&PyBaseObject_Type, fc_str_getattribute);
    if (fc_obj_getattribute == NULL) {
        PyErr_SetString(PyExc_ImportError, "object.__getattribute__ not found");
        return NULL;
    }
    Py_INCREF(fc_obj_getattribute);
#if FC_WATCHERS
    if (fc_watcher_init() < 0)
        return NULL;
#endif
    if (PyType_Ready(&ProgramType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&fastcheck_module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Program", (PyObject *)&ProgramType) < 0 ||
        PyModule_AddIntConstant(m, "WATCHERS", FC_WATCHERS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
#define K(name) PyModule_AddIntConstant(m, #name, name)
    if (K(N_LOCAL) || K(N_GLOBAL) || K(N_CELL) || K(N_CONST) || K(N_GLOBALS) || K(N_ATTR) ||
        K(N_GENERIC_ATTR) || K(N_ITEM) || K(N_TYPE) || K(N_PY) || K(O_ID) || K(O_TYPE) ||
        K(O_IS) || K(O_EQ) || K(O_LEN) || K(O_DICTKEYS) || K(O_SAME) || K(O_DISTINCT) ||
        K(O_TENSORS) || K(O_CALL_IS) || K(O_KEY_ABSENT) || K(O_PY1) || K(O_PYLGC) ||
        K(O_FUNC) || K(O_STATE) || K(O_MODULE_NE) || K(S_FETCH) || K(S_ANCHOR) || K(S_TYPEPIN) ||
        K(S_CLASSTAG) || K(S_INSTDICT) || K(S_SLOT) || K(S_DICT) ||
        K(R_NEVER) || K(R_NODE) || K(R_ODICT_EMPTY) || K(R_ATTRS) || K(R_FALSY) || K(R_LACKS) ||
        K(R_LACKS_GENERIC) || K(R_CLASS_ENTRY)) {
        Py_DECREF(m);
        return NULL;
    }
#undef K
    return m;
}
