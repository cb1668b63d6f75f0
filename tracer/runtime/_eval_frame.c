/*
 * tracer/_eval_frame.c -- the PEP 523 frame hook of frametracer (CPython 3.11 to 3.15).
 *
 * What it does
 * ------------
 * Installs an interpreter-wide frame evaluator.  For every *fresh* Python function
 * frame started on a thread that has a callback set, it calls
 *
 *     callback(view) -> None | CodeType
 *
 * with a small read-only FrameView (not a types.FrameType: on 3.11 a frame object
 * cannot be made safely for a frame that has not started).  None runs the frame as
 * usual; a code object is run *instead* by "call-through" (strategy S1 of
 * /work/shared/design/eval_frame_hook.md): a throw-away function object with the
 * replacement code, the original globals and the original closure is called with
 * the original N argument values.  The original frame is never run: on 3.11 its
 * pusher (_PyEval_Vector) clears and pops it after we return; on 3.12+ the evaluator
 * owns the frame it is given, so whenever we do not hand it to the default evaluator
 * we clear and pop it ourselves (release_frame).
 *
 * Python API (all per *thread* unless stated):
 *   set_eval_frame(cb_or_None) -> previous callback (or None)
 *   get_eval_frame()           -> current callback (or None)
 *   skip_code(code, recursive=False) / unskip_code(code) / is_skipped(code) -> bool
 *   rule_skip(code) / is_rule_skipped(code) -> bool   (process-wide, see below)
 *   set_rule_type(type_or_None) -> previous            (process-wide)
 *   give_up(code) / is_given_up(code) / lift_give_up(code)   (process-wide; rule type only,
 *                              lifted by a frame with a tensor argument: set_tensor_type(t))
 *   allow_unhooked(code) / is_unhooked(code)   (a given-up code may run with the evaluator
 *                              uninstalled: UNHOOKED_FLAG)
 *   call_unhooked(fn, *args)   fn(*args), the evaluator uninstalled inside the callback
 *   untraced(fn, on_error=None) -> a callable that calls fn with this thread's callback off;
 *                              if fn raises an Exception, on_error(exc) is the result
 *   set_error_handler(fn_or_None) -> previous handler   (process-wide)
 *   clear_thread_caches()      drop this thread's recycled function object / view
 *   _hook_installed() -> bool, _active_count() -> int, _frames_seen() -> int   (for tests)
 *
 * CPython internals relied on (checked against the 3.11.7, 3.12.1, 3.13.0, 3.14.10 and 3.15.2 headers)
 * ---------------------------------------------------------------------------------
 *   internal/pycore_frame.h (needs Py_BUILD_CORE), struct _PyInterpreterFrame:
 *     the function, code, globals and builtins of the frame being started (to build
 *     the view and the call-through function), f_locals and owner (filters),
 *     localsplus[] (the argument values), stacktop (3.12 clearing), the instruction
 *     pointer (has the frame started?); FRAME_OWNED_BY_GENERATOR.  Their names change
 *     per version: see FRAME_CODE / FRAME_FUNC / FRAME_IS_FRESH below.
 *   cpython/code.h: PyCodeObject fields co_argcount, co_kwonlyargcount, co_flags,
 *     co_nlocalsplus, co_nfreevars, co_localsplusnames (argument count and names,
 *     free-variable names); _PyCode_CODE (3.13: internal/pycore_code.h; where a fresh
 *     frame's instruction pointer stands); _PyCode_GetExtra / _PyCode_SetExtra (skip flags).
 *   cpython/funcobject.h: PyFunctionObject.func_closure (set directly on a
 *     function we just created and own: the call-through keeps the original cells).
 *   cpython/pystate.h: _PyInterpreterState_Get/SetEvalFrameFunc (install, chain);
 *     PyThreadState.tracing (> 0 inside trace/profile/monitoring callbacks and audit hooks);
 *     PyThreadState.curexc_type (3.11) / current_exception (3.12+): pending
 *     exception test without a call; 3.12: datastack_chunk/top/limit and _PyStackChunk
 *     (popping the frame, with PyObject_GetArenaAllocator to free an emptied chunk,
 *     which is what the unexported _PyObject_VirtualFree does).
 *   cpython/ceval.h: _PyEval_EvalFrameDefault, _PyEval_RequestCodeExtraIndex.
 *   3.13 internal/pycore_ceval.h: _PyEval_FrameClearAndPop (exported since 3.13).
 *   Unraisable errors: _PyErr_WriteUnraisableMsg (3.11, 3.12; private since 3.13, which
 *   uses the public PyErr_WriteUnraisable).
 *   Behaviour: on 3.11 the code that *pushed* a frame clears and pops it; on 3.12+ the
 *   evaluator does.  A fresh frame holds only its argument slots (cells not made,
 *   free vars not copied: MAKE_CELL/COPY_FREE_VARS are instructions on all three);
 *   it is not linked into the thread's frame chain until the default evaluator runs
 *   it, so nothing can have made its frame object.  The first co_argcount +
 *   co_kwonlyargcount + varargs + varkw entries of co_localsplusnames are the
 *   arguments in that order; free variables are the last co_nfreevars slots.
 *   3.14 (checked against 3.14.10's headers; 3.15.2's frame struct is the same): the frame
 *   struct moved to internal/pycore_interpframe_structs.h (included through
 *   internal/pycore_interpframe.h, which also has _PyFrame_GetCode); f_executable, f_funcobj
 *   and localsplus[] are tagged _PyStackRefs (PyStackRef_AsPyObjectBorrow reads one; the NULL
 *   ref is not a zero word but borrows as NULL); _PyEval_FrameClearAndPop is still exported
 *   (internal/pycore_ceval.h). A fresh frame's instr_ptr is _PyCode_CODE(code) (GIL builds;
 *   the free-threaded build, which has per-thread bytecode, is refused).
 *   3.15: _PyInterpreterState_SetEvalFrameAllowSpecialization (cpython/pystate.h, see
 *   install_hook).
 *
 * Not supported: sub-interpreters (single-phase init, static state).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x03100000
#error "tracer/_eval_frame.c relies on the frame internals of CPython 3.11 to 3.15 \
(_PyInterpreterFrame, frame ownership) and supports only those versions."
#endif
#ifdef Py_GIL_DISABLED
#error "tracer/_eval_frame.c does not support the free-threaded build (3.13t/3.14t): \
its state is guarded by the GIL."
#endif

/* pycore_frame.h refuses to compile without Py_BUILD_CORE.  Define it only around
   those includes so the rest of this file sees the ordinary public API. */
#define Py_BUILD_CORE
#include <internal/pycore_frame.h>
#if PY_VERSION_HEX >= 0x030E0000
#include <internal/pycore_interpframe.h> /* _PyFrame_GetCode/GetFunction, stack refs */
#endif
#if PY_VERSION_HEX >= 0x030D0000
#include <internal/pycore_ceval.h> /* _PyEval_FrameClearAndPop */
#endif
#undef Py_BUILD_CORE

