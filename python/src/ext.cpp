// tilepipe._C: the nanobind module behind tilepipe's Python API.
//
// Every function takes the framework's tensors as they are (outputs already allocated by
// the framework, so its allocator and CUDA-graph pools own them) and the stream to launch
// on. Tensors are read without DLPack for PyTorch (five attribute reads in C: a
// torch.Tensor.__dlpack__() call costs microseconds and, on a CUDA tensor, records an
// event on another stream, which breaks a graph capture), and through DLPack or the buffer
// protocol for everything else (NumPy, CuPy, ...). Errors become ValueError (an argument is
// wrong; the message names it), TypeError (its element type or rank), NotImplementedError
// (a case tilepipe does not cover) or RuntimeError (a CUDA failure).
#include "ops.hpp"
#include "xla.hpp"

#include <tilepipe/core/error.cuh>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include <chrono>

#include <vector>

namespace nb = nanobind;
using namespace tilepipe::python;

namespace {

/// DLPack's C exchange table (dlpack.h 1.3, DLPackExchangeAPI), as far as the extension
/// uses it: the stable header, then the producer's function pointers in the standard's
/// order. PyTorch (2.10 and later) puts it on torch.Tensor as __dlpack_c_exchange_api__.
struct dlpack_exchange_api {
  struct {
    std::uint32_t major, minor;
  } version;
  void* prev_api;
  void* managed_tensor_allocator;
  void* managed_tensor_from_py_object_no_sync;
  void* managed_tensor_to_py_object_no_sync;
  int (*dltensor_from_py_object_no_sync)(void* py_object, nb::dlpack::dltensor* out);
  void* current_work_stream;
};

/// PyTorch's types, registered by tilepipe._torch at import (the extension never imports torch).
struct torch_registry {
  PyObject* tensor_type = nullptr;
  const dlpack_exchange_api* exchange = nullptr;  // null: torch < 2.10, read attributes instead
  PyObject *bf16 = nullptr, *f16 = nullptr, *f32 = nullptr, *i32 = nullptr, *u8 = nullptr;
  PyObject *s_data_ptr = nullptr, *s_shape = nullptr, *s_stride = nullptr, *s_dtype = nullptr, *s_get_device = nullptr;
} torch_types;

PyObject* interned(const char* s) { return PyUnicode_InternFromString(s); }

long long as_int(PyObject* o) {
  const long long v = PyLong_AsLongLong(o);
  if (v == -1 && PyErr_Occurred()) throw nb::python_error();
  return v;
}

/// Owns what a Python call returned.
struct ref {
  PyObject* p;
  explicit ref(PyObject* o) : p(o) {
    if (!p) throw nb::python_error();
  }
  ~ref() { Py_XDECREF(p); }
};

void fill_from_tuple(PyObject* tuple, std::int64_t* dst) {
  const Py_ssize_t n = PyTuple_GET_SIZE(tuple);
  for (Py_ssize_t i = 0; i < n && i < 4; ++i) dst[i] = as_int(PyTuple_GET_ITEM(tuple, i));
}

void set_rank(tensor_arg& t, Py_ssize_t rank) {
  if (rank > 4)
    throw argument_type_error(std::string(t.name) + " has " + std::to_string(rank) +
                              " dimensions; tilepipe's kernels take at most 4");
  t.rank = static_cast<int>(rank);
}

/// A torch.Tensor through DLPack's C exchange: a non-owning DLTensor filled in C, no stream
/// synchronisation, no Python call (about 0.1 us a tensor).
bool import_torch_exchange(PyObject* o, tensor_arg& t) {
  const auto* api = torch_types.exchange;
  if (!api || Py_TYPE(o) != reinterpret_cast<PyTypeObject*>(torch_types.tensor_type)) return false;  // subclasses: attributes
  nb::dlpack::dltensor d{};
  if (api->dltensor_from_py_object_no_sync(o, &d) != 0) throw nb::python_error();
  set_rank(t, d.ndim);
  t.data = static_cast<char*>(d.data) + d.byte_offset;
  for (int i = 0; i < t.rank; ++i) t.shape[i] = d.shape[i], t.stride[i] = d.strides[i];
  using code = nb::dlpack::dtype_code;
  const auto c = static_cast<code>(d.dtype.code);
  if (d.dtype.lanes == 1 && c == code::Bfloat && d.dtype.bits == 16) t.type = dtype::bf16, t.type_name = "torch.bfloat16";
  else if (d.dtype.lanes == 1 && c == code::Float && d.dtype.bits == 16) t.type = dtype::f16, t.type_name = "torch.float16";
  else if (d.dtype.lanes == 1 && c == code::Float && d.dtype.bits == 32) t.type = dtype::f32, t.type_name = "torch.float32";
  else if (d.dtype.lanes == 1 && c == code::Int && d.dtype.bits == 32) t.type = dtype::i32, t.type_name = "torch.int32";
  else if (d.dtype.lanes == 1 && c == code::UInt && d.dtype.bits == 8) t.type = dtype::u8, t.type_name = "torch.uint8";
  else return false;  // another dtype: the attribute path names it as PyTorch does
  t.on_gpu = d.device.device_type == nb::device::cuda::value;
  t.device = t.on_gpu ? d.device.device_id : 0;
  return true;
}

/// A torch.Tensor, read through its C-level methods.
void import_torch(PyObject* o, tensor_arg& t) {
  if (import_torch_exchange(o, t)) return;
  auto& r = torch_types;
  ref data(PyObject_CallMethodNoArgs(o, r.s_data_ptr));
  t.data = PyLong_AsVoidPtr(data.p);
  ref shape(PyObject_GetAttr(o, r.s_shape));
  ref stride(PyObject_CallMethodNoArgs(o, r.s_stride));
  if (!PyTuple_Check(shape.p) || !PyTuple_Check(stride.p)) throw argument_type_error(std::string(t.name) + ": unexpected shape");
  set_rank(t, PyTuple_GET_SIZE(shape.p));
  fill_from_tuple(shape.p, t.shape);
  fill_from_tuple(stride.p, t.stride);
  ref dt(PyObject_GetAttr(o, r.s_dtype));
  if (dt.p == r.bf16) t.type = dtype::bf16, t.type_name = "torch.bfloat16";
  else if (dt.p == r.f16) t.type = dtype::f16, t.type_name = "torch.float16";
  else if (dt.p == r.f32) t.type = dtype::f32, t.type_name = "torch.float32";
  else if (dt.p == r.i32) t.type = dtype::i32, t.type_name = "torch.int32";
  else if (dt.p == r.u8) t.type = dtype::u8, t.type_name = "torch.uint8";
  else {
    t.type = dtype::other;
    ref name(PyObject_Str(dt.p));
    t.type_name = PyUnicode_AsUTF8(name.p);
  }
  ref dev(PyObject_CallMethodNoArgs(o, r.s_get_device));
  const long long d = as_int(dev.p);
  t.on_gpu = d >= 0;
  t.device = d >= 0 ? static_cast<int>(d) : 0;
}

const char* dlpack_type_name(const nb::dlpack::dtype& d) {
  using code = nb::dlpack::dtype_code;
  switch (static_cast<code>(d.code)) {
    case code::Float: return d.bits == 16 ? "float16" : d.bits == 32 ? "float32" : d.bits == 64 ? "float64" : "float";
    case code::Bfloat: return "bfloat16";
    case code::Int: return d.bits == 8 ? "int8" : d.bits == 16 ? "int16" : d.bits == 32 ? "int32" : "int64";
    case code::UInt: return d.bits == 8 ? "uint8" : d.bits == 16 ? "uint16" : d.bits == 32 ? "uint32" : "uint64";
    case code::Bool: return "bool";
    default: return "an unsupported dtype";
  }
}

/// A trace-time stand-in for an array (JAX under jit): (shape, dtype name, on_gpu). It has no
/// data, so the checks see its shape, dtype and a dense layout but no contents.
tensor_arg placeholder(nb::handle h, tensor_arg& t) {
  const auto tup = nb::borrow<nb::tuple>(h);
  const auto shape = nb::borrow<nb::tuple>(tup[0]);
  set_rank(t, static_cast<Py_ssize_t>(shape.size()));
  std::int64_t stride = 1;
  for (int d = t.rank - 1; d >= 0; --d) t.shape[d] = nb::cast<std::int64_t>(shape[d]), t.stride[d] = stride, stride *= t.shape[d];
  t.type_name = nb::cast<std::string>(tup[1]);
  t.type = t.type_name == "bfloat16" ? dtype::bf16 : t.type_name == "float16" ? dtype::f16
         : t.type_name == "float32" ? dtype::f32 : t.type_name == "int32" ? dtype::i32 : dtype::other;
  t.on_gpu = nb::cast<bool>(tup[2]);
  return t;
}

/// The tensors of one call: imported arrays stay referenced until the call returns.
struct call_tensors {
  std::vector<nb::ndarray<nb::ro>> keep;
  bool uint16_is_bf16 = false;  // NumPy's bf16 arrives as a uint16 view (NumPy < 2.5 cannot export it)

