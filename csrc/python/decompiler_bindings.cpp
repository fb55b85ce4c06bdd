// kiln._C.decompile: converts a Python code object (or its recorded description, a dict with the
// same fields, as tools/gen_decompiler_fixtures.py writes for other Python versions) into the
// decompiler's plain CodeDesc and returns the decompiled source.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>

#include "frontend/decompiler/code_desc.h"

namespace py = pybind11;
using namespace kiln::decompiler;

namespace kiln::python {

namespace {

std::string float_source(double v) {
  if (std::isnan(v)) return "float('nan')";
  if (std::isinf(v)) return v > 0 ? "float('inf')" : "-float('inf')";
  return py::repr(py::float_(v)).cast<std::string>();
}

std::shared_ptr<CodeDesc> describe(py::handle obj);

ConstDesc describe_const(py::handle c) {
  ConstDesc d;
  if (py::isinstance<py::dict>(c)) {  // recorded form
    py::dict m = py::reinterpret_borrow<py::dict>(c);
    std::string kind = m["kind"].cast<std::string>();
    d.source = m["source"].cast<std::string>();
    d.is_str = m["is_str"].cast<bool>();
    d.is_none = m["is_none"].cast<bool>();
    d.str = m["str"].cast<std::string>();
    d.kind = kind == "tuple" ? ConstDesc::Kind::Tuple : kind == "frozenset" ? ConstDesc::Kind::FrozenSet
             : kind == "code" ? ConstDesc::Kind::Code : ConstDesc::Kind::Value;
    for (auto it : m["items"]) d.items.push_back(describe_const(it));
    if (d.kind == ConstDesc::Kind::Code) d.code = describe(m["code"]);
    return d;
  }
  py::module_ types = py::module_::import("types");
  if (py::isinstance(c, types.attr("CodeType"))) {
    d.kind = ConstDesc::Kind::Code;
    d.code = describe(c);
    d.source = "<code>";
    return d;
  }
  if (c.is_none()) { d.source = "None"; d.is_none = true; return d; }
  if (c.ptr() == Py_Ellipsis) { d.source = "..."; return d; }
  if (PyBool_Check(c.ptr())) { d.source = c.ptr() == Py_True ? "True" : "False"; return d; }
  if (PyFloat_Check(c.ptr())) { d.source = float_source(c.cast<double>()); return d; }
  if (PyComplex_Check(c.ptr())) {
    std::string r = py::repr(c).cast<std::string>();
    if (r.find("inf") != std::string::npos || r.find("nan") != std::string::npos) r = "complex('" + r + "')";
    d.source = r;
    return d;
  }
  if (PyUnicode_Check(c.ptr())) {
    d.is_str = true;
    d.source = py::repr(c).cast<std::string>();
    py::object b = c.attr("encode")("utf-8", "surrogatepass");
    d.str = b.cast<std::string>();
    return d;
  }
  if (PyTuple_Check(c.ptr()) || PyFrozenSet_Check(c.ptr())) {
    bool tup = PyTuple_Check(c.ptr());
    d.kind = tup ? ConstDesc::Kind::Tuple : ConstDesc::Kind::FrozenSet;
    std::string body;
    py::object items = tup ? py::reinterpret_borrow<py::object>(c) : py::module_::import("builtins").attr("sorted")(c, py::arg("key") = py::module_::import("builtins").attr("repr"));
    size_t n = 0;
    for (auto it : items) {
      d.items.push_back(describe_const(it));
      body += (n++ ? ", " : "") + d.items.back().source;
    }
    if (tup) d.source = n == 1 ? "(" + body + ",)" : "(" + body + ")";
    else d.source = n == 0 ? "frozenset()" : "frozenset({" + body + "})";
    return d;
  }
  d.source = py::repr(c).cast<std::string>();
  return d;
}

std::vector<std::string> strings(py::handle seq) {
  std::vector<std::string> out;
  for (auto it : seq) out.push_back(it.cast<std::string>());
  return out;
}

std::vector<uint8_t> bytes_of(py::handle b) {
  std::string s = py::reinterpret_borrow<py::bytes>(b).cast<std::string>();
  return std::vector<uint8_t>(s.begin(), s.end());
}

std::shared_ptr<CodeDesc> describe(py::handle obj) {
  auto d = std::make_shared<CodeDesc>();
  if (py::isinstance<py::dict>(obj)) {
    py::dict m = py::reinterpret_borrow<py::dict>(obj);
    d->py_minor = m["py_minor"].cast<int>();
    d->name = m["name"].cast<std::string>();
    d->qualname = m["qualname"].cast<std::string>();
    py::bytes code = py::module_::import("base64").attr("b64decode")(m["code"]);
    py::bytes table = py::module_::import("base64").attr("b64decode")(m["exception_table"]);
    d->code = bytes_of(code);
    d->exception_table = bytes_of(table);
    d->names = strings(m["names"]);
    d->localsplus = strings(m["localsplus"]);
    d->varnames = strings(m["varnames"]);
    d->cellvars = strings(m["cellvars"]);
    d->freevars = strings(m["freevars"]);
    for (auto c : m["consts"]) d->consts.push_back(describe_const(c));
    d->argcount = m["argcount"].cast<int>();
    d->posonlyargcount = m["posonlyargcount"].cast<int>();
    d->kwonlyargcount = m["kwonlyargcount"].cast<int>();
    d->flags = m["flags"].cast<int>();
    d->firstlineno = m["firstlineno"].cast<int>();
    return d;
  }
  d->py_minor = PY_MINOR_VERSION;
  d->name = obj.attr("co_name").cast<std::string>();
  d->qualname = obj.attr("co_qualname").cast<std::string>();
  d->code = bytes_of(obj.attr("co_code"));
  d->exception_table = bytes_of(obj.attr("co_exceptiontable"));
  d->names = strings(obj.attr("co_names"));
  d->varnames = strings(obj.attr("co_varnames"));
  d->cellvars = strings(obj.attr("co_cellvars"));
  d->freevars = strings(obj.attr("co_freevars"));
  size_t upper = d->varnames.size() + d->cellvars.size() + d->freevars.size();
  py::object from_oparg = obj.attr("_varname_from_oparg");
  for (size_t i = 0; i < upper; ++i) {
    try {
      d->localsplus.push_back(from_oparg(i).cast<std::string>());
    } catch (const py::error_already_set&) {
      break;
    }
  }
  for (auto c : obj.attr("co_consts")) d->consts.push_back(describe_const(c));
  d->argcount = obj.attr("co_argcount").cast<int>();
  d->posonlyargcount = obj.attr("co_posonlyargcount").cast<int>();
  d->kwonlyargcount = obj.attr("co_kwonlyargcount").cast<int>();
  d->flags = obj.attr("co_flags").cast<int>();
  d->firstlineno = obj.attr("co_firstlineno").cast<int>();
  return d;
}

}  // namespace

void bind_decompiler(py::module_& m) {
  static py::exception<DecompileError> error(m, "DecompileError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const DecompileError& e) {
      PyErr_SetString(error.ptr(), e.what());
    }
  });
  m.def("decompile",
        [](py::handle code, std::vector<std::string> defaults, std::vector<std::pair<std::string, std::string>> kwdefaults) {
          auto d = describe(code);
          try {
            return decompile(*d, defaults, kwdefaults);
          } catch (const std::invalid_argument& e) {
            throw DecompileError(std::string("cannot decode: ") + e.what(), 0);
          } catch (const std::out_of_range& e) {
            throw DecompileError(std::string("malformed code object: ") + e.what(), 0);
          }
        },
        py::arg("code"), py::arg("defaults") = std::vector<std::string>{},
        py::arg("kwdefaults") = std::vector<std::pair<std::string, std::string>>{},
        "Python source of a code object (or of its recorded description dict); raises DecompileError");
}

}  // namespace kiln::python