/* The version differences, all of them.
   FRAME_CODE / FRAME_FUNC: 3.12 renamed f_func to f_funcobj; 3.13 f_code to f_executable.
   FRAME_IS_FRESH: not started yet.  3.11/3.12 point prev_instr one before the first
     instruction (LASTI == -1); 3.13's instr_ptr points *at* the first one.
   EXC_PENDING: 3.12 keeps the pending exception as one object.
   release_frame(): see the header comment; a no-op on 3.11. */
/* 3.12 renamed the code-extra API (the old names remain, deprecated). */
#if PY_VERSION_HEX >= 0x030C0000
#define CODE_GET_EXTRA PyUnstable_Code_GetExtra
#define CODE_SET_EXTRA PyUnstable_Code_SetExtra
#define REQUEST_CODE_EXTRA_INDEX PyUnstable_Eval_RequestCodeExtraIndex
#else
#define CODE_GET_EXTRA _PyCode_GetExtra
#define CODE_SET_EXTRA _PyCode_SetExtra
#define REQUEST_CODE_EXTRA_INDEX _PyEval_RequestCodeExtraIndex
#endif

#if PY_VERSION_HEX >= 0x030E0000
/* 3.14: f_executable, f_funcobj and localsplus[] are tagged _PyStackRefs (a borrowed or
   "deferred" reference carries a tag bit): read through the header's accessors. */
#define FRAME_CODE(f) _PyFrame_GetCode(f)
#define FRAME_FUNC(f) ((PyFunctionObject *)PyStackRef_AsPyObjectBorrow((f)->f_funcobj)) /* (no assert: may be None) */
#define FRAME_LOCAL(f, i) PyStackRef_AsPyObjectBorrow((f)->localsplus[i])
#define FRAME_IS_FRESH(f) ((f)->instr_ptr == _PyCode_CODE(FRAME_CODE(f)))
#define EXC_PENDING(ts) ((ts)->current_exception != NULL)
#define WRITE_UNRAISABLE(co) PyErr_WriteUnraisable(co)
#elif PY_VERSION_HEX >= 0x030D0000
#define FRAME_CODE(f) ((PyCodeObject *)(f)->f_executable)
#define FRAME_FUNC(f) ((PyFunctionObject *)(f)->f_funcobj)
#define FRAME_IS_FRESH(f) ((f)->instr_ptr == _PyCode_CODE(FRAME_CODE(f)))
#define EXC_PENDING(ts) ((ts)->current_exception != NULL)
#define WRITE_UNRAISABLE(co) PyErr_WriteUnraisable(co) /* (3.13 made the Msg variant private) */
#elif PY_VERSION_HEX >= 0x030C0000
#define FRAME_CODE(f) ((f)->f_code)
#define FRAME_FUNC(f) ((PyFunctionObject *)(f)->f_funcobj)
#define FRAME_IS_FRESH(f) (_PyInterpreterFrame_LASTI(f) < 0)
#define EXC_PENDING(ts) ((ts)->current_exception != NULL)
#define WRITE_UNRAISABLE(co) _PyErr_WriteUnraisableMsg("in frametracer frame callback for", (co))
#else
#define FRAME_CODE(f) ((f)->f_code)
#define FRAME_FUNC(f) ((f)->f_func)
#define FRAME_IS_FRESH(f) (_PyInterpreterFrame_LASTI(f) < 0)
#define EXC_PENDING(ts) ((ts)->curexc_type != NULL)
#define WRITE_UNRAISABLE(co) _PyErr_WriteUnraisableMsg("in frametracer frame callback for", (co))
#endif
#ifndef FRAME_LOCAL
#define FRAME_LOCAL(f, i) ((f)->localsplus[i])
#endif

/* 3.12+: we did not run `frame` through the default evaluator, so clear and pop it as
   the evaluator would have.  The frame is fresh and was never visible (no frame object,
   f_locals NULL for a function frame): clearing is dropping the references it holds
   (localsplus[0:stacktop], its function and code), then popping it off the thread's
   data stack, freeing its chunk if it was the first frame in one. */
static inline void
release_frame(PyThreadState *tstate, _PyInterpreterFrame *frame)
{
#if PY_VERSION_HEX >= 0x030D0000
    _PyEval_FrameClearAndPop(tstate, frame); /* (still exported on 3.14 and 3.15) */
#elif PY_VERSION_HEX >= 0x030C0000
    assert(frame->frame_obj == NULL && frame->f_locals == NULL);
    for (int i = 0; i < frame->stacktop; i++) {
        Py_XDECREF(frame->localsplus[i]);
    }
    Py_DECREF(frame->f_funcobj);
    Py_DECREF(frame->f_code);
    _PyStackChunk *chunk = tstate->datastack_chunk;
    if ((PyObject **)frame == &chunk->data[0]) { /* never the root chunk: it has a shim */
        _PyStackChunk *previous = chunk->previous;
        tstate->datastack_chunk = previous;
        tstate->datastack_top = &previous->data[previous->top];
        tstate->datastack_limit = (PyObject **)((char *)previous + previous->size);
        PyObjectArenaAllocator arena;
        PyObject_GetArenaAllocator(&arena);
        arena.free(arena.ctx, chunk, chunk->size);
    }
    else {
        tstate->datastack_top = (PyObject **)frame;
    }
#else
    (void)tstate, (void)frame; /* 3.11: _PyEval_Vector, which pushed it, does it */
#endif
}

/* ------------------------------------------------------------------------ */
/* State.  The GIL protects everything that is not thread-local.            */

/* This thread's callback: a strong reference, or NULL for "off". */
static _Thread_local PyObject *tls_callback = NULL;
/* Replacement code we are about to start on this thread (borrowed, only while
   the call-through is on the C stack): its frame must not reach the callback. */
static _Thread_local PyCodeObject *tls_pending = NULL;

/* Number of thread-local callback references alive (in TLS, or parked by a
   disable bracket).  The evaluator is installed while this is > 0. */
static Py_ssize_t n_active = 0;
static unsigned long long n_frames_seen = 0;  /* frames our evaluator was handed (for tests) */
static int hook_in_chain = 0;                 /* our evaluator is in the interp chain */
static _PyFrameEvalFunction prev_eval = NULL; /* evaluator we chain to; NULL = default */
static Py_ssize_t extra_index = -1;           /* our slot in code objects' co_extra */
static PyObject *error_handler = NULL;        /* fn(exc, code) or NULL */

/* Code-extra flags: small tagged integers, never objects, so no freefunc. */
#define SKIP_FLAG ((uintptr_t)1)           /* never hand this code to the callback */
#define SKIP_RECURSIVE_FLAG ((uintptr_t)2) /* ...nor anything it calls */
/* A skip decided by a rule (the tracer's default: torch internals, the standard library...)
   and cached here so that its frames cost no Python call: honoured only for callbacks whose
   type is exactly `rule_type` (callbacks with another rule get every frame as before). */
#define RULE_SKIP_FLAG ((uintptr_t)4)
static PyObject *rule_type = NULL;            /* strong ref to a type, or NULL */
/* A frame the tracer gave up on (a trace of it made no tensor work: tracer/runtime/give_up.py):
   like RULE_SKIP_FLAG (honoured for the rule type only), except that a frame with a tensor
   among its arguments (`tensor_type`, or in the *args tuple) lifts the mark and reaches the
   callback, which traces it: a function called with ints first and tensors later. */
