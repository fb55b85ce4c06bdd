// Capture under autocast: the dtypes eager's operators produce there (see autocast_dtypes.cpp).
#pragma once
#include <Python.h>

#include <functional>
#include <string>

namespace kiln::frontend {

// `meta_result` (the meta kernels' answer for `target(*args, **kwargs)`, or of the tensor method
// `method` on args[0], with meta tensors for arguments) with the dtypes eager computes when
// autocast is on for `device`'s type; a new reference. Where autocast is off it is `meta_result`
// itself. nullptr with `why` set when the dtypes cannot be found.
PyObject* autocast_result(PyObject* meta_result, PyObject* target, const std::string& method, PyObject* args, PyObject* kwargs,
                          PyObject* device, std::string* why);

// Under autocast a meta kernel may refuse operands that autocast would have cast (attention on a
// bfloat16 query with a float32 mask): the meta result then comes from the call on full-size real
// stand-ins (expanded zeros, requiring grad as the operands do), or, where sizes are symbolic, from
// `run_meta` on the operands autocast's lower-precision ops take (every floating tensor but
// float64 cast to the autocast dtype). New reference, or nullptr (no Python error set) where
// autocast is off or both fail.
PyObject* autocast_meta_result(PyObject* target, const std::string& method, PyObject* args, PyObject* kwargs, PyObject* device,
                               const std::function<PyObject*(PyObject* args, PyObject* kwargs)>& run_meta);

}  // namespace kiln::frontend
