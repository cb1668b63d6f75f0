/* CPython 3.12+: a snapshot's dicts are known unchanged because a dict watcher
 * (PyDict_AddWatcher) would have said otherwise.  One watcher for the process; every live
 * Program is on a list, and an event on a dict marks stale each snapshot whose (sorted)
 * list of watched dicts holds it.  Events are rare (module trees seldom change), so the
 * callback's walk over the programs costs nothing on the hot path.  See _fastcheck.h for why
 * 3.11 compares dict version tags instead. */
#include "_fastcheck.h"

#if FC_WATCHERS
static int fc_watcher_id = -1;
static Program *programs = NULL;

static int in_watched(Program *p, void *d)
{
    if (p->capturing) {
        for (Py_ssize_t k = 0; k < p->n_watched; k++)
            if (p->watched[k] == d)
                return 1;
        return 0;
    }
    Py_ssize_t lo = 0, hi = p->n_watched;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if ((uintptr_t)p->watched[mid] < (uintptr_t)d)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < p->n_watched && p->watched[lo] == d;
}

static int dict_event(PyDict_WatchEvent event, PyObject *dict, PyObject *key, PyObject *value)
{
    /* any event (added, modified, deleted, cloned, cleared, deallocated) on a dict a
     * snapshot relies on makes that snapshot stale; runs no Python code */
    for (Program *p = programs; p != NULL; p = p->next) {
        if (!p->dirty && p->n_watched && in_watched(p, dict)) {
            p->dirty = 1;
            p->state = SNAP_NONE;
        }
    }
    return 0;
}

int fc_watcher_init(void)
{
    fc_watcher_id = PyDict_AddWatcher(dict_event);
    return fc_watcher_id < 0 ? -1 : 0;
}

void fc_link(Program *p)
{
    p->prev = NULL;
    p->next = programs;
    if (programs)
        programs->prev = p;
    programs = p;
}

void fc_unlink(Program *p)
{
    if (p->prev)
        p->prev->next = p->next;
    else if (programs == p)
        programs = p->next;
    if (p->next)
        p->next->prev = p->prev;
    p->prev = p->next = NULL;
}

int fc_watch(Program *p, PyObject *d)
{
    if (PyDict_Watch(fc_watcher_id, d) < 0)
        return -1;
    if (p->n_watched == p->cap_watched) {
        Py_ssize_t cap = p->cap_watched ? 2 * p->cap_watched : 64;
        void **w = PyMem_Realloc(p->watched, cap * sizeof(void *));
        if (w == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        p->watched = w;
        p->cap_watched = cap;
    }
    p->watched[p->n_watched++] = d;
    return 0;
}

#endif