#define GIVEN_UP_FLAG ((uintptr_t)8)
#define KIND_MASK ((uintptr_t)15)          /* the four marks above; the bits below qualify GIVEN_UP */
static PyTypeObject *tensor_type = NULL;      /* strong ref, or NULL: a given-up mark is never lifted */
/* A given-up frame whose last watched run reached nothing but skipped and given-up frames
   (no frame went to the callback: nothing traced, no compiled entry run) runs with the
   evaluator *uninstalled* (when no other thread has a callback): CPython then inlines the
   Python-to-Python calls under it again, which it does not do while any PEP 523 evaluator is
   installed, and that is most of what a hooked call costs (tracer/runtime/give_up.py).  Every
   RECHECK_EVERY-th run is watched again; a watched run that reaches the callback takes the
   mark away for good (NEVER_UNHOOKED): what it calls now has tensor work.  Only codes the
   tracer allows (allow_unhooked: their trace saw every call they can make,
   tracer/trace/coverage.py) are watched at all. */
#define UNHOOKED_FLAG ((uintptr_t)16)
#define NEVER_UNHOOKED_FLAG ((uintptr_t)32)
#define UNHOOKABLE_FLAG ((uintptr_t)64)    /* allow_unhooked(code): its trace saw every call it can make */
#define RUNS_SHIFT 8                       /* unhooked runs since the last watched one */
#define RUNS_ONE ((uintptr_t)1 << RUNS_SHIFT)
#define RECHECK_EVERY ((uintptr_t)64)
/* Set when a frame reaches the callback on this thread: how a watched run learns that
   something under it was not skipped or given up. */
static _Thread_local int tls_reached = 0;
/* Set while this thread runs its callback (the hook holds the callback meanwhile). */
static _Thread_local int tls_in_callback = 0;

static inline PyObject *
call_default(PyThreadState *tstate, _PyInterpreterFrame *frame, int throwflag)
{
    if (prev_eval != NULL) {
        return prev_eval(tstate, frame, throwflag);
    }
    return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
}

static inline uintptr_t
code_flags(PyCodeObject *co)
{
    void *extra = NULL;
    if (CODE_GET_EXTRA((PyObject *)co, extra_index, &extra) < 0) {
        PyErr_Clear(); /* cannot happen for a real code object and a valid index */
        return 0;
    }
    return (uintptr_t)extra;
}

/* Total number of argument slots: positional, kw-only, *args, **kwargs. */
static inline int
n_arg_slots(PyCodeObject *co)
{
    return co->co_argcount + co->co_kwonlyargcount +
           ((co->co_flags & CO_VARARGS) ? 1 : 0) + ((co->co_flags & CO_VARKEYWORDS) ? 1 : 0);
}

/* Whether an argument slot of a fresh frame (or an item of its *args tuple) is a tensor. */
static int
has_tensor_arg(_PyInterpreterFrame *frame, PyCodeObject *co)
{
    if (tensor_type == NULL) {
        return 0;
    }
    int n = n_arg_slots(co);
    int star = (co->co_flags & CO_VARARGS) ? co->co_argcount + co->co_kwonlyargcount : -1;
    for (int i = 0; i < n; i++) {
        PyObject *v = FRAME_LOCAL(frame, i);
        if (v == NULL) {
            continue;
        }
        if (PyObject_TypeCheck(v, tensor_type)) {
            return 1;
        }
        if (i == star && PyTuple_Check(v)) {
            for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(v); k++) {
                if (PyObject_TypeCheck(PyTuple_GET_ITEM(v, k), tensor_type)) {
                    return 1;
                }
            }
        }
    }
    return 0;
}

/* Put `saved` back as this thread's callback at the end of a disable bracket.
   If code run inside the bracket left a callback set (an unbalanced
   set_eval_frame), that one is dropped: the bracket owns the thread's state. */
static inline void
tls_restore(PyObject *saved)
{
    PyObject *leftover = tls_callback;
    tls_callback = saved;
    if (leftover != NULL) {
        n_active--; /* cannot reach 0: `saved` is non-NULL and still counted */
        Py_DECREF(leftover);
    }
}

/* A disable bracket: this thread's callback parked (`cb`, the caller's copy of it) while
   something runs, so nothing it runs reaches the callback.  When this thread's callback is
   the only one and ours the only evaluator, the evaluator is also uninstalled for the
   bracket (park returns 1): CPython inlines Python-to-Python calls only while no PEP 523
   evaluator is installed, so under the bracket they cost what they cost without us.  A
   callback set meanwhile (by this thread inside the bracket, or by another thread)
   installs it again as usual; unpark puts back the count and the evaluator. */
static void install_hook(void);
static void maybe_uninstall_hook(void);

static inline int
park(void)
{
    tls_callback = NULL;
    if (n_active == 1 && prev_eval == NULL && hook_in_chain) {
        n_active = 0;
        maybe_uninstall_hook();
        return 1;
    }
    return 0;
}

static inline void
unpark(PyObject *cb, int uninstalled)
{
    if (uninstalled) {
        n_active++; /* (before tls_restore, which may drop a callback set inside) */
    }
    tls_restore(cb);
    if (uninstalled) {
        install_hook(); /* (a no-op when a callback set inside installed it already) */
    }
}

/* ------------------------------------------------------------------------ */
/* FrameView: what the callback receives.                                    */

typedef struct {
    PyObject_HEAD
    PyObject *f_code;     /* strong refs, all non-NULL except closure/locals */
    PyObject *f_globals;
    PyObject *f_builtins;
    PyObject *f_func;
    PyObject *closure;    /* func_closure tuple or NULL (read as None) */
    PyObject *f_args;     /* tuple of the N argument values */
    PyObject *f_locals;   /* lazily built dict, NULL until first access */
} FrameView;

static int
view_traverse(FrameView *v, visitproc visit, void *arg)
{
    Py_VISIT(v->f_code);
    Py_VISIT(v->f_globals);
    Py_VISIT(v->f_builtins);
    Py_VISIT(v->f_func);
    Py_VISIT(v->closure);
    Py_VISIT(v->f_args);
    Py_VISIT(v->f_locals);
    return 0;
}

static int
view_clear(FrameView *v)
{
    Py_CLEAR(v->f_code);
    Py_CLEAR(v->f_globals);
    Py_CLEAR(v->f_builtins);
    Py_CLEAR(v->f_func);
    Py_CLEAR(v->closure);
    Py_CLEAR(v->f_args);
    Py_CLEAR(v->f_locals);
    return 0;
}

static void
view_dealloc(FrameView *v)
{
    PyObject_GC_UnTrack(v);
    view_clear(v);
    PyObject_GC_Del(v);
}

/* f_locals: {argument name: value} for the N argument slots, plus
   {free-variable name: cell contents} for non-empty closure cells.  Built from
   the view's own tuple, never from the frame (no FastToLocals: pitfall P7). */
