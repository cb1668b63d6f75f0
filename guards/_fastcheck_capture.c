/* The snapshot: which sources cannot have changed, and which guards that makes true.
 *
 * A node is *frozen* when its value is known to be the same object as at capture time
 * without fetching it:
 *   - a constant;
 *   - an anchor: a node with an identity guard, fetched on every call and compared (a
 *     global function);
 *   - a soft anchor: a node with a type guard marked soft (an nn.Module: guarded by its
 *     structure, not its identity), fetched on every call and compared with a weak
 *     reference to the object captured (the model passed as `self`): another object (or the
 *     captured one gone) is not a failure but R_UNSURE, the slow path, which captures anew;
 *   - getattr(P, name) of a frozen P whose type's __getattribute__ is object's (or P is a
 *     module), whose type defines no `name` anywhere in its MRO (so no descriptor) and
 *     whose instance __dict__ holds `name`: pinned by P's type version tag and P's __dict__
 *     (its pointer, and its contents: dict version tag on 3.11, a dict watcher on 3.12+);
 *     or, when the MRO holds `name` as a plain class attribute (an instance of a builtin
 *     type that is no descriptor) and the instance __dict__ lacks it, that attribute;
 *   - getattr(K, name) of a frozen class K (metaclass `type`) holding `name` as such a
 *     plain class attribute: pinned by K's own version tag;
 *   - a function's __defaults__ / __kwdefaults__, and a __slots__ member of P: the field is
 *     compared with the recorded pointer, whose object the snapshot holds (so no other
 *     object can take its address);
 *     `P.__dict__` itself likewise, when the type's `__dict__` is the builtin descriptor;
 *   - P[key] of a frozen dict P (dict's own __getitem__, a key of a builtin type), pinned
 *     by P's contents; P[i] of a frozen tuple; type(P) of a frozen P (class pinned).
 * A guard is *frozen* when its answer is a function of frozen nodes and pinned contents
 * only: identity, type (class pinned), constants (immutable builtins), lengths of tuples
 * and watched dicts, keys of watched dicts, `key not in` a watched dict, and the declared
 * Predicate kinds (attributes in a watched __dict__, hook dicts empty, attribute absent).
 * Tensor metadata, global torch state and anything fetched per call stay active.
 *
 * Sources that are not frozen are fetched lazily, in the order the generated check reads
 * them (just before the first active op that needs them), so a guard on a base still runs
 * before anything reaches through it.  Anchors are roots (L[i], G[name], a cell) or hang
 * from frozen nodes, so the steps that fetch them run no code of an unexpected type.
 *
 * Every recorded pointer is borrowed: it is only dereferenced after the steps before it
 * proved that whatever holds it (a watched dict, an anchor) is unchanged, so the snapshot
 * never keeps a user object alive.  Types are held strongly (their identity is compared).
 */
#include "_fastcheck.h"

#define CAPVAL(j) (p->slot[j] >= 0 ? capv[p->slot[j]] : p->rec[j])
#define VAL(i) (p->slot[i] >= 0 ? cur[p->slot[i]] : p->rec[i])

enum { H_TYPE = 1, H_INST = 2, H_DICT = 4 };