  tensor_arg operator()(nb::handle h, const char* name) {
    tensor_arg t;
    t.name = name;
    if (h.is_none()) return t;
    if (PyTuple_Check(h.ptr())) return placeholder(h, t);
    if (torch_types.tensor_type && PyObject_TypeCheck(h.ptr(), reinterpret_cast<PyTypeObject*>(torch_types.tensor_type))) {
      import_torch(h.ptr(), t);
      return t;
    }
    nb::ndarray<nb::ro> a;
    if (!nb::try_cast(h, a))
      throw argument_type_error(std::string(name) + " must be an array or tensor (PyTorch, NumPy, CuPy or another "
                                "DLPack producer), got " + nb::type_name(h.type()).c_str());
    set_rank(t, static_cast<Py_ssize_t>(a.ndim()));
    t.data = const_cast<void*>(a.data());
    for (int d = 0; d < t.rank; ++d) t.shape[d] = a.shape(d), t.stride[d] = a.stride(d);
    const auto dt = a.dtype();
    using code = nb::dlpack::dtype_code;
    t.type_name = dlpack_type_name(dt);
    if (dt.lanes != 1) t.type = dtype::other;
    else if (dt.code == static_cast<std::uint8_t>(code::Bfloat) && dt.bits == 16) t.type = dtype::bf16;
    else if (dt.code == static_cast<std::uint8_t>(code::UInt) && dt.bits == 16 && uint16_is_bf16) t.type = dtype::bf16, t.type_name = "bfloat16";
    else if (dt.code == static_cast<std::uint8_t>(code::Float) && dt.bits == 16) t.type = dtype::f16;
    else if (dt.code == static_cast<std::uint8_t>(code::Float) && dt.bits == 32) t.type = dtype::f32;
    else if (dt.code == static_cast<std::uint8_t>(code::Int) && dt.bits == 32) t.type = dtype::i32;
    else if (dt.code == static_cast<std::uint8_t>(code::UInt) && dt.bits == 8) t.type = dtype::u8;
    else t.type = dtype::other;
    const int dev = a.device_type();
    if (dev == nb::device::cuda::value) t.on_gpu = true, t.device = a.device_id();
    else if (dev == nb::device::cpu::value || dev == nb::device::cuda_host::value) t.on_gpu = false;
    else
      throw argument_error(std::string(name) + " is on a device tilepipe does not run on (DLPack device type " +
                           std::to_string(dev) + "); it runs CUDA tensors on the GPU and host tensors in its interpreter");
    keep.push_back(std::move(a));
    return t;
  }
};

void* as_stream(std::uintptr_t s) { return reinterpret_cast<void*>(s); }

/// The launch runs without the GIL only on the GPU, where it is quick; the interpreter keeps
/// it (its host threads call back into nothing Python, but a long run should not let other
/// Python threads reuse the arrays it reads).
template <class Args>
void launch(Args& a, const tensor_arg& first) {
  check(a);
  if (first.on_gpu) {
    nb::gil_scoped_release release;
    run(a);
  } else {
    run(a);
  }
}

}  // namespace