static PyObject *
view_get_locals(FrameView *v, void *Py_UNUSED(closure))
{
    if (v->f_code == NULL || v->f_args == NULL) { /* an emptied view; never handed out */
        Py_RETURN_NONE;
    }
    if (v->f_locals == NULL) {
        PyCodeObject *co = (PyCodeObject *)v->f_code;
        PyObject *names = co->co_localsplusnames;
        PyObject *d = PyDict_New();
        if (d == NULL) {
            return NULL;
        }
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(v->f_args); i++) {
            if (PyDict_SetItem(d, PyTuple_GET_ITEM(names, i), PyTuple_GET_ITEM(v->f_args, i)) < 0) {
                goto error;
            }
        }
        if (v->closure != NULL) {
            Py_ssize_t nfree = PyTuple_GET_SIZE(v->closure);
            Py_ssize_t offset = co->co_nlocalsplus - co->co_nfreevars;
            for (Py_ssize_t i = 0; i < nfree && i < co->co_nfreevars; i++) {
                PyObject *cell = PyTuple_GET_ITEM(v->closure, i);
                PyObject *value = PyCell_Check(cell) ? PyCell_GET(cell) : NULL;
                if (value != NULL &&
                    PyDict_SetItem(d, PyTuple_GET_ITEM(names, offset + i), value) < 0) {
                    goto error;
                }
            }
        }
        v->f_locals = d;
        goto done;
    error:
        Py_DECREF(d);
        return NULL;
    }
done:
    return Py_NewRef(v->f_locals);
}

static PyObject *
view_get_lasti(FrameView *Py_UNUSED(v), void *Py_UNUSED(closure))
{
    return PyLong_FromLong(-1); /* always: only fresh frames are shown */
}

static PyObject *
view_repr(FrameView *v)
{
    PyCodeObject *co = (PyCodeObject *)v->f_code;
    if (co == NULL) {
        return PyUnicode_FromString("<FrameView (empty)>");
    }
    return PyUnicode_FromFormat("<FrameView %U at %U:%d>", co->co_qualname, co->co_filename,
                                co->co_firstlineno);
}

static PyMemberDef view_members[] = {
    {"f_code", T_OBJECT, offsetof(FrameView, f_code), READONLY, "the frame's code object"},
    {"f_globals", T_OBJECT, offsetof(FrameView, f_globals), READONLY, "globals dict"},
    {"f_builtins", T_OBJECT, offsetof(FrameView, f_builtins), READONLY, "builtins dict"},
    {"f_func", T_OBJECT, offsetof(FrameView, f_func), READONLY, "the function being called"},
    {"closure", T_OBJECT, offsetof(FrameView, closure), READONLY,
     "the function's __closure__ tuple, or None"},
    {"f_args", T_OBJECT, offsetof(FrameView, f_args), READONLY,
     "tuple of the argument-slot values in co_varnames order: positional, keyword-only, "
     "*args tuple, **kwargs dict"},
    {NULL}};

static PyGetSetDef view_getset[] = {
    {"f_locals", (getter)view_get_locals, NULL,
     "new dict: argument slots and closure-cell contents by name (built on first access)", NULL},
    {"f_lasti", (getter)view_get_lasti, NULL, "always -1 (the frame has not started)", NULL},
    {NULL}};

static PyTypeObject FrameView_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracer.runtime._eval_frame.FrameView",
    .tp_basicsize = sizeof(FrameView),
    .tp_dealloc = (destructor)view_dealloc,
    .tp_repr = (reprfunc)view_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Read-only view of a Python frame that is about to start.",
    .tp_traverse = (traverseproc)view_traverse,
    .tp_clear = (inquiry)view_clear,
    .tp_members = view_members,
    .tp_getset = view_getset,
};

static _Thread_local FrameView *tls_spare_view = NULL; /* strong ref or NULL */

/* Build the view; NULL with an exception set on failure, NULL *without* an
   exception if an argument slot is unexpectedly empty (then: run normally). */
static FrameView *
make_view(_PyInterpreterFrame *frame, int nargs)
{
    PyObject *args = PyTuple_New(nargs);
    if (args == NULL) {
        return NULL;
    }
    for (int i = 0; i < nargs; i++) {
        PyObject *value = FRAME_LOCAL(frame, i);
        if (value == NULL) { /* never seen on 3.11; be defensive */
            Py_DECREF(args);
            return NULL;
        }
        PyTuple_SET_ITEM(args, i, Py_NewRef(value));
    }
    FrameView *v = tls_spare_view; /* an emptied view from an earlier call, or NULL */
    if (v != NULL) {
        tls_spare_view = NULL;
        PyObject_GC_Track(v);
    }
    else {
        v = PyObject_GC_New(FrameView, &FrameView_Type);
        if (v == NULL) {
            Py_DECREF(args);
            return NULL;
        }
        PyObject_GC_Track(v);
    }
    v->f_code = Py_NewRef(FRAME_CODE(frame));
    v->f_globals = Py_NewRef(frame->f_globals);
    v->f_builtins = Py_NewRef(frame->f_builtins);
    v->f_func = Py_NewRef(FRAME_FUNC(frame));
    v->closure = Py_XNewRef(FRAME_FUNC(frame)->func_closure);
    v->f_args = args;
    v->f_locals = NULL;
    return v;
}

/* Drop our reference to a view after the callback.  If the callback did not keep it,
   empty it and park it for the next frame on this thread (saves an allocation and a
   GC link/unlink per call); an emptied view holds no references. */
static void
release_view(FrameView *v)
{
    if (Py_REFCNT(v) == 1 && tls_spare_view == NULL) {
        PyObject_GC_UnTrack(v); /* parked views are invisible to gc.get_objects() */
        view_clear(v);
        tls_spare_view = v;
        return;
    }
    Py_DECREF(v);
}

/* ------------------------------------------------------------------------ */
/* Errors from the callback (or a bad return value).                         */

/* An exception is set.  Returns 0 if it was reported (the frame then runs
   normally) or -1 if it must propagate to the caller of the frame: a
   BaseException that is not an Exception (KeyboardInterrupt, SystemExit), or
   anything the registered error handler itself raises. */
static int
report_error(PyCodeObject *co)
{
    if (!PyErr_ExceptionMatches(PyExc_Exception)) {
        return -1;
    }
    if (error_handler == NULL) {
        WRITE_UNRAISABLE((PyObject *)co);
        return 0;
    }
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL) {
        PyException_SetTraceback(value, tb);
    }
    PyObject *handler = Py_NewRef(error_handler); /* may be replaced while it runs */
    PyObject *r = PyObject_CallFunctionObjArgs(handler, value, (PyObject *)co, NULL);
    Py_DECREF(handler);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    if (r == NULL) {
        return -1;
    }
    Py_DECREF(r);
    return 0;
}

/* S1 shape check for a replacement code object; 0 ok, -1 with TypeError set.
   Cheap (integer compares, and name identity for interned free-var names), so it
   runs on every call: a cached "validated" flag would be only as cheap, and it
   could not know which original the replacement was validated against. */
