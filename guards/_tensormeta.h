/* C interface of guards/_tensormeta.cpp (a PyCapsule), used by guards/_fastcheck.c.
 *
 * A TMeta records everything torch's TensorGuards compares for one tensor (exact Python
 * type, dispatch key set with the thread's local include/exclude sets, dtype, device,
 * requires_grad, sizes, strides), taken right after TensorGuards passed on it.  A later
 * tensor that matches the record field for field under the same thread-local dispatch
 * state would pass TensorGuards too; anything else goes back to TensorGuards.
 */
#ifndef TENSORMETA_H
#define TENSORMETA_H
#include <stdint.h>

#define TM_MAXDIM 8
#define TMETA_CAPSULE "guards._tensormeta._C_API"
#define TMETA_API_VERSION 5
#define TM_STATE_WORDS 4

typedef struct {
    /* what match_fields reads, first and together: a tensor of up to two dimensions is
     * compared within one cache line of its record (a model's check reads ~150 of them) */
    void *type;
    uint64_t keys;
    int32_t ndim;
    int16_t dtype;
    int16_t device_index;
    int8_t device_type;
    int8_t requires_grad;
    int64_t ss[2 * TM_MAXDIM];  /* size 0, stride 0, size 1, stride 1, ... */
    uint64_t tls_included, tls_excluded;  /* the thread's dispatch state when recorded */
} TMeta;

typedef struct {
    int version;
    int (*record)(PyObject *tensor, TMeta *out);     /* 1 recorded, 0 not recordable */
    int (*match)(PyObject *tensor, const TMeta *m);  /* 1 same metadata and TLS, else 0 */
    /* the same in two parts, for a batch recorded under one TLS: read the thread's local
     * dispatch include/exclude sets once, then compare each tensor's own fields */
    void (*tls)(uint64_t *included, uint64_t *excluded);
    int (*match_fields)(PyObject *tensor, const TMeta *m);
    /* match_fields for n tensors at once: 1 if all match */
    int (*match_fields_n)(PyObject *const *tensors, const TMeta *ms, Py_ssize_t n);
    /* the thread's torch global state that GlobalStateMatch's calls read, as words: two equal
     * readings mean each call (torch.is_grad_enabled(), get_default_dtype(), ...) answers the
     * same (dispatch-key TLS, which holds autocast and inference mode; grad mode; inference
     * mode; deterministic algorithms and warn-only; torch-function disabled state and mode
     * stack depth; default dtype; not functorch's layer stack: its header needs a library torch
     * does not ship) */
    void (*global_state)(uint64_t out[TM_STATE_WORDS]);
} TMetaAPI;

#endif
