// guards._tensormeta: a tensor's metadata as TensorGuards sees it, recorded and compared in a
// few loads (see _tensormeta.h).  Why: TensorGuards costs about 70 ns per tensor (it builds
// its thread-local state and compares optional SymInts), and a model's guard set checks
// every parameter on every call.  Only public ATen/c10 accessors and inline code are used
// (no torch guard classes); the module is built against one torch and refuses another
// (guards/fastpath.py compares TORCH_VERSION with the running torch).  Its module name carries
// that torch's version (TM_MODULE, set by setup.py: _tensormeta_2_15_0_cu132), so environments
// with different torches can share one source tree, each finding its own build.
// Checked against the headers of torch 2.13.0, 2.14.1 and 2.15.0 (C++20).
#include <Python.h>

#include <ATen/Context.h>
#include <ATen/PythonTorchFunctionTLS.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/python_variable.h>

extern "C" {
#include "_tensormeta.h"
}

#ifndef TM_TORCH_VERSION
#define TM_TORCH_VERSION "unknown"
#endif
#ifndef TM_MODULE
#define TM_MODULE _tensormeta
#endif
#define TM_STR2(x) #x
#define TM_STR(x) TM_STR2(x)
#define TM_CAT2(a, b) a##b
#define TM_CAT(a, b) TM_CAT2(a, b)