static int
check_replacement(PyCodeObject *new, PyCodeObject *orig, int nargs)
{
    const int bad_flags = CO_VARARGS | CO_VARKEYWORDS | CO_GENERATOR | CO_COROUTINE |
                          CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE;
    if (new->co_argcount != nargs || new->co_kwonlyargcount != 0 ||
        (new->co_flags & bad_flags) || !(new->co_flags & CO_OPTIMIZED)) {
        PyErr_Format(PyExc_TypeError,
                     "frame callback for %R returned a replacement code %R with co_argcount=%d, "
                     "co_kwonlyargcount=%d, co_flags=0x%x; it must be an optimized plain function "
                     "taking exactly %d positional arguments (no *args/**kwargs/keyword-only, not a "
                     "generator or coroutine)",
                     orig, new, new->co_argcount, new->co_kwonlyargcount, new->co_flags, nargs);
        return -1;
    }
    if (new->co_nfreevars != orig->co_nfreevars) {
        goto bad_free;
    }
    for (int i = 0; i < orig->co_nfreevars; i++) {
        PyObject *a = PyTuple_GET_ITEM(orig->co_localsplusnames,
                                       orig->co_nlocalsplus - orig->co_nfreevars + i);
        PyObject *b = PyTuple_GET_ITEM(new->co_localsplusnames,
                                       new->co_nlocalsplus - new->co_nfreevars + i);
        if (a != b && PyUnicode_Compare(a, b) != 0) {
            goto bad_free;
        }
    }
    return 0;
bad_free:;
    PyObject *new_free = PyCode_GetFreevars(new), *orig_free = PyCode_GetFreevars(orig);
    if (new_free != NULL && orig_free != NULL) {
        PyErr_Format(PyExc_TypeError,
                     "frame callback for %R returned a replacement code %R whose free variables "
                     "%R differ from the original's %R (they must be the same names in the same "
                     "order)",
                     orig, new, new_free, orig_free);
    }
    Py_XDECREF(new_free);
    Py_XDECREF(orig_free);
    return -1;
}

/* Call-through: run `new_code` with the original globals, closure and argument
   values.  Returns the result, or NULL with the (user's) exception set.

   The function object the call needs is recycled: after a call, if nobody else
   holds it (refcount 1: no running frame, no kept frame object, no traceback), its
   closure is cleared and it is parked in `tls_carrier` for the next call with the
   same code and globals.  That saves PyFunction_New + dealloc (~45 ns) on the hot
   path and retains only a code object and a globals dict between calls, never user
   values.  A recursive call finds the carrier taken and makes a fresh function. */
static _Thread_local PyFunctionObject *tls_carrier = NULL; /* strong ref or NULL */

static PyObject *
run_replacement(_PyInterpreterFrame *frame, PyCodeObject *new_code, int nargs)
{
    PyFunctionObject *fn = tls_carrier;
    if (fn != NULL && fn->func_code == (PyObject *)new_code &&
        fn->func_globals == frame->f_globals && Py_REFCNT(fn) == 1) {
        tls_carrier = NULL; /* we own it now */
    }
    else {
        fn = (PyFunctionObject *)PyFunction_New((PyObject *)new_code, frame->f_globals);
        if (fn == NULL) {
            return NULL;
        }
    }
    /* Same cells as the original function: COPY_FREE_VARS of the new frame reads
       f_func->func_closure.  Set directly: fn is ours and its closure is NULL. */
    fn->func_closure = Py_XNewRef(FRAME_FUNC(frame)->func_closure);

    PyCodeObject *saved_pending = tls_pending;
    tls_pending = new_code; /* its frame is the next one the hook sees: let it through */
    /* The argument values are borrowed from the original frame, which stays alive
       until we return; _PyEval_Vector increfs them into the new frame. */
#if PY_VERSION_HEX >= 0x030E0000
    /* 3.14: the slots are tagged stack refs; the call wants plain pointers. */
    PyObject *small[8];
    PyObject **argv = nargs <= 8 ? small : PyMem_Malloc(sizeof(PyObject *) * (size_t)nargs);
    PyObject *result = NULL;
    if (argv == NULL) {
        PyErr_NoMemory();
    }
    else {
        for (int i = 0; i < nargs; i++) {
            argv[i] = FRAME_LOCAL(frame, i);
        }
        result = PyObject_Vectorcall((PyObject *)fn, argv, (size_t)nargs, NULL);
        if (argv != small) {
            PyMem_Free(argv);
        }
    }
#else
    PyObject *result = PyObject_Vectorcall((PyObject *)fn, frame->localsplus, (size_t)nargs, NULL);
#endif
    tls_pending = saved_pending;

    if (Py_REFCNT(fn) == 1) {
        Py_CLEAR(fn->func_closure); /* do not keep user values alive */
        PyFunctionObject *old = tls_carrier;
        tls_carrier = fn;
        Py_XDECREF(old);
    }
    else {
        Py_DECREF(fn); /* someone kept it (a frame object, a traceback): leave it be */
    }
    return result;
}

/* ------------------------------------------------------------------------ */
/* The evaluator.                                                            */

static inline void
set_code_flags(PyCodeObject *co, uintptr_t flags)
{
    if (CODE_SET_EXTRA((PyObject *)co, extra_index, (void *)flags) < 0) {
        PyErr_Clear(); /* cannot happen for a real code object and a valid index */
    }
}

/* A frame of a given-up code, with no tensor argument: run as Python, unhooked (see
   UNHOOKED_FLAG) or watched. */
static PyObject *
run_given_up(PyThreadState *tstate, _PyInterpreterFrame *frame, int throwflag, PyCodeObject *co,
             uintptr_t flags, PyObject *cb)
{
    if (!(flags & UNHOOKABLE_FLAG) || (flags & NEVER_UNHOOKED_FLAG)) {
        return call_default(tstate, frame, throwflag);
    }
    if (flags & UNHOOKED_FLAG) {
        if ((flags >> RUNS_SHIFT) + 1 < RECHECK_EVERY) {
            set_code_flags(co, flags + RUNS_ONE);
            int off = park();
            PyObject *result = call_default(tstate, frame, throwflag);
            unpark(cb, off);
            return result;
        }
        set_code_flags(co, flags & ~(RUNS_ONE * (RECHECK_EVERY - 1))); /* this run is watched */
    }
    int outer = tls_reached;
    tls_reached = 0;
    PyObject *result = call_default(tstate, frame, throwflag);
    int reached = tls_reached;
    tls_reached = outer | reached;
    uintptr_t now = code_flags(co); /* (lifted, reset or skipped meanwhile: no verdict) */
    if ((now & KIND_MASK) == GIVEN_UP_FLAG && !(now & NEVER_UNHOOKED_FLAG)) {
        if (!reached) {
            set_code_flags(co, now | UNHOOKED_FLAG);
        }
        else if (now & UNHOOKED_FLAG) {
            set_code_flags(co, (now & KIND_MASK) | NEVER_UNHOOKED_FLAG);
        }
    }
    return result;
}