static int add_step(Program *p, int kind, Py_ssize_t node, void *ptr, uint64_t tag,
                    PyObject *ref, int weak)
{
    /* pins name the node's object directly: it is frozen, so whatever validated it (an
     * anchor compared equal to it, a watched dict holding it) ran before this step */
    PyObject *obj = kind == S_FETCH || kind == S_ANCHOR || node < 0 ? NULL : p->rec[node];
    if (p->n_steps == p->cap_steps) {
        Py_ssize_t cap = p->cap_steps ? 2 * p->cap_steps : 64;
        Step *s = PyMem_Realloc(p->steps, cap * sizeof(Step));
        if (s == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        p->steps = s;
        p->cap_steps = cap;
    }
    Step *s = &p->steps[p->n_steps++];
    s->kind = kind;
    s->node = node;
    s->obj = obj;
    s->dictslot = NULL;
    /* extra dicts (node < 0) hang from an instance dict pinned at the current node's level */
    s->level = node >= 0 ? p->depth[node] : p->cur_level + 1;
    s->ptr = ptr;
    s->tag = tag;
    s->ref = ref;
    s->weak = weak;
    return 0;
}

#define cmp_ptr fc_cmp_ptr

/* ---- pins ----------------------------------------------------------------------------------- */

/* type(obj) and its attribute lookup are what they were: S_TYPEPIN (obj's class) and
 * S_CLASSTAG (that class's version tag: one step per class, however many objects it has,
 * see sort_steps; the class is held, so the step is valid at any level). */
static int pin_type(Program *p, Py_ssize_t node, PyObject *obj)
{
    if (p->has_step[node] & H_TYPE)
        return 1;
    PyTypeObject *t = Py_TYPE(obj);
    if (t->tp_version_tag == 0)
        (void)_PyType_Lookup(t, fc_str_getattribute);  /* assigns a tag when it can */
    if (t->tp_version_tag == 0)
        return 0;
    if (PyList_Append(p->held, (PyObject *)t) < 0)
        return -1;
    if (add_step(p, S_TYPEPIN, node, t, 0, NULL, 0) < 0 ||
        add_step(p, S_CLASSTAG, node, NULL, t->tp_version_tag, NULL, 0) < 0)
        return -1;
    p->steps[p->n_steps - 1].obj = (PyObject *)t;
    p->has_step[node] |= H_TYPE;
    return 1;
}

/* The class of obj cannot change (no __class__ assignment), or is pinned. */
static int pin_class(Program *p, Py_ssize_t node, PyObject *obj)
{
    PyTypeObject *t = Py_TYPE(obj);
    if (!PyType_HasFeature(t, Py_TPFLAGS_HEAPTYPE) && !PyModule_Check(obj))
        return 1;
    if (p->has_step[node] & H_TYPE)
        return 1;
    if (PyList_Append(p->held, (PyObject *)t) < 0)
        return -1;
    if (add_step(p, S_TYPEPIN, node, t, 0, NULL, 0) < 0)
        return -1;
    p->has_step[node] |= H_TYPE;
    return 1;
}

/* The contents of dict d (a node's value, or held by a watched dict when node < 0). */
static int watch_dict(Program *p, Py_ssize_t node, PyObject *d)
{
    if (node >= 0 && (p->has_step[node] & H_DICT))
        return 1;
#if FC_WATCHERS
    if (fc_watch(p, d) < 0)
        return -1;
#else
    if (add_step(p, S_DICT, node, d, FC_DICT_TAG(d), NULL, 0) < 0)
        return -1;
#endif
    if (node >= 0)
        p->has_step[node] |= H_DICT;
    return 1;
}

/* obj's instance __dict__ (an exact dict), or NULL. Materialises it (as the check will). */
static PyObject *inst_dict(PyObject *obj)
{
    PyObject **dp = _PyObject_GetDictPtr(obj);
    if (dp == NULL) {
        PyErr_Clear();
        return NULL;
    }
    return *dp != NULL && PyDict_CheckExact(*dp) ? *dp : NULL;
}

/* The __dict__ of obj is still that dict, with the same contents. */
static int watch_instdict(Program *p, Py_ssize_t node, PyObject *d)
{
    if (p->has_step[node] & H_INST)
        return 1;
    PyObject **dp = _PyObject_GetDictPtr(p->rec[node]);  /* fixed: inside the object */
    if (dp == NULL || *dp != d) {
        PyErr_Clear();
        return 0;
    }
#if FC_WATCHERS
    if (fc_watch(p, d) < 0 || add_step(p, S_INSTDICT, node, d, 0, NULL, 0) < 0)
        return -1;
#else
    if (add_step(p, S_INSTDICT, node, d, FC_DICT_TAG(d), NULL, 0) < 0)
        return -1;
#endif
    p->steps[p->n_steps - 1].dictslot = dp;
    p->has_step[node] |= H_INST;
    return 1;
}

static int generic_getattribute(PyObject *obj)
{
    return PyModule_CheckExact(obj) ||
           _PyType_Lookup(Py_TYPE(obj), fc_str_getattribute) == fc_obj_getattribute;
}

static int is_dict_descr(PyObject *descr)
{
    return descr != NULL &&
           (Py_IS_TYPE(descr, &PyGetSetDescr_Type) || Py_IS_TYPE(descr, &PyMemberDescr_Type));
}

/* `obj.__dict__` read by attribute is its instance dict, deterministically: returns that
 * dict (pinned: type, __dict__ pointer and contents) or NULL. */
static PyObject *readable_instdict(Program *p, Py_ssize_t node, PyObject *obj, int *err)
{
    if (!generic_getattribute(obj) ||
        !is_dict_descr(_PyType_Lookup(Py_TYPE(obj), fc_str_dict)))
        return NULL;
    PyObject *d = inst_dict(obj);
    if (d == NULL)
        return NULL;
    PyObject *got = PyObject_GetAttr(obj, fc_str_dict);
    if (got == NULL) {
        PyErr_Clear();
        return NULL;
    }
    Py_DECREF(got);
    if (got != d)
        return NULL;
    int r = pin_type(p, node, obj);
    if (r > 0)
        r = watch_instdict(p, node, d);
    if (r < 0)
        *err = 1;
    return r > 0 ? d : NULL;
}

/* A class attribute read as it is: an instance of a builtin (static) type that is no
 * descriptor (a static type cannot gain __get__ later). */
static int plain_class_attr(PyObject *v)
{
    PyTypeObject *t = Py_TYPE(v);
    return !PyType_HasFeature(t, Py_TPFLAGS_HEAPTYPE) && t->tp_descr_get == NULL &&
           t->tp_descr_set == NULL;
}

/* K (a class whose metaclass is `type`) keeps its own MRO lookups: S_CLASSTAG. */
static int pin_class_tag(Program *p, Py_ssize_t node, PyObject *K)
{
    PyTypeObject *k = (PyTypeObject *)K;
    if (p->has_step[node] & H_TYPE)
        return 1;
    if (k->tp_version_tag == 0)
        (void)_PyType_Lookup(k, fc_str_getattribute);
    if (k->tp_version_tag == 0)
        return 0;
    if (add_step(p, S_CLASSTAG, node, NULL, k->tp_version_tag, NULL, 0) < 0)
        return -1;
    p->has_step[node] |= H_TYPE;
    return 1;
}

/* *field (inside a frozen object) still holds v: S_SLOT; v is held so its address stays its. */
static int pin_field(Program *p, Py_ssize_t node, PyObject **field, PyObject *v)
{
    if (v != NULL && PyList_Append(p->held, v) < 0)
        return -1;
    if (add_step(p, S_SLOT, node, v, 0, NULL, 0) < 0)
        return -1;
    p->steps[p->n_steps - 1].dictslot = field;
    return 1;
}

static int member_type_ok(PyMemberDef *m)
{
#if PY_VERSION_HEX >= 0x030C0000
    return m->type == Py_T_OBJECT_EX || m->type == _Py_T_OBJECT;
#else
    return m->type == T_OBJECT_EX || m->type == T_OBJECT;
#endif
}

static int safe_key(PyObject *k)
{
    return PyUnicode_CheckExact(k) || PyLong_CheckExact(k) || PyBytes_CheckExact(k) ||
           PyBool_Check(k) || k == Py_None || PyFloat_CheckExact(k);
}

static int immutable_scalar(PyObject *v)
{
    return v == Py_None || PyBool_Check(v) || PyLong_CheckExact(v) || PyFloat_CheckExact(v) ||
           PyUnicode_CheckExact(v) || PyBytes_CheckExact(v);
}

/* ---- nodes ---------------------------------------------------------------------------------- */

/* 1: node i (whose parent is frozen, value P) is frozen, *out its value; 0: it is not. */
static int freeze_node(Program *p, Py_ssize_t i, PyObject *P, PyObject **out)
{
    Node *n = &p->nodes[i];
    int r;
    switch (n->kind) {
    case N_ATTR:
    case N_GENERIC_ATTR: {
        if (!PyUnicode_CheckExact(n->arg))
            return 0;
        if (n->kind == N_ATTR && PyType_CheckExact(P)) {
            /* type.__getattribute__: no metatype attribute of that name, then K's MRO */
            if (_PyType_Lookup(&PyType_Type, n->arg) != NULL)
                return 0;
            PyObject *v = _PyType_Lookup((PyTypeObject *)P, n->arg);
            if (v == NULL || !plain_class_attr(v))
                return 0;
            if ((r = pin_class_tag(p, n->parent, P)) <= 0)
                return r;
            *out = v;
            return 1;
        }
        if (Py_IS_TYPE(P, &PyFunction_Type) && (PyUnicode_CompareWithASCIIString(
                n->arg, "__defaults__") == 0 || PyUnicode_CompareWithASCIIString(
                n->arg, "__kwdefaults__") == 0)) {
            /* function type's own getset (a static type: cannot change) reads the field */
            PyFunctionObject *f = (PyFunctionObject *)P;
            PyObject **field = PyUnicode_CompareWithASCIIString(n->arg, "__defaults__") == 0
                                   ? &f->func_defaults : &f->func_kwdefaults;
            if ((r = pin_field(p, n->parent, field, *field)) <= 0)
                return r;
            *out = *field != NULL ? *field : Py_None;
            return 1;
        }
        if (n->kind == N_ATTR && !generic_getattribute(P))
            return 0;
        PyObject *descr0 = _PyType_Lookup(Py_TYPE(P), n->arg);
        if (descr0 != NULL && Py_IS_TYPE(descr0, &PyMemberDescr_Type) &&
            member_type_ok(((PyMemberDescrObject *)descr0)->d_member)) {
            /* a __slots__ member: read from its offset, pinned by the type and the field */
            PyMemberDef *m = ((PyMemberDescrObject *)descr0)->d_member;
            PyObject **field = (PyObject **)((char *)P + m->offset);
            if (*field == NULL)
                return 0;
            if ((r = pin_type(p, n->parent, P)) <= 0 ||
                (r = pin_field(p, n->parent, field, *field)) <= 0)
                return r;
            *out = *field;
            return 1;
        }
        PyObject *d = inst_dict(P);
        if (d == NULL)
            return 0;
        PyObject *descr = _PyType_Lookup(Py_TYPE(P), n->arg);
        PyObject *v;
        if (PyUnicode_Compare(n->arg, fc_str_dict) == 0) {
            if (!is_dict_descr(descr))
                return 0;
            PyObject *got = n->kind == N_ATTR ? PyObject_GetAttr(P, fc_str_dict)
                                              : PyObject_GenericGetAttr(P, fc_str_dict);
            if (got == NULL) {
                PyErr_Clear();
                return 0;
            }
            Py_DECREF(got);
            if (got != d)
                return 0;
            v = d;
        }
        else if (descr != NULL) {
            /* a plain class attribute (no descriptor): the instance's own value if it has
             * one (a dataclass field with a default), else the class's */
            if (!plain_class_attr(descr))
                return 0;
            v = PyDict_GetItemWithError(d, n->arg);
            if (v == NULL) {
                if (PyErr_Occurred()) {
                    PyErr_Clear();
                    return 0;
                }
                v = descr;
            }
        }
        else {
            v = PyDict_GetItemWithError(d, n->arg);
            if (v == NULL) {
                PyErr_Clear();
                return 0;
            }
        }
        if ((r = pin_type(p, n->parent, P)) <= 0 || (r = watch_instdict(p, n->parent, d)) <= 0)
            return r;
        *out = v;
        return 1;
    }
    case N_ITEM:
        if (PyTuple_CheckExact(P) && PyLong_CheckExact(n->arg)) {
            Py_ssize_t k = PyLong_AsSsize_t(n->arg);
            if (k < 0 || k >= PyTuple_GET_SIZE(P)) {
                PyErr_Clear();
                return 0;
            }
            *out = PyTuple_GET_ITEM(P, k);
            return 1;
        }
        if (PyDict_Check(P) && safe_key(n->arg) && Py_TYPE(P)->tp_as_mapping &&
            Py_TYPE(P)->tp_as_mapping->mp_subscript == PyDict_Type.tp_as_mapping->mp_subscript) {
            if (!PyDict_CheckExact(P) && !Py_IS_TYPE(P, &PyODict_Type) &&
                (r = pin_type(p, n->parent, P)) <= 0)
                return r;
            PyObject *v = PyDict_GetItemWithError(P, n->arg);
            if (v == NULL) {
                PyErr_Clear();
                return 0;
            }
            if ((r = watch_dict(p, n->parent, P)) <= 0)
                return r;
            *out = v;
            return 1;
        }
        return 0;
    case N_TYPE:
        if ((r = pin_class(p, n->parent, P)) <= 0)
            return r;
        *out = (PyObject *)Py_TYPE(P);
        return 1;
    }
    return 0;
}

/* ---- ops ------------------------------------------------------------------------------------ */

static int freeze_lacks(Program *p, Op *op, Py_ssize_t node, PyObject *v, int generic)
{
    /* not hasattr(v, name): b = (name, known __getattr__ or None, names of dicts it reads).
     * generic: object.__getattribute__(v, name) raises, whatever the type's own
     * __getattribute__ and __getattr__ (they are not part of that condition). */
    PyObject *name = PyTuple_GET_ITEM(op->b, 0), *known = PyTuple_GET_ITEM(op->b, 1);
    PyObject *dicts = PyTuple_GET_ITEM(op->b, 2);
    PyTypeObject *t = Py_TYPE(v);
    int r;
    if (PyModule_Check(v) || _PyType_Lookup(t, name) != NULL ||
        (!generic && _PyType_Lookup(t, fc_str_getattribute) != fc_obj_getattribute))
        return 0;
    PyObject *d = inst_dict(v);
    if (d == NULL)
        return 0;
    if ((r = PyDict_Contains(d, name)) != 0)
        return r < 0 ? (PyErr_Clear(), 0) : 0;
    if ((r = pin_type(p, node, v)) <= 0 || (r = watch_instdict(p, node, d)) <= 0)
        return r;
    PyObject *ga = _PyType_Lookup(t, fc_str_getattr);
    if (ga == NULL || generic)
        return 1;
    if (ga != known)
        return 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(dicts); k++) {
        PyObject *x = PyDict_GetItemWithError(d, PyTuple_GET_ITEM(dicts, k));
        if (x == NULL) {
            if (PyErr_Occurred())
                return -1;
            continue;
        }
        if (!PyDict_CheckExact(x))
            return 0;
        if ((r = PyDict_Contains(x, name)) != 0)
            return r < 0 ? (PyErr_Clear(), 0) : 0;
        if ((r = watch_dict(p, -1, x)) <= 0)
            return r;
    }
    return 1;
}