namespace {

const c10::DispatchKeySet kPythonKeys({c10::DispatchKey::Python,
                                       c10::DispatchKey::PythonTLSSnapshot,
                                       c10::DispatchKey::PythonDispatcher});

int tm_record(PyObject* obj, TMeta* m) {
  try {
    const at::Tensor& t = THPVariable_Unpack(obj);
    c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    if (impl->has_symbolic_sizes_strides()) return 0;
    auto tls = c10::impl::tls_local_dispatch_key_set();
    c10::DispatchKeySet ks = impl->key_set();
    // TensorGuards may mask the Python keys depending on a mode we cannot see: not recorded
    if (!((ks | tls.included_) & kPythonKeys).empty()) return 0;
    auto sizes = impl->sizes();
    auto strides = impl->strides();
    if (sizes.size() > TM_MAXDIM || strides.size() != sizes.size()) return 0;
    m->type = Py_TYPE(obj);
    m->keys = ks.raw_repr();
    m->tls_included = tls.included_.raw_repr();
    m->tls_excluded = tls.excluded_.raw_repr();
    m->dtype = static_cast<int16_t>(impl->dtype().toScalarType());
    c10::Device dev = impl->device();
    m->device_type = static_cast<int8_t>(dev.type());
    m->device_index = dev.index();
    m->requires_grad = impl->requires_grad();
    m->ndim = static_cast<int32_t>(sizes.size());
    for (size_t i = 0; i < sizes.size(); i++) {
      m->ss[2 * i] = sizes[i];
      m->ss[2 * i + 1] = strides[i];
    }
    return 1;
  } catch (...) {
    return 0;
  }
}

void tm_tls(uint64_t* included, uint64_t* excluded) {
  auto tls = c10::impl::tls_local_dispatch_key_set();
  *included = tls.included_.raw_repr();
  *excluded = tls.excluded_.raw_repr();
}

// The fast path of a model's check: ~150 parameters per call, so every instruction counts
// (callgrind: 95 per tensor before this was inlined into the batch loop and the size/stride
// loop unrolled for the common one- and two-dimensional case).
inline __attribute__((always_inline)) bool fields_match(PyObject* obj, const TMeta* m) {
  if (static_cast<void*>(Py_TYPE(obj)) != m->type) return false;  // a tensor of that exact type
  c10::TensorImpl* impl = THPVariable_Unpack(obj).unsafeGetTensorImpl();
  if (impl->key_set().raw_repr() != m->keys || impl->has_symbolic_sizes_strides()) return false;
  c10::IntArrayRef sizes = impl->sizes();
  if (static_cast<int32_t>(sizes.size()) != m->ndim) return false;
  const int64_t* sz = sizes.data();
  const int64_t* st = impl->strides().data();
  const int64_t* ss = m->ss;
  uint64_t diff = 0;
  switch (m->ndim) {
    case 0:
      break;
    case 1:
      diff = (sz[0] ^ ss[0]) | (st[0] ^ ss[1]);
      break;
    case 2:
      diff = (sz[0] ^ ss[0]) | (st[0] ^ ss[1]) | (sz[1] ^ ss[2]) | (st[1] ^ ss[3]);
      break;
    default:
      for (int32_t i = 0; i < m->ndim; i++) diff |= (sz[i] ^ ss[2 * i]) | (st[i] ^ ss[2 * i + 1]);
  }
  if (diff) return false;
  if (static_cast<int16_t>(impl->dtype().toScalarType()) != m->dtype) return false;
  c10::Device dev = impl->device();
  if (static_cast<int8_t>(dev.type()) != m->device_type || dev.index() != m->device_index)
    return false;
  // last: two out-of-line calls (TensorImpl, then its autograd meta's virtual)
  return impl->requires_grad() == static_cast<bool>(m->requires_grad);
}

int tm_match_fields(PyObject* obj, const TMeta* m) {
  try {
    return fields_match(obj, m);
  } catch (...) {
    return 0;
  }
}

int tm_match_fields_n(PyObject* const* objs, const TMeta* ms, Py_ssize_t n) {
  try {
    for (Py_ssize_t i = 0; i < n; i++) {
      if (!fields_match(objs[i], &ms[i])) return 0;
    }
    return 1;
  } catch (...) {
    return 0;
  }
}

int tm_match(PyObject* obj, const TMeta* m) {
  uint64_t inc, exc;
  tm_tls(&inc, &exc);
  return inc == m->tls_included && exc == m->tls_excluded && tm_match_fields(obj, m);
}

void tm_global_state(uint64_t out[TM_STATE_WORDS]) {
  auto tls = c10::impl::tls_local_dispatch_key_set();  // autocast: its keys' exclusion
  out[0] = tls.included_.raw_repr();
  out[1] = tls.excluded_.raw_repr();
  auto& ctx = at::globalContext();
  uint64_t f = static_cast<uint64_t>(c10::GradMode::is_enabled());
  f |= static_cast<uint64_t>(c10::InferenceMode::is_enabled()) << 1;
  f |= static_cast<uint64_t>(ctx.deterministicAlgorithms()) << 2;
  f |= static_cast<uint64_t>(ctx.deterministicAlgorithmsWarnOnly()) << 3;
  f |= static_cast<uint64_t>(at::impl::PythonTorchFunctionTLS::get_disabled_state()) << 4;
  f |= static_cast<uint64_t>(c10::get_default_dtype_as_scalartype()) << 8;
  out[2] = f;
  out[3] = static_cast<uint64_t>(at::impl::PythonTorchFunctionTLS::stack_len());
}

TMetaAPI api = {TMETA_API_VERSION, tm_record, tm_match, tm_tls, tm_match_fields,
               tm_match_fields_n, tm_global_state};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, TM_STR(TM_MODULE),
                          "Tensor metadata records for the C guard check (see _tensormeta.h).",
                          -1, nullptr};

}  // namespace

PyMODINIT_FUNC TM_CAT(PyInit_, TM_MODULE)(void) {
  PyObject* m = PyModule_Create(&module_def);
  if (m == nullptr) return nullptr;
  PyObject* cap = PyCapsule_New(&api, TMETA_CAPSULE, nullptr);
  if (cap == nullptr || PyModule_AddObject(m, "_C_API", cap) < 0 ||
      PyModule_AddStringConstant(m, "TORCH_VERSION", TM_TORCH_VERSION) < 0) {
    Py_XDECREF(cap);
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
