/* tracer.runtime._dispatch: the cache-hit path of a compiled function, in C.
 *
 * CompiledFunction (tracer/api.py) derives from Dispatch. A call with exactly the function's
 * positional parameters (no keywords; a signature without star parameters) runs here: the
 * arguments become the locals tuple L, each cached entry's guard check is called as
 * check(L, G, C) in order, and the first that passes runs its rewritten function with the
 * arguments. Any other call, and a call no check passes, goes to the Python method `_slow`
 * (binding, the cache lookup, tracing). Why in C: on a small function the Python
 * `__call__` frame was most of the cost of a hit (about 1-2 us: argument packing, the loop,
 * the counter), more than the guard check itself.
 *
 * The hits list is CompiledFunction._hits, shared with Python: it is only ever mutated in
 * place there, so this object sees every entry added or dropped. A check may run Python
 * code (a slow path that re-captures its snapshot, or a recompile elsewhere), so the list
 * is re-read after each call and each pair is held while its check runs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *hits;      /* list of (check, run) */
    PyObject *G;         /* the function's globals */
    PyObject *C;         /* its closure (or None) */
    PyObject *fn;        /* the function */
    PyObject *code;      /* the code its entries were made for: another (fn.__code__ assigned,
                            a hot reload) sends every call to _slow, which starts over */
    Py_ssize_t n;        /* positional parameters of a simple signature, else -1 */
} Dispatch;  /* (the Python subclass adds __dict__ and __weakref__) */

static unsigned long long total_hits = 0;

static PyObject *slow_call(Dispatch *d, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *slow = PyObject_GetAttrString((PyObject *)d, "_slow");
    if (slow == NULL)
        return NULL;
    PyObject *r = PyObject_Vectorcall(slow, args, nargsf, kwnames);
    Py_DECREF(slow);
    return r;
}

static PyObject *dispatch_vectorcall(Dispatch *d, PyObject *const *args, size_t nargsf,
                                     PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames != NULL || nargs != d->n || d->hits == NULL || !PyList_CheckExact(d->hits)
            || PyFunction_GET_CODE(d->fn) != d->code)
        return slow_call(d, args, nargsf, kwnames);
    PyObject *L = PyTuple_New(nargs);
    if (L == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < nargs; i++)
        PyTuple_SET_ITEM(L, i, Py_NewRef(args[i]));
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(d->hits); k++) {
        PyObject *pair = PyList_GET_ITEM(d->hits, k);
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2)
            break;  /* not what api.py stores: let Python decide */
        Py_INCREF(pair);
        PyObject *cargs[3] = {L, d->G, d->C};
        PyObject *ok = PyObject_Vectorcall(PyTuple_GET_ITEM(pair, 0), cargs, 3, NULL);
        int t = ok == NULL ? -1 : ok == Py_True ? 1 : ok == Py_False ? 0 : PyObject_IsTrue(ok);
        Py_XDECREF(ok);
        if (t < 0) {
            Py_DECREF(pair);
            Py_DECREF(L);
            return NULL;
        }
        if (t) {
            total_hits++;
            PyObject *r = PyObject_Vectorcall(PyTuple_GET_ITEM(pair, 1), args, nargs, NULL);
            Py_DECREF(pair);
            Py_DECREF(L);
            return r;
        }
        Py_DECREF(pair);
    }
    Py_DECREF(L);
    return slow_call(d, args, nargsf, NULL);
}

static int dispatch_init(Dispatch *d, PyObject *args, PyObject *kwds)
{
    return 0;  /* fields are set by _dispatch_setup (api.py), once the function is known */
}

static PyObject *dispatch_setup(Dispatch *d, PyObject *args)
{
    PyObject *hits, *G, *C, *fn, *code;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "O!OOnO!O!:_dispatch_setup", &PyList_Type, &hits, &G, &C, &n,
                          &PyFunction_Type, &fn, &PyCode_Type, &code))
        return NULL;
    Py_XSETREF(d->hits, Py_NewRef(hits));
    Py_XSETREF(d->G, Py_NewRef(G));
    Py_XSETREF(d->C, Py_NewRef(C));
    Py_XSETREF(d->fn, Py_NewRef(fn));
    Py_XSETREF(d->code, Py_NewRef(code));
    d->n = n;
    Py_RETURN_NONE;
}