static int freeze_falsy(Program *p, Op *op, Py_ssize_t node, PyObject *v)
{
    /* not any(v.__dict__.get(name) for name in b): each present value is a watched dict
     * (its truth is its size) or an immutable scalar */
    int err = 0;
    PyObject *d = readable_instdict(p, node, v, &err);
    if (d == NULL)
        return err ? -1 : 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(op->b); k++) {
        PyObject *x = PyDict_GetItemWithError(d, PyTuple_GET_ITEM(op->b, k));
        if (x == NULL) {
            if (PyErr_Occurred())
                return -1;
            continue;
        }
        if (PyDict_CheckExact(x) || Py_IS_TYPE(x, &PyODict_Type)) {
            int r = watch_dict(p, -1, x);
            if (r <= 0)
                return r;
        }
        else if (!immutable_scalar(x)) {
            return 0;
        }
    }
    return 1;
}

static int freeze_distinct(Program *p, Op *op, PyObject **capv)
{
    Py_ssize_t nf = 0;
    for (Py_ssize_t k = 0; k < op->n; k++)
        nf += p->frozen[op->nodes[k]] && p->slot[op->nodes[k]] < 0;
    if (nf == 0)
        return 0;
    op->frozen_ptrs = PyMem_Malloc(nf * sizeof(void *));
    if (op->vol == NULL)
        op->vol = PyMem_Malloc(op->n * sizeof(Py_ssize_t));
    if (op->frozen_ptrs == NULL || op->vol == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    nf = 0;
    op->n_vol = 0;
    for (Py_ssize_t k = 0; k < op->n; k++) {
        Py_ssize_t node = op->nodes[k];
        if (p->frozen[node] && p->slot[node] < 0)
            op->frozen_ptrs[nf++] = CAPVAL(node);
        else
            op->vol[op->n_vol++] = k;  /* fetched per call: checked on the fast path */
    }
    qsort(op->frozen_ptrs, nf, sizeof(void *), cmp_ptr);
    op->n_frozen_ptrs = nf;
    return nf == op->n;  /* all frozen: distinct for as long as they are */
}

/* 1: op's answer is fixed by the snapshot (it is skipped on the fast path); 0: active. */
static int freeze_op(Program *p, Op *op, PyObject **capv)
{
    Py_ssize_t n0 = op->n > 0 ? op->nodes[0] : -1;
    PyObject *v = n0 >= 0 ? CAPVAL(n0) : NULL;
    int f0 = n0 >= 0 && p->frozen[n0];
    int err = 0;
    switch (op->kind) {
    case O_ID:
    case O_IS:
    case O_EQ:
        return f0;
    case O_TYPE:
        return f0 ? pin_class(p, n0, v) : 0;
    case O_LEN:
        if (!f0)
            return 0;
        if (PyTuple_CheckExact(v) || PyUnicode_CheckExact(v) || PyBytes_CheckExact(v))
            return 1;
        if (PyTuple_Check(v))
            return pin_class(p, n0, v);
        if (PyDict_CheckExact(v) || Py_IS_TYPE(v, &PyODict_Type))
            return watch_dict(p, n0, v);
        return 0;
    case O_DICTKEYS:
        return f0 && (PyDict_CheckExact(v) || (Py_IS_TYPE(v, &PyODict_Type) && op->num == 0))
                   ? watch_dict(p, n0, v) : 0;
    case O_KEY_ABSENT:
        return f0 && PyDict_CheckExact(v) ? watch_dict(p, n0, v) : 0;
    case O_SAME:
        return f0 && p->frozen[op->nodes[1]];
    case O_DISTINCT:
        return freeze_distinct(p, op, capv);
    case O_PY1:
        if (!f0)
            return 0;
        switch (op->rule) {
        case R_NODE:
            return 1;
        case R_ODICT_EMPTY:
            return Py_IS_TYPE(v, &PyODict_Type) ? watch_dict(p, n0, v) : 0;
        case R_ATTRS:
            if (readable_instdict(p, n0, v, &err) != NULL)
                return 1;
            return err ? -1 : 0;
        case R_FALSY:
            return freeze_falsy(p, op, n0, v);
        case R_LACKS:
            return freeze_lacks(p, op, n0, v, 0);
        case R_LACKS_GENERIC:
            return freeze_lacks(p, op, n0, v, 1);
        case R_CLASS_ENTRY:  /* what class v's MRO holds under a name: v's version tag,
                              * renewed by type's own setattr (ABCMeta classes use it too) */
            return PyType_Check(v) && Py_TYPE(v)->tp_setattro == PyType_Type.tp_setattro
                   ? pin_class_tag(p, n0, v) : 0;
        }
        return 0;
    }
    return 0;  /* tensors, global state, Python conditions over the frame */
}

/* ---- capture / steps ------------------------------------------------------------------------ */

static int cmp_step(const void *a, const void *b)
{
    const Step *x = a, *y = b;
    if (x->level != y->level)
        return x->level < y->level ? -1 : 1;
    return x->kind < y->kind ? -1 : x->kind > y->kind;
}

/* What a step that can be shared reads: the dict of an S_DICT, the class of an S_CLASSTAG
 * (NULL: a step of its own). */
static void *shared_key(const Step *s)
{
    return s->kind == S_DICT ? s->ptr : s->kind == S_CLASSTAG ? (void *)s->obj : NULL;
}

/* Steps by (level, kind): a step only dereferences objects that steps of lower levels (or
 * the fetch and anchor steps of its own level, whose kinds sort first) proved valid, and
 * grouping by kind keeps the dispatch predictable.  Steps with equal keys do not depend on
 * each other, so their order does not matter. */
static int cmp_shared_step(const void *a, const void *b)
{
    const Step *x = a, *y = b;
    void *kx = shared_key(x), *ky = shared_key(y);
    int dx = kx != NULL, dy = ky != NULL;
    if (dx != dy)
        return dx - dy;
    if (!dx)
        return 0;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    if (kx != ky)
        return (uintptr_t)kx < (uintptr_t)ky ? -1 : 1;
    return x->level < y->level ? -1 : x->level > y->level;
}

static void sort_steps(Program *p)
{
    /* one S_DICT per dict (a hook dict is read by its guards and by "has no hooks") and one
     * S_CLASSTAG per class (a model's modules share a few classes): keep the earliest level,
     * where what holds it was already proved unchanged */
    qsort(p->steps, p->n_steps, sizeof(Step), cmp_shared_step);
    Py_ssize_t w = 0;
    for (Py_ssize_t k = 0; k < p->n_steps; k++) {
        void *key = shared_key(&p->steps[k]);
        if (w > 0 && key != NULL && p->steps[k].kind == p->steps[w - 1].kind &&
            key == shared_key(&p->steps[w - 1]))
            continue;
        p->steps[w++] = p->steps[k];
    }
    p->n_steps = w;
    qsort(p->steps, p->n_steps, sizeof(Step), cmp_step);
}

/* The fast path's copy of the sorted steps (see HotStep). */
static int build_hot(Program *p)
{
    PyMem_Free(p->hot);
    PyMem_Free(p->pins);
    p->hot = PyMem_Calloc(p->n_steps ? p->n_steps : 1, sizeof(HotStep));
    p->pins = PyMem_Calloc(p->n_steps ? p->n_steps : 1, sizeof(DictPin));
    p->n_hot = p->n_pins = 0;
    if (p->hot == NULL || p->pins == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t run = -1;  /* the hot step that starts the current run (FC_RUN_KIND) */
    for (Py_ssize_t k = 0; k < p->n_steps; k++) {
        Step *s = &p->steps[k];
        if (s->kind == S_DICT) {
            HotStep *last = p->n_hot ? &p->hot[p->n_hot - 1] : NULL;
            if (last == NULL || last->kind != S_DICTS || p->steps[k - 1].kind != S_DICT ||
                p->steps[k - 1].level != s->level) {
                last = &p->hot[p->n_hot++];  /* a run: the S_DICT steps of one level */
                last->kind = S_DICTS;
                last->node = p->n_pins;
                last->a = NULL;
            }
            last->a = (void *)((uintptr_t)last->a + 1);
            p->pins[p->n_pins].dict = s->ptr;
            p->pins[p->n_pins++].tag = s->tag;
            continue;
        }
        HotStep *h = &p->hot[p->n_hot++];
        h->kind = s->kind;
        h->weak = s->weak;
        h->node = s->node;
        if (FC_RUN_KIND(s->kind)) {  /* its run's first step holds the run's length */
            if (run < 0 || p->hot[p->n_hot - 2].kind != s->kind)
                run = p->n_hot - 1;
            p->hot[run].node = p->n_hot - run;
        }
        h->ptr = s->ptr;
        h->tag = s->tag;
        h->a = s->kind == S_ANCHOR ? (void *)s->ref
               : s->kind == S_INSTDICT || s->kind == S_SLOT ? (void *)s->dictslot
                                                             : (void *)s->obj;
    }
    return 0;
}

static int add_seq(Program *p, Py_ssize_t v)
{
    if (p->n_seq == p->cap_seq) {
        Py_ssize_t cap = p->cap_seq ? 2 * p->cap_seq : 64;
        Py_ssize_t *q = PyMem_Realloc(p->seq, cap * sizeof(Py_ssize_t));
        if (q == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        p->seq = q;
        p->cap_seq = cap;
    }
    p->seq[p->n_seq++] = v;
    return 0;
}

/* Fetch node i (and its unfetched ancestors, first) before the op that needs it. */
static int seq_fetch(Program *p, Py_ssize_t i, Py_ssize_t *nf)
{
    if (p->frozen[i] || p->slot[i] >= 0)
        return 0;
    Py_ssize_t parent = p->nodes[i].parent;
    if (parent >= 0 && seq_fetch(p, parent, nf) < 0)
        return -1;
    p->slot[i] = (*nf)++;
    return add_seq(p, -1 - i);
}

void fc_clear_snapshot(Program *p)
{
    p->state = SNAP_NONE;
    p->n_steps = 0;
    p->n_hot = 0;
    p->n_pins = 0;
    p->n_active = 0;
    p->n_seq = 0;
    p->n_fetch = 0;
    for (Py_ssize_t k = 0; p->ops && k < p->n_ops; k++) {
        Op *op = &p->ops[k];
        PyMem_Free(op->frozen_ptrs);
        op->frozen_ptrs = NULL;
        op->n_frozen_ptrs = 0;
        PyMem_Free(op->fp_frozen);
        op->fp_frozen = NULL;
        op->n_fp_frozen = 0;
        op->fps_state = 0;
    }
    if (p->held && PyList_GET_SIZE(p->held))
        PyList_SetSlice(p->held, 0, PyList_GET_SIZE(p->held), NULL);
#if FC_WATCHERS
    p->n_watched = 0;
#endif
}

/* Record what a snapshot of this call's state relies on (not trusted until committed).
 * 1: recorded; 0: a source cannot be fetched (the check fails anyway); -1: error. */
int fc_capture(Program *p, PyObject *L, PyObject *G, PyObject *C)
{
    fc_clear_snapshot(p);
    Py_ssize_t n = p->n_nodes, nf = 0, i;
    PyObject **capv = PyMem_Calloc(n ? n : 1, sizeof(PyObject *));
    if (capv == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int result = 1;
#if FC_WATCHERS
    p->dirty = 0;
    p->capturing = 1;
#endif
    memset(p->frozen, 0, n);
    memset(p->has_step, 0, n);
    for (i = 0; i < n; i++) {
        p->slot[i] = -1;
        p->rec[i] = NULL;
        p->depth[i] = p->nodes[i].parent >= 0 ? p->depth[p->nodes[i].parent] + 1 : 0;
    }
    for (i = 0; i < n; i++) {
        Node *nd = &p->nodes[i];
        if (nd->kind == N_CONST) {
            p->frozen[i] = 1;
            p->rec[i] = nd->arg;
            continue;
        }
        int parent_frozen = nd->parent >= 0 && p->frozen[nd->parent];
        PyObject *parent = parent_frozen ? CAPVAL(nd->parent) : NULL;
        if (parent_frozen) {
            PyObject *v = NULL;
            int r = freeze_node(p, i, parent, &v);
            if (r < 0)
                goto error;
            if (r) {
                p->frozen[i] = 1;
                p->rec[i] = v;
                continue;
            }
        }
        int soft = nd->anchor < 0 && nd->soft >= 0;
        if ((nd->anchor < 0 && !soft) || (nd->parent >= 0 && !parent_frozen) || nd->kind == N_PY)
            continue;  /* volatile: fetched lazily, in guard order */
        PyObject *v = fc_fetch(p, i, parent, L, G, C);
        if (v == NULL) {
            if (!fc_swallow())
                goto error;
            if (soft)
                continue;  /* its ops fail in order, as the check's */
            result = 0;  /* the identity guard fails: so does the check */
            goto done;
        }
        if (soft) {
            /* the object of this call, held weakly by the snapshot (p->held): an object of
             * another type, or one without weak references, stays volatile */
            PyObject *ref = NULL;
            if ((PyObject *)Py_TYPE(v) != p->ops[nd->soft].a ||
                !PyType_SUPPORTS_WEAKREFS(Py_TYPE(v)) ||
                (ref = PyWeakref_NewRef(v, NULL)) == NULL) {
                Py_DECREF(v);
                if (PyErr_Occurred() && !fc_swallow())
                    goto error;
                continue;
            }
            int held = PyList_Append(p->held, ref);
            Py_DECREF(ref);
            if (held < 0) {
                Py_DECREF(v);
                goto error;
            }
            p->slot[i] = nf;
            capv[nf++] = v;
            if (add_step(p, S_FETCH, i, NULL, 0, NULL, 0) < 0 ||
                add_step(p, S_ANCHOR, i, NULL, 0, ref, 2) < 0)
                goto error;
            p->frozen[i] = 1;
            p->rec[i] = v;
            continue;
        }
        p->slot[i] = nf;
        capv[nf++] = v;
        Op *op = &p->ops[nd->anchor];
        PyObject *t = op->num ? FC_WEAK_TARGET(op->a) : op->a;
        if (v != t || (op->num && t == Py_None)) {
            result = 0;  /* likewise */
            goto done;
        }
        if (add_step(p, S_FETCH, i, NULL, 0, NULL, 0) < 0 ||
            add_step(p, S_ANCHOR, i, NULL, 0, op->a, (int)op->num) < 0)
            goto error;
        p->frozen[i] = 1;
        p->rec[i] = v;
    }
    for (Py_ssize_t k = 0; k < p->n_ops; k++) {
        p->cur_level = p->ops[k].n > 0 ? p->depth[p->ops[k].nodes[0]] : 0;
        int r = freeze_op(p, &p->ops[k], capv);
        if (r < 0)
            goto error;
        p->op_frozen[k] = (char)r;
        if (r)
            continue;
        p->active[p->n_active++] = k;
        for (Py_ssize_t j = 0; j < p->ops[k].n; j++)
            if (seq_fetch(p, p->ops[k].nodes[j], &nf) < 0)
                goto error;
        if (add_seq(p, k) < 0)
            goto error;
    }
    p->n_fetch = nf;
    sort_steps(p);
    if (build_hot(p) < 0)
        goto error;
    goto done;
error:
    result = -1;
done:
    for (i = 0; i < n; i++)
        Py_XDECREF(capv[i]);
    PyMem_Free(capv);
#if FC_WATCHERS
    if (p->n_watched > 1)
        qsort(p->watched, p->n_watched, sizeof(void *), cmp_ptr);
    p->capturing = 0;
#endif
    if (result != 1) {
        fc_clear_snapshot(p);
        p->n_fetch = 0;
    }
    return result;
}

/* Fetch what must be fetched and prove the frozen part unchanged: R_PASS, R_FAIL (an anchor
 * or a fetch failed: so does the Python check), R_UNSURE (something changed), R_ERROR. */
int fc_run_steps(Program *p, PyObject **cur, PyObject *L, PyObject *G, PyObject *C)
{
    if (p->state == SNAP_NONE)
        return R_UNSURE;
#if FC_WATCHERS
    if (p->dirty)
        return R_UNSURE;
#endif
    for (Py_ssize_t k = 0; k < p->n_hot; k++) {
        const HotStep *s = &p->hot[k], *e = s + 1;
        if (FC_RUN_KIND(s->kind)) {  /* a run of one kind, checked in one loop below */
            e = s + s->node;
            k += s->node - 1;
        }
        switch (s->kind) {
        case S_FETCH: {
            Node *nd = &p->nodes[s->node];
            PyObject *v = fc_fetch(p, s->node, nd->parent >= 0 ? VAL(nd->parent) : NULL, L, G, C);
            if (v == NULL)
                return fc_swallow() ? R_FAIL : R_ERROR;
            cur[p->slot[s->node]] = v;
            break;
        }
        case S_ANCHOR: {
            PyObject *t = s->weak ? FC_WEAK_TARGET((PyObject *)s->a) : (PyObject *)s->a;
            if (VAL(s->node) != t || (s->weak && t == Py_None))
                return s->weak == 2 ? R_UNSURE : R_FAIL;  /* a soft anchor: another object */
            break;
        }
        /* runs (s..e, build_hot), in order: a step still runs only after every step
         * before it passed */
        case S_TYPEPIN:
            for (; s < e; s++)
                if ((void *)Py_TYPE((PyObject *)s->a) != s->ptr)
                    return R_UNSURE;
            break;
        case S_SLOT:
            for (; s < e; s++)
                if ((void *)*(PyObject **)s->a != s->ptr)
                    return R_UNSURE;
            break;
        case S_CLASSTAG:
            for (; s < e; s++)
                if (((PyTypeObject *)s->a)->tp_version_tag != s->tag)
                    return R_UNSURE;
            break;
        case S_INSTDICT:
            for (; s < e; s++) {
                if ((void *)*(PyObject **)s->a != s->ptr)
                    return R_UNSURE;
#if !FC_WATCHERS
                if (FC_DICT_TAG(s->ptr) != s->tag)
                    return R_UNSURE;
#endif
            }
            break;
#if !FC_WATCHERS
        case S_DICTS: {
            /* one level's dicts: each is only read after the steps of lower levels proved
             * that what holds it is unchanged (so it is alive) */
            const DictPin *d = &p->pins[s->node], *end = d + (uintptr_t)s->a;
            for (; d < end; d++)
                if (FC_DICT_TAG(d->dict) != d->tag)
                    return R_UNSURE;
            break;
        }
#endif
        }
    }
    return R_PASS;
}