static PyObject *
eval_frame_hook(PyThreadState *tstate, _PyInterpreterFrame *frame, int throwflag)
{
    PyObject *cb = tls_callback;
    PyCodeObject *co = FRAME_CODE(frame);
    n_frames_seen++;

    /* Filters, cheapest first; each runs the frame normally. */
    if (cb == NULL) {
        return call_default(tstate, frame, throwflag); /* 1. off on this thread */
    }
    if (co == tls_pending) { /* the replacement frame we are starting right now */
        tls_pending = NULL;
        return call_default(tstate, frame, throwflag);
    }
    /* 1b. The thread is "tracing": the frame is started by a sys.settrace/setprofile or
       sys.monitoring callback, or by a Python audit hook (sys.addaudithook), which
       CPython runs with tracing disabled at arbitrary points (function.__new__,
       function.__defaults__ reads, open, import...).  That code is not the program's. */
    if (tstate->tracing > 0) {
        return call_default(tstate, frame, throwflag);
    }
    if (throwflag || EXC_PENDING(tstate) ||                           /* 2, 3 */
        frame->owner == FRAME_OWNED_BY_GENERATOR ||                    /* 4 */
        (co->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) ||
        !(co->co_flags & CO_OPTIMIZED) || frame->f_locals != NULL ||   /* 5 */
        FRAME_FUNC(frame) == NULL || !PyFunction_Check(FRAME_FUNC(frame)) ||
        !FRAME_IS_FRESH(frame) /* 6 */) {
        return call_default(tstate, frame, throwflag);
    }
    uintptr_t flags = code_flags(co); /* 7 */
    if (flags) {
        if (flags & SKIP_RECURSIVE_FLAG) { /* nothing this frame calls is seen */
            int off = park();
            PyObject *result = call_default(tstate, frame, throwflag);
            unpark(cb, off);
            return result;
        }
        if (flags & SKIP_FLAG) {
            return call_default(tstate, frame, throwflag);
        }
        if ((PyObject *)Py_TYPE(cb) == rule_type) {
            if ((flags & KIND_MASK) != GIVEN_UP_FLAG) {
                return call_default(tstate, frame, throwflag);
            }
            if (!has_tensor_arg(frame, co)) {
                return run_given_up(tstate, frame, throwflag, co, flags, cb);
            }
            set_code_flags(co, 0); /* lifted */
        }
    }

    /* 8. Call the callback with interception off on this thread. */
    tls_reached = 1;
    int nargs = n_arg_slots(co);
    FrameView *view = make_view(frame, nargs);
    if (view == NULL) {
        if (PyErr_Occurred()) {
            release_frame(tstate, frame);
            return NULL; /* MemoryError: nothing sensible to run */
        }
        return call_default(tstate, frame, throwflag);
    }
    tls_callback = NULL;
    int outer_in_callback = tls_in_callback;
    tls_in_callback = 1; /* (call_unhooked may uninstall the evaluator for a trace) */
    PyObject *ret = PyObject_CallOneArg(cb, (PyObject *)view);
    tls_in_callback = outer_in_callback;
    release_view(view);
    if (ret != NULL && ret != Py_None) {
        if (!PyCode_Check(ret)) {
            PyErr_Format(PyExc_TypeError,
                         "frame callback must return None or a code object, not %.200s (for %R)",
                         Py_TYPE(ret)->tp_name, co);
            Py_CLEAR(ret);
        }
        else if (check_replacement((PyCodeObject *)ret, co, nargs) < 0) {
            Py_CLEAR(ret);
        }
    }
    if (ret == NULL && report_error(co) < 0) { /* still with interception off */
        tls_restore(cb);
        release_frame(tstate, frame);
        return NULL;
    }
    tls_restore(cb);

    if (ret == NULL || ret == Py_None) {
        Py_XDECREF(ret);
        return call_default(tstate, frame, throwflag);
    }
    PyObject *result = run_replacement(frame, (PyCodeObject *)ret, nargs);
    Py_DECREF(ret);
    release_frame(tstate, frame); /* (after the call: its arguments were borrowed from it) */
    return result;
}

/* Installed while some thread has a callback.  Uninstalling is safe: frames
   already inside our evaluator just finish, later calls use whatever is installed.
   We only restore the previous evaluator if ours is still on top; if another PEP 523
   user stacked on top of us (and chains to us), we stay in the chain, forwarding
   every frame, and are not re-installed on top of it later (that could loop). */
static void
install_hook(void)
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    _PyFrameEvalFunction cur = _PyInterpreterState_GetEvalFrameFunc(interp);
    /* Still in the chain, unless the default evaluator is back (someone above us
       tore down by installing the default instead of their predecessor). */
    if (hook_in_chain && cur != _PyEval_EvalFrameDefault) {
        return;
    }
    prev_eval = (cur == _PyEval_EvalFrameDefault) ? NULL : cur;
    _PyInterpreterState_SetEvalFrameFunc(interp, eval_frame_hook);
#if PY_VERSION_HEX >= 0x030F0000
    /* 3.15 stops specialising *all* bytecode while a custom evaluator is installed, unless
       told otherwise (CPython gh-146031): we only ever hand frames to the default evaluator,
       which still de-optimises Python-to-Python calls while a hook is set (so every call
       still reaches us), so the specialised attribute loads, binary ops... are safe to keep.
       Without this, code under capture() ran without any specialisation. */
    _PyInterpreterState_SetEvalFrameAllowSpecialization(interp, 1);
#endif
    hook_in_chain = 1;
}

static void
maybe_uninstall_hook(void)
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    if (!hook_in_chain || _PyInterpreterState_GetEvalFrameFunc(interp) != eval_frame_hook) {
        return;
    }
    _PyInterpreterState_SetEvalFrameFunc(interp, prev_eval ? prev_eval : _PyEval_EvalFrameDefault);
#if PY_VERSION_HEX >= 0x030F0000
    if (prev_eval == NULL) { /* back to the default evaluator: the interpreter's initial state */
        _PyInterpreterState_SetEvalFrameAllowSpecialization(interp, 0);
    }
#endif
    prev_eval = NULL;
    hook_in_chain = 0;
}

/* ------------------------------------------------------------------------ */
/* untraced(fn): fn called with this thread's callback off.                  */

/* The compiled graph of a cache entry is called through one of these: whatever Python code
   runs inside it (leaf modules' forward, torch's functional wrappers, a backend's runtime)
   is the graph's business, never a frame to trace, and costs no callback call per frame. */
/* on_error (optional): when fn raises an Exception, on_error(exc) is returned instead (the
   tracer's graphs: a graph that raises makes its frame run again as Python, tracer/rerun.py).
   Checked only on the error path: the call costs nothing more when fn returns. */
typedef struct {
    PyObject_HEAD
    PyObject *fn;
    vectorcallfunc vectorcall;
    PyObject *on_error;
} Untraced;

static PyObject *
untraced_failed(Untraced *u)
{
    if (u->on_error == NULL || !PyErr_ExceptionMatches(PyExc_Exception)) {
        return NULL;
    }
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
#else
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    if (tb != NULL && exc != NULL) {
        PyException_SetTraceback(exc, tb);
    }
    Py_XDECREF(type);
    Py_XDECREF(tb);
#endif
    PyObject *result = PyObject_CallOneArg(u->on_error, exc);
    Py_XDECREF(exc);
    return result;
}

static PyObject *
untraced_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Untraced *u = (Untraced *)self;
    PyObject *cb = tls_callback;
    PyObject *result;
    if (cb == NULL) {
        result = PyObject_Vectorcall(u->fn, args, nargsf, kwnames);
        return result != NULL ? result : untraced_failed(u);
    }
    int off = park(); /* same bracket as a SKIP_RECURSIVE frame (on_error included) */
    result = PyObject_Vectorcall(u->fn, args, nargsf, kwnames);
    if (result == NULL) {
        result = untraced_failed(u);
    }
    unpark(cb, off);
    return result;
}