NB_MODULE(_C, m) {
  m.doc() = "tilepipe's kernels (attention, grouped matmul, matmul, fp8 quantisation, matmul and grouped matmul) on DLPack tensors and XLA buffers";

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const argument_type_error& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const argument_error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const unsupported_error& e) {
      PyErr_SetString(PyExc_NotImplementedError, e.what());
    } catch (const tilepipe::error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  m.def("built_with_cuda", &built_with_cuda, "Whether this build has the sm_90a GPU kernels besides the interpreter.");
  m.def("prepare_gpu", &prepare_gpu, nb::arg("ordinal"),
        "Reads GPU `ordinal`'s properties and makes its failure channel (call outside CUDA-graph capture).");
  m.def(
      "register_torch",
      [](nb::handle tensor_type, nb::handle bf16, nb::handle f16, nb::handle f32, nb::handle i32, nb::handle u8) {
        auto& r = torch_types;
        for (nb::handle h : {tensor_type, bf16, f16, f32, i32, u8}) h.inc_ref();  // kept for the process
        r.tensor_type = tensor_type.ptr(), r.bf16 = bf16.ptr(), r.f16 = f16.ptr(), r.f32 = f32.ptr(), r.i32 = i32.ptr();
        r.u8 = u8.ptr();
        r.s_data_ptr = interned("data_ptr"), r.s_shape = interned("shape"), r.s_stride = interned("stride");
        r.s_dtype = interned("dtype"), r.s_get_device = interned("get_device");
        // DLPack's C exchange table, when this PyTorch has one of a version the extension knows.
        if (PyObject* capsule = PyObject_GetAttrString(tensor_type.ptr(), "__dlpack_c_exchange_api__")) {
          auto* api = static_cast<const dlpack_exchange_api*>(PyCapsule_GetPointer(capsule, "dlpack_exchange_api"));
          if (api && api->version.major == 1 && api->version.minor >= 3 && api->dltensor_from_py_object_no_sync)
            r.exchange = api;
          PyErr_Clear();
          // The capsule lives as long as torch.Tensor (the table is static in PyTorch); keep a reference.
        } else {
          PyErr_Clear();
        }
      },
      "Lets the extension read torch.Tensor arguments directly (tilepipe._torch calls it).");
  m.def(
      "attention_split_workspace",
      [](nb::handle q, int head_dim) {
        call_tensors take;
        const tensor_arg t = take(q, "q");
        if (t.on_gpu && !built_with_cuda())
          throw unsupported_error("tilepipe: this build has no GPU kernels (nvcc was not found when it was built)");
        const split_workspace_shape w = attention_split_workspace(t, head_dim);
        return std::make_pair(w.slots, static_cast<long long>(w.slot_floats));
      },
      nb::arg("q"), nb::arg("head_dim"),
      "(slots, slot_floats) of the split-KV workspace attention's decode path takes on q's device.");
  m.def("torch_exchange_api", [] { return torch_types.exchange != nullptr; },
        "Whether torch.Tensor arguments are read through DLPack's C exchange table (PyTorch 2.10+).");

  // Each operation has a launcher and a checker (the same arguments; the checker takes
  // placeholders too and launches nothing: tilepipe.jax and the fake kernels call it at trace time).
  auto attention = [](bool launch_it, nb::handle q, nb::handle k, nb::handle v, nb::handle out, nb::handle lse,
                      nb::handle cu_seqlens_q, nb::handle cu_seqlens_k, int max_seqlen_q, float softmax_scale,
                      bool causal, int window_left, int window_right, std::uintptr_t stream, bool uint16_is_bf16,
                      nb::handle seqused_k, nb::handle page_table, int num_splits, nb::handle partials,
                      nb::handle partial_flags, bool kv_fp8, nb::handle k_scale, nb::handle v_scale) {
    call_tensors take;
    take.uint16_is_bf16 = uint16_is_bf16;
    attention_args a;
    a.q = take(q, "q"), a.k = take(k, "k"), a.v = take(v, "v"), a.out = take(out, "out"), a.lse = take(lse, "lse");
    a.cu_seqlens_q = take(cu_seqlens_q, "cu_seqlens_q"), a.cu_seqlens_k = take(cu_seqlens_k, "cu_seqlens_k");
    a.max_seqlen_q = max_seqlen_q, a.softmax_scale = softmax_scale, a.causal = causal;
    a.window_left = window_left, a.window_right = window_right, a.stream = as_stream(stream);
    a.seqused_k = take(seqused_k, "seqused_k"), a.page_table = take(page_table, "page_table");
    a.num_splits = num_splits;
    a.partials = take(partials, "split-KV workspace"), a.partial_flags = take(partial_flags, "split-KV flags");
    a.kv_fp8 = kv_fp8, a.k_scale = take(k_scale, "k_scale"), a.v_scale = take(v_scale, "v_scale");
    if (launch_it) launch(a, a.q);
    else check(a);
    return a.max_seqlen_q;
  };
  auto attention_backward = [](bool launch_it, nb::handle q, nb::handle k, nb::handle v, nb::handle out,
                               nb::handle d_out, nb::handle lse, nb::handle dq, nb::handle dk, nb::handle dv,
                               nb::handle workspace, nb::handle cu_seqlens_q, nb::handle cu_seqlens_k, int max_seqlen_q,
                               int max_seqlen_k, float softmax_scale, bool causal, int window_left, int window_right,
                               std::uintptr_t stream, bool uint16_is_bf16) {
    call_tensors take;
    take.uint16_is_bf16 = uint16_is_bf16;
    attention_backward_args a;
    attention_args& f = a.forward;
    f.q = take(q, "q"), f.k = take(k, "k"), f.v = take(v, "v"), f.out = take(out, "out"), f.lse = take(lse, "lse");
    f.cu_seqlens_q = take(cu_seqlens_q, "cu_seqlens_q"), f.cu_seqlens_k = take(cu_seqlens_k, "cu_seqlens_k");
    f.max_seqlen_q = max_seqlen_q, f.softmax_scale = softmax_scale, f.causal = causal;
    f.window_left = window_left, f.window_right = window_right, f.stream = as_stream(stream);
    a.d_out = take(d_out, "d_out"), a.dq = take(dq, "dq"), a.dk = take(dk, "dk"), a.dv = take(dv, "dv");
    a.workspace = take(workspace, "workspace");
    a.max_seqlen_k = max_seqlen_k;
    if (launch_it) launch(a, f.q);
    else check(a);
  };
  auto grouped_mm = [](bool launch_it, nb::handle a_, nb::handle b, nb::handle out, nb::handle table, bool masked,
                       std::uintptr_t stream, bool uint16_is_bf16, bool jax_names) {
    call_tensors take;
    take.uint16_is_bf16 = uint16_is_bf16;
    grouped_mm_args a;
    // tilepipe.jax.grouped_mm has ragged_dot's names (its offsets are the cumulative group_sizes).
    a.a = take(a_, jax_names ? "lhs" : "a"), a.b = take(b, jax_names ? "rhs" : "b"), a.out = take(out, "out");
    a.table = take(table, jax_names ? "group_sizes" : masked ? "masked_m" : "offs");
    a.masked = masked, a.stream = as_stream(stream);
    if (launch_it) launch(a, a.a);
    else check(a);
  };
  auto quantize_fp8 = [](bool launch_it, nb::handle x, nb::handle q, nb::handle scales, int group, std::uintptr_t stream,
                         bool uint16_is_bf16) {
    call_tensors take;
    take.uint16_is_bf16 = uint16_is_bf16;
    quantize_args a;
    a.x = take(x, "x"), a.q = take(q, "q"), a.scales = take(scales, "scales");
    a.group = group, a.stream = as_stream(stream);
    if (launch_it) launch(a, a.x);
    else check(a);
  };
  auto matmul = [](bool launch_it, nb::handle a_, nb::handle b, nb::handle bias, nb::handle out, int act,
                   std::uintptr_t stream, bool uint16_is_bf16) {
    call_tensors take;
    take.uint16_is_bf16 = uint16_is_bf16;
    matmul_args a;
    a.a = take(a_, "a"), a.b = take(b, "b"), a.bias = take(bias, "bias"), a.out = take(out, "out");
    if (act < 0 || act > static_cast<int>(activation::silu)) throw argument_error("tilepipe.matmul: unknown activation");
    a.act = static_cast<activation>(act), a.stream = as_stream(stream);
    if (launch_it) launch(a, a.a);
    else check(a);
  };
  auto scaled_mm = [](bool launch_it, nb::handle a_, nb::handle b, nb::handle scale_a, nb::handle scale_b,
                      nb::handle bias, nb::handle out, int a_format, int b_format, bool promote, std::uintptr_t stream,
                      bool uint16_is_bf16) {
    call_tensors take;
    take.uint16_is_bf16 = uint16_is_bf16;
    scaled_mm_args a;
    a.a = take(a_, "a"), a.b = take(b, "b"), a.scale_a = take(scale_a, "scale_a"), a.scale_b = take(scale_b, "scale_b");
    a.bias = take(bias, "bias"), a.out = take(out, "out");
    for (const int f : {a_format, b_format})
      if (f != 0 && f != 1) throw argument_error("tilepipe.scaled_mm: an fp8 format is 0 (e4m3) or 1 (e5m2)");
    a.a_format = static_cast<fp8_format>(a_format), a.b_format = static_cast<fp8_format>(b_format);
    a.promote = promote, a.stream = as_stream(stream);
    if (launch_it) launch(a, a.a);
    else check(a);
  };
  auto scaled_grouped_mm = [](bool launch_it, nb::handle a_, nb::handle b, nb::handle scale_a, nb::handle scale_b,
                              nb::handle table, nb::handle out, bool masked, int a_format, int b_format, bool promote,
                              std::uintptr_t stream, bool uint16_is_bf16) {
    call_tensors take;
    take.uint16_is_bf16 = uint16_is_bf16;
    scaled_grouped_mm_args a;
    a.a = take(a_, "a"), a.b = take(b, "b"), a.scale_a = take(scale_a, "scale_a"), a.scale_b = take(scale_b, "scale_b");
    a.table = take(table, masked ? "masked_m" : "offs"), a.out = take(out, "out");
    for (const int f : {a_format, b_format})
      if (f != 0 && f != 1) throw argument_error("tilepipe.scaled_grouped_mm: an fp8 format is 0 (e4m3) or 1 (e5m2)");
    a.a_format = static_cast<fp8_format>(a_format), a.b_format = static_cast<fp8_format>(b_format);
    a.masked = masked, a.promote = promote, a.stream = as_stream(stream);
    if (launch_it) launch(a, a.a);
    else check(a);
  };
  for (const bool launch_it : {true, false}) {
    const char* suffix = launch_it ? "" : "_check";
    m.def((std::string("attention") + suffix).c_str(),
          [attention, launch_it](nb::handle q, nb::handle k, nb::handle v, nb::handle out, nb::handle lse,
                                 nb::handle cu_q, nb::handle cu_k, int max_seqlen_q, float scale, bool causal, int wl,
                                 int wr, std::uintptr_t stream, bool bf16, nb::handle seqused_k, nb::handle page_table,
                                 int num_splits, nb::handle partials, nb::handle partial_flags, bool kv_fp8,
                                 nb::handle k_scale, nb::handle v_scale) {
            return attention(launch_it, q, k, v, out, lse, cu_q, cu_k, max_seqlen_q, scale, causal, wl, wr, stream, bf16,
                             seqused_k, page_table, num_splits, partials, partial_flags, kv_fp8, k_scale, v_scale);
          },
          nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("out"), nb::arg("lse").none(), nb::arg("cu_seqlens_q").none(),
          nb::arg("cu_seqlens_k").none(), nb::arg("max_seqlen_q"), nb::arg("softmax_scale"), nb::arg("causal"),
          nb::arg("window_left"), nb::arg("window_right"), nb::arg("stream"), nb::arg("uint16_is_bf16"),
          nb::arg("seqused_k").none() = nb::none(), nb::arg("page_table").none() = nb::none(), nb::arg("num_splits") = 0,
          nb::arg("partials").none() = nb::none(), nb::arg("partial_flags").none() = nb::none(),
          nb::arg("kv_fp8") = false, nb::arg("k_scale").none() = nb::none(), nb::arg("v_scale").none() = nb::none(),
          "Writes attention(q, k, v) into out (and lse); returns max_seqlen_q (found from host offsets when -1). "
          "kv_fp8: k and v are float8_e4m3fn given as uint8, dequantised by k_scale and v_scale.");
    m.def((std::string("attention_backward") + suffix).c_str(),
          [attention_backward, launch_it](nb::handle q, nb::handle k, nb::handle v, nb::handle out, nb::handle d_out,
                                          nb::handle lse, nb::handle dq, nb::handle dk, nb::handle dv,
                                          nb::handle workspace, nb::handle cu_q, nb::handle cu_k, int max_sq,
                                          int max_sk, float scale, bool causal, int wl, int wr, std::uintptr_t stream,
                                          bool bf16) {
            attention_backward(launch_it, q, k, v, out, d_out, lse, dq, dk, dv, workspace, cu_q, cu_k, max_sq, max_sk,
                               scale, causal, wl, wr, stream, bf16);
          },
          nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("out"), nb::arg("d_out"), nb::arg("lse"), nb::arg("dq"),
          nb::arg("dk"), nb::arg("dv"), nb::arg("workspace"), nb::arg("cu_seqlens_q").none(),
          nb::arg("cu_seqlens_k").none(), nb::arg("max_seqlen_q"), nb::arg("max_seqlen_k"), nb::arg("softmax_scale"),
          nb::arg("causal"), nb::arg("window_left"), nb::arg("window_right"), nb::arg("stream"),
          nb::arg("uint16_is_bf16"),
          "Writes the gradients of attention(q, k, v) (whose output is out and LSE lse) for d_out into dq, dk, dv.");
    m.def((std::string("grouped_mm") + suffix).c_str(),
          [grouped_mm, launch_it](nb::handle a, nb::handle b, nb::handle out, nb::handle table, bool masked,
                                  std::uintptr_t stream, bool bf16, bool jax_names) {
            grouped_mm(launch_it, a, b, out, table, masked, stream, bf16, jax_names);
          },
          nb::arg("a"), nb::arg("b"), nb::arg("out"), nb::arg("table"), nb::arg("masked"), nb::arg("stream"),
          nb::arg("uint16_is_bf16"), nb::arg("jax_names") = false, "Writes the grouped matmul of a and b (logical [G, K, N]) into out.");
    m.def((std::string("matmul") + suffix).c_str(),
          [matmul, launch_it](nb::handle a, nb::handle b, nb::handle bias, nb::handle out, int act,
                              std::uintptr_t stream, bool bf16) { matmul(launch_it, a, b, bias, out, act, stream, bf16); },
          nb::arg("a"), nb::arg("b"), nb::arg("bias").none(), nb::arg("out"), nb::arg("activation"), nb::arg("stream"),
          nb::arg("uint16_is_bf16"), "Writes activation(a @ b + bias) into out.");
    m.def((std::string("quantize_fp8") + suffix).c_str(),
          [quantize_fp8, launch_it](nb::handle x, nb::handle q, nb::handle scales, int group, std::uintptr_t stream,
                                    bool bf16) { quantize_fp8(launch_it, x, q, scales, group, stream, bf16); },
          nb::arg("x"), nb::arg("q"), nb::arg("scales"), nb::arg("group"), nb::arg("stream"), nb::arg("uint16_is_bf16"),
          "Writes x quantised to e4m3 (q: its bits as uint8) and its f32 scales.");
    m.def((std::string("scaled_mm") + suffix).c_str(),
          [scaled_mm, launch_it](nb::handle a, nb::handle b, nb::handle scale_a, nb::handle scale_b, nb::handle bias,
                                 nb::handle out, int a_format, int b_format, bool promote, std::uintptr_t stream,
                                 bool bf16) {
            scaled_mm(launch_it, a, b, scale_a, scale_b, bias, out, a_format, b_format, promote, stream, bf16);
          },
          nb::arg("a"), nb::arg("b"), nb::arg("scale_a"), nb::arg("scale_b"), nb::arg("bias").none(), nb::arg("out"),
          nb::arg("a_format"), nb::arg("b_format"), nb::arg("promote"), nb::arg("stream"), nb::arg("uint16_is_bf16"),
          "Writes (a @ b) * scales + bias into out (bf16 or f32): a [M, K] and b [K, N] column-major fp8 as their "
          "uint8 bits (format 0: e4m3, 1: e5m2), the scaling mode found from the f32 scales' shapes.");
    m.def((std::string("scaled_grouped_mm") + suffix).c_str(),
          [scaled_grouped_mm, launch_it](nb::handle a, nb::handle b, nb::handle scale_a, nb::handle scale_b,
                                         nb::handle table, nb::handle out, bool masked, int a_format, int b_format,
                                         bool promote, std::uintptr_t stream, bool bf16) {
            scaled_grouped_mm(launch_it, a, b, scale_a, scale_b, table, out, masked, a_format, b_format, promote, stream,
                              bf16);
          },
          nb::arg("a"), nb::arg("b"), nb::arg("scale_a"), nb::arg("scale_b"), nb::arg("table"), nb::arg("out"),
          nb::arg("masked"), nb::arg("a_format"), nb::arg("b_format"), nb::arg("promote"), nb::arg("stream"),
          nb::arg("uint16_is_bf16"),
          "Writes the fp8 grouped matmul of a ([M, K] with offs, or [G, Mmax, K] with masked_m) and b (logical "
          "[G, K, N], K contiguous) into out (bf16): fp8 as their uint8 bits (format 0: e4m3, 1: e5m2), row-wise or "
          "block scales found from the f32 scales' shapes.");
  }

  // For bench/python_overhead.py: the C++ side of a call alone, timed on the host over
  // `iters` launches (no Python in the loop): check + launch, and the launch alone.
  m.def(
      "_time_attention_launches",
      [](nb::handle q, nb::handle k, nb::handle v, nb::handle out, std::uintptr_t stream, int iters) {
        call_tensors take;
        attention_args a;
        a.q = take(q, "q"), a.k = take(k, "k"), a.v = take(v, "v"), a.out = take(out, "out");
        a.softmax_scale = 0.125f, a.stream = as_stream(stream);
        check(a);
        nb::gil_scoped_release release;
        using clock = std::chrono::steady_clock;
        const auto t0 = clock::now();
        for (int i = 0; i < iters; ++i) check(a), run(a);
        const auto t1 = clock::now();
        for (int i = 0; i < iters; ++i) run(a);
        const auto t2 = clock::now();
        const auto per_call = [&](auto d) { return std::chrono::duration<double>(d).count() / iters; };
        return std::make_pair(per_call(t1 - t0), per_call(t2 - t1));
      },
      nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("out"), nb::arg("stream"), nb::arg("iters"),
      "Seconds per call of check + launch and of the launch alone (C++ loop).");

  m.def("xla_handlers", &xla_handlers,
        "The XLA FFI handlers as PyCapsules: {(name, platform): capsule} (empty when built without XLA's headers).");
}