/* Dispatch is a static type whose only instances are of Python subclasses: their
 * subtype_traverse / subtype_dealloc visit and release the (heap) class, so these do not. */
static int dispatch_traverse(Dispatch *d, visitproc visit, void *arg)
{
    Py_VISIT(d->hits);
    Py_VISIT(d->G);
    Py_VISIT(d->C);
    Py_VISIT(d->fn);
    Py_VISIT(d->code);
    return 0;
}

static int dispatch_clear(Dispatch *d)
{
    Py_CLEAR(d->hits);
    Py_CLEAR(d->G);
    Py_CLEAR(d->C);
    Py_CLEAR(d->fn);
    Py_CLEAR(d->code);
    return 0;
}

static void dispatch_dealloc(Dispatch *d)
{
    PyObject_GC_UnTrack(d);
    dispatch_clear(d);
    Py_TYPE(d)->tp_free((PyObject *)d);
}

static PyObject *dispatch_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    Dispatch *d = (Dispatch *)type->tp_alloc(type, 0);
    if (d == NULL)
        return NULL;
    d->vectorcall = (vectorcallfunc)dispatch_vectorcall;
    d->n = -1;
    return (PyObject *)d;
}

static PyMethodDef dispatch_methods[] = {
    {"_dispatch_setup", (PyCFunction)dispatch_setup, METH_VARARGS,
     "_dispatch_setup(hits, G, C, n, fn, code): the list of (check, run), globals, closure, the "
     "positional parameter count of a simple signature (-1: every call goes to _slow), the "
     "function and the code the entries are for"},
    {NULL},
};

static PyTypeObject DispatchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracer.runtime._dispatch.Dispatch",
    .tp_basicsize = sizeof(Dispatch),
    .tp_dealloc = (destructor)dispatch_dealloc,
    .tp_vectorcall_offset = offsetof(Dispatch, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC |
                Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Base of CompiledFunction: its cache-hit path in C (see tracer/_dispatch.c).",
    .tp_traverse = (traverseproc)dispatch_traverse,
    .tp_clear = (inquiry)dispatch_clear,
    .tp_methods = dispatch_methods,
    .tp_init = (initproc)dispatch_init,
    .tp_new = dispatch_new,
};

static PyObject *hits(PyObject *mod, PyObject *noargs)
{
    return PyLong_FromUnsignedLongLong(total_hits);
}

static PyObject *reset_hits(PyObject *mod, PyObject *noargs)
{
    total_hits = 0;
    Py_RETURN_NONE;
}

/* CPython 3.11 does not give a Python subclass the vectorcall flag of its base (3.12 does,
 * when the subclass defines no __call__): without it a call goes through tp_call, which
 * packs the arguments into a tuple and a dict first. */
static PyObject *enable_vectorcall(PyObject *mod, PyObject *cls)
{
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &DispatchType)) {
        PyErr_SetString(PyExc_TypeError, "enable_vectorcall expects a subclass of Dispatch");
        return NULL;
    }
    PyTypeObject *t = (PyTypeObject *)cls;
    if (t->tp_call == PyVectorcall_Call &&
        t->tp_vectorcall_offset == DispatchType.tp_vectorcall_offset)
        t->tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL;
    return Py_NewRef(PyBool_FromLong(PyType_HasFeature(t, Py_TPFLAGS_HAVE_VECTORCALL)));
}

static PyMethodDef module_methods[] = {
    {"enable_vectorcall", enable_vectorcall, METH_O,
     "enable_vectorcall(cls): calls of cls's instances take the C path directly (3.11)"},
    {"hits", hits, METH_NOARGS, "cache hits taken in C since the last reset_hits()"},
    {"reset_hits", reset_hits, METH_NOARGS, "zero the hit counter"},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "tracer.runtime._dispatch",
    "The cache-hit path of CompiledFunction in C (see the comment at the top of _dispatch.c).",
    -1, module_methods,
};

PyMODINIT_FUNC PyInit__dispatch(void)
{
    if (PyType_Ready(&DispatchType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Dispatch", (PyObject *)&DispatchType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