static PyObject *
untraced_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *fn, *on_error = Py_None;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "untraced() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O|O:untraced", &fn, &on_error)) {
        return NULL;
    }
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "untraced() expects a callable, not %.200s", Py_TYPE(fn)->tp_name);
        return NULL;
    }
    Untraced *u = PyObject_GC_New(Untraced, type);
    if (u == NULL) {
        return NULL;
    }
    u->fn = Py_NewRef(fn);
    u->on_error = on_error == Py_None ? NULL : Py_NewRef(on_error);
    u->vectorcall = untraced_vectorcall;
    PyObject_GC_Track(u);
    return (PyObject *)u;
}

static int
untraced_traverse(Untraced *u, visitproc visit, void *arg)
{
    Py_VISIT(u->fn);
    Py_VISIT(u->on_error);
    return 0;
}

static int
untraced_clear(Untraced *u)
{
    Py_CLEAR(u->fn);
    Py_CLEAR(u->on_error);
    return 0;
}

static void
untraced_dealloc(Untraced *u)
{
    PyObject_GC_UnTrack(u);
    untraced_clear(u);
    PyObject_GC_Del(u);
}

static PyObject *
untraced_repr(Untraced *u)
{
    return PyUnicode_FromFormat("untraced(%R)", u->fn);
}

static PyMemberDef untraced_members[] = {
    {"__wrapped__", T_OBJECT, offsetof(Untraced, fn), READONLY, "the callable called"},
    {NULL}};

static PyTypeObject Untraced_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracer.runtime._eval_frame.untraced",
    .tp_basicsize = sizeof(Untraced),
    .tp_dealloc = (destructor)untraced_dealloc,
    .tp_vectorcall_offset = offsetof(Untraced, vectorcall),
    .tp_repr = (reprfunc)untraced_repr,
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "untraced(fn): calls fn with this thread's frame callback off (nothing it runs "
              "is handed to the callback).",
    .tp_traverse = (traverseproc)untraced_traverse,
    .tp_clear = (inquiry)untraced_clear,
    .tp_members = untraced_members,
    .tp_new = untraced_new,
};

/* ------------------------------------------------------------------------ */
/* Module functions.                                                         */

static PyObject *
set_eval_frame(PyObject *Py_UNUSED(m), PyObject *cb)
{
    if (cb != Py_None && !PyCallable_Check(cb)) {
        PyErr_Format(PyExc_TypeError, "set_eval_frame expects a callable or None, not %.200s",
                     Py_TYPE(cb)->tp_name);
        return NULL;
    }
    PyObject *new = (cb == Py_None) ? NULL : Py_NewRef(cb);
    PyObject *old = tls_callback;
    tls_callback = new;
    if (old == NULL && new != NULL) {
        if (n_active++ == 0) {
            install_hook();
        }
    }
    else if (old != NULL && new == NULL) {
        if (--n_active == 0) {
            maybe_uninstall_hook();
        }
    }
    return old != NULL ? old : Py_NewRef(Py_None); /* our reference moves to the caller */
}

static PyObject *
get_eval_frame(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    return Py_NewRef(tls_callback != NULL ? tls_callback : Py_None);
}

/* The module functions that take a code object: a TypeError naming what came instead. */
static int
check_code(PyObject *code)
{
    if (!PyCode_Check(code)) {
        PyErr_Format(PyExc_TypeError, "expected a code object, not %.200s", Py_TYPE(code)->tp_name);
        return -1;
    }
    return 0;
}

static int
set_flags(PyObject *code, uintptr_t flags)
{
    if (check_code(code) < 0) {
        return -1;
    }
    return CODE_SET_EXTRA(code, extra_index, (void *)flags);
}

static PyObject *
skip_code(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"code", "recursive", NULL};
    PyObject *code;
    int recursive = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|p:skip_code", kwlist, &code, &recursive)) {
        return NULL;
    }
    if (set_flags(code, recursive ? (SKIP_FLAG | SKIP_RECURSIVE_FLAG) : SKIP_FLAG) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
rule_skip(PyObject *Py_UNUSED(m), PyObject *code)
{
    if (check_code(code) < 0) {
        return NULL;
    }
    if (set_flags(code, code_flags((PyCodeObject *)code) | RULE_SKIP_FLAG) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
is_rule_skipped(PyObject *Py_UNUSED(m), PyObject *code)
{
    if (check_code(code) < 0) {
        return NULL;
    }
    return PyBool_FromLong((code_flags((PyCodeObject *)code) & RULE_SKIP_FLAG) != 0);
}

static PyObject *
give_up(PyObject *Py_UNUSED(m), PyObject *code)
{
    if (check_code(code) < 0) {
        return NULL;
    }
    uintptr_t flags = code_flags((PyCodeObject *)code);
    if (flags == 0 && set_flags(code, GIVEN_UP_FLAG) < 0) { /* (a skipped code stays skipped) */
        return NULL;
    }
    Py_RETURN_NONE;
}

/* call_unhooked(fn, *args): fn(*args) with the evaluator uninstalled when this thread is
   inside its callback and holds the only callback (a trace: the tracer's own Python runs with
   its calls inlined); elsewhere a plain call.  Not in the hit path: only a trace uses it. */
static PyObject *
call_unhooked(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "call_unhooked(fn, *args) needs fn");
        return NULL;
    }
    if (!tls_in_callback || tls_callback != NULL) {
        return PyObject_Vectorcall(args[0], args + 1, (size_t)(nargs - 1), NULL);
    }
    int off = park(); /* (tls_callback is NULL: the hook holds it, and n_active counts it) */
    int outer_in_callback = tls_in_callback;
    tls_in_callback = 0;
    PyObject *result = PyObject_Vectorcall(args[0], args + 1, (size_t)(nargs - 1), NULL);
    tls_in_callback = outer_in_callback;
    unpark(NULL, off);
    return result;
}

static PyObject *
allow_unhooked(PyObject *Py_UNUSED(m), PyObject *code)
{
    if (check_code(code) < 0) {
        return NULL;
    }
    uintptr_t flags = code_flags((PyCodeObject *)code);
    if ((flags & KIND_MASK) == GIVEN_UP_FLAG && set_flags(code, flags | UNHOOKABLE_FLAG) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
is_unhooked(PyObject *Py_UNUSED(m), PyObject *code)
{
    if (check_code(code) < 0) {
        return NULL;
    }
    uintptr_t flags = code_flags((PyCodeObject *)code);
    return PyBool_FromLong((flags & KIND_MASK) == GIVEN_UP_FLAG && (flags & UNHOOKED_FLAG) &&
                           !(flags & NEVER_UNHOOKED_FLAG));
}

static PyObject *
is_given_up(PyObject *Py_UNUSED(m), PyObject *code)
{
    if (check_code(code) < 0) {
        return NULL;
    }
    return PyBool_FromLong((code_flags((PyCodeObject *)code) & KIND_MASK) == GIVEN_UP_FLAG);
}

static PyObject *
lift_give_up(PyObject *Py_UNUSED(m), PyObject *code)
{
    if (check_code(code) < 0) {
        return NULL;
    }
    if ((code_flags((PyCodeObject *)code) & KIND_MASK) == GIVEN_UP_FLAG && set_flags(code, 0) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
set_tensor_type(PyObject *Py_UNUSED(m), PyObject *type)
{
    if (type != Py_None && !PyType_Check(type)) {
        PyErr_Format(PyExc_TypeError, "set_tensor_type expects a type or None, not %.200s",
                     Py_TYPE(type)->tp_name);
        return NULL;
    }
    PyTypeObject *old = tensor_type;
    tensor_type = (type == Py_None) ? NULL : (PyTypeObject *)Py_NewRef(type);
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

static PyObject *
set_rule_type(PyObject *Py_UNUSED(m), PyObject *type)
{
    if (type != Py_None && !PyType_Check(type)) {
        PyErr_Format(PyExc_TypeError, "set_rule_type expects a type or None, not %.200s",
                     Py_TYPE(type)->tp_name);
        return NULL;
    }
    PyObject *old = rule_type;
    rule_type = (type == Py_None) ? NULL : Py_NewRef(type);
    return old != NULL ? old : Py_NewRef(Py_None);
}

static PyObject *
unskip_code(PyObject *Py_UNUSED(m), PyObject *code)
{
    if (set_flags(code, 0) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
is_skipped(PyObject *Py_UNUSED(m), PyObject *code)
{
    if (check_code(code) < 0) {
        return NULL;
    }
    return PyBool_FromLong((code_flags((PyCodeObject *)code) & (SKIP_FLAG | SKIP_RECURSIVE_FLAG)) != 0);
}

static PyObject *
set_error_handler(PyObject *Py_UNUSED(m), PyObject *fn)
{
    if (fn != Py_None && !PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "set_error_handler expects a callable or None, not %.200s",
                     Py_TYPE(fn)->tp_name);
        return NULL;
    }
    PyObject *old = error_handler;
    error_handler = (fn == Py_None) ? NULL : Py_NewRef(fn);
    return old != NULL ? old : Py_NewRef(Py_None);
}

static PyObject *
clear_thread_caches(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    PyFunctionObject *fn = tls_carrier;
    FrameView *v = tls_spare_view;
    tls_carrier = NULL;
    tls_spare_view = NULL;
    Py_XDECREF(fn);
    Py_XDECREF(v);
    Py_RETURN_NONE;
}

static PyObject *
frames_seen(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromUnsignedLongLong(n_frames_seen);
}

static PyObject *
hook_installed(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(_PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get()) ==
                           eval_frame_hook);
}

static PyObject *
active_count(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromSsize_t(n_active);
}

static PyMethodDef methods[] = {
    {"set_eval_frame", set_eval_frame, METH_O,
     "set_eval_frame(callback_or_None) -> previous: set this thread's frame callback."},
    {"get_eval_frame", get_eval_frame, METH_NOARGS, "This thread's frame callback, or None."},
    {"skip_code", (PyCFunction)(void (*)(void))skip_code, METH_VARARGS | METH_KEYWORDS,
     "skip_code(code, recursive=False): never hand frames of `code` to the callback; "
     "recursive=True also hides everything it calls while it runs."},
    {"unskip_code", unskip_code, METH_O, "unskip_code(code): undo skip_code."},
    {"is_skipped", is_skipped, METH_O, "is_skipped(code) -> bool (skip_code's marks only)"},
    {"rule_skip", rule_skip, METH_O,
     "rule_skip(code): callbacks whose type is the rule type (set_rule_type) are not called "
     "for frames of `code` (a skip decision of their rule, cached); others still are."},
    {"is_rule_skipped", is_rule_skipped, METH_O, "is_rule_skipped(code) -> bool"},
    {"give_up", give_up, METH_O,
     "give_up(code): like rule_skip, except that a frame with a tensor argument lifts the mark "
     "and reaches the callback (no effect on a code already marked)"},
    {"is_given_up", is_given_up, METH_O, "is_given_up(code) -> bool"},
    {"call_unhooked", (PyCFunction)(void (*)(void))call_unhooked, METH_FASTCALL,
     "call_unhooked(fn, *args): fn(*args), with the evaluator uninstalled when called from this "
     "thread's frame callback and no other thread has one (a trace)"},
    {"allow_unhooked", allow_unhooked, METH_O,
     "allow_unhooked(code): a given-up code whose watched run reaches no traced frame runs "
     "with the evaluator uninstalled from then on (one run in 64 watched again)"},
    {"is_unhooked", is_unhooked, METH_O, "is_unhooked(code) -> bool: runs with the evaluator uninstalled"},
    {"lift_give_up", lift_give_up, METH_O, "lift_give_up(code): undo give_up (nothing else)"},
    {"set_tensor_type", set_tensor_type, METH_O,
     "set_tensor_type(type_or_None): the type whose instances, as arguments, lift give_up"},
    {"set_rule_type", set_rule_type, METH_O,
     "set_rule_type(type_or_None) -> previous: the callback type that honours rule_skip marks."},
    {"set_error_handler", set_error_handler, METH_O,
     "set_error_handler(fn_or_None) -> previous. fn(exc, code) is called when the callback "
     "raises an Exception or returns something unusable; the frame then runs normally. "
     "If fn raises, that exception propagates from the intercepted call. Without a handler "
     "the error is printed as an unraisable exception."},
    {"clear_thread_caches", clear_thread_caches, METH_NOARGS,
     "Drop this thread's recycled function object (it keeps the last replacement code and "
     "its globals alive) and spare frame view. Call after dropping compiled code."},
    {"_hook_installed", hook_installed, METH_NOARGS, "Is our evaluator the installed one?"},
    {"_frames_seen", frames_seen, METH_NOARGS, "How many frames our evaluator was handed so far"},
    {"_active_count", active_count, METH_NOARGS, "Number of thread callbacks alive."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "tracer.runtime._eval_frame",
    "PEP 523 frame hook for frametracer (CPython 3.11-3.13). See tracer/frame_hook.py.", -1, methods};

PyMODINIT_FUNC
PyInit__eval_frame(void)
{
    static int initialized = 0; /* static state: one interpreter, one load */
    if (initialized) {
        PyErr_SetString(PyExc_ImportError,
                        "tracer.runtime._eval_frame cannot be initialized twice (sub-interpreters are not "
                        "supported)");
        return NULL;
    }
    if (PyType_Ready(&FrameView_Type) < 0 || PyType_Ready(&Untraced_Type) < 0) {
        return NULL;
    }
    extra_index = REQUEST_CODE_EXTRA_INDEX(NULL); /* flags only: nothing to free */
    if (extra_index < 0) {
        PyErr_SetString(PyExc_RuntimeError, "tracer.runtime._eval_frame: no free code-extra slot");
        return NULL;
    }
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "FrameView", (PyObject *)&FrameView_Type) < 0 ||
        PyModule_AddObjectRef(m, "untraced", (PyObject *)&Untraced_Type) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    initialized = 1;
    return m;
}
