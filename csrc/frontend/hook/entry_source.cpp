// The debug dump's transformed.py: what a cache entry does in place of the frame's bytecode,
// written as Python. kiln does not generate bytecode for an entry: run_entry (frame_dispatch.cpp)
// fetches the graph's inputs through their sources, calls the compiled graph, builds the result
// and the side effects from the output templates and, at a graph break, runs the instruction
// eagerly and calls the resume function (continue_after_break, graph_break.cpp). This file
// spells those same steps as the Python a reader would write for them.
#include "frontend/hook/entry_source.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "frontend/interpreter/interpreter_frame.h"

namespace kiln::frontend {

namespace {

std::string key_text(PyObject* key) {
  if (key && PyUnicode_Check(key)) return py_str(key);
  return key ? py_repr(key) : "?";
}

bool is_identifier(const std::string& s) {
  if (s.empty() || (!isalpha(static_cast<unsigned char>(s[0])) && s[0] != '_')) return false;
  for (char c : s)
    if (!isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// A class's or function's name (its __qualname__, else __name__), or its repr.
std::string name_of(PyObject* o) {
  if (!o) return "?";
  for (const char* a : {"__qualname__", "__name__"}) {
    PyObject* n = PyObject_GetAttrString(o, a);
    if (n && PyUnicode_Check(n)) {
      std::string s = py_str(n);
      Py_DECREF(n);
      return s;
    }
    Py_XDECREF(n);
    PyErr_Clear();
  }
  return py_repr(o);
}

// A value as Python: its repr when that reads as an expression, else `__object('<its repr>')`, a
// placeholder naming the object (transformed.py stays valid Python).
std::string value_python(PyObject* o) {
  std::string r = py_repr(o);
  if (r.empty() || r[0] != '<') return r;
  PyObject* s = PyUnicode_FromStringAndSize(r.data(), static_cast<Py_ssize_t>(r.size()));
  std::string out = "__object(" + (s ? py_repr(s) : std::string("''")) + ")";
  Py_XDECREF(s);
  PyErr_Clear();
  return out;
}

std::string attr(const std::string& parent, PyObject* key) {
  const std::string k = key_text(key);
  return is_identifier(k) ? parent + "." + k : "getattr(" + parent + ", " + py_repr(key) + ")";
}

}  // namespace

std::string source_python(const SourcePtr& s) {
  if (!s) return "?";
  const std::string parent = s->parent ? source_python(s->parent) : "";
  switch (s->kind) {
    case Source::kLocal: return s->name.empty() ? s->repr() : s->name;
    case Source::kFrameFunc: return "__function__";
    case Source::kClosureCell: return s->name.empty() ? s->repr() : s->name;
    case Source::kGlobal: return key_text(s->key.get());
    case Source::kInstanceAttr: return attr(parent, s->key.get());
    case Source::kModuleMember: return attr(parent, s->member_key ? s->key.get() : s->key.get());
    case Source::kItem: return parent + "[" + std::to_string(s->index) + "]";
    case Source::kDictItem: return parent + "[" + (s->key ? py_repr(s->key.get()) : "?") + "]";
    case Source::kConstant: return s->repr();
    case Source::kTypeLookup: return s->index == 1 ? attr(parent, s->key.get()) : attr("type(" + parent + ")", s->key.get());
    case Source::kInstanceDict: return parent + ".__dict__";
    case Source::kMade: return "__made" + std::to_string(s->index);
    case Source::kWeakReferent: return parent + "()";
    case Source::kTensorGrad: return parent + ".grad";
  }
  return s->repr();
}

std::string template_python(const OutputTemplate& t) {
  auto list = [&](const std::vector<OutputTemplate>& items) {
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + template_python(items[i]);
    return out;
  };
  switch (t.kind) {
    case OutputTemplate::kGraphOut: return "__graph_out[" + std::to_string(t.index) + "]";
    case OutputTemplate::kConst:
      if (!t.obj) return "None";
      // Functions, classes and modules read back by name (print, torch.relu); values by repr.
      if (PyFunction_Check(t.obj.get()) || PyCFunction_Check(t.obj.get()) || PyType_Check(t.obj.get()) || PyModule_Check(t.obj.get()))
        return name_of(t.obj.get());
      return value_python(t.obj.get());
    case OutputTemplate::kFetch: return source_python(t.source);
    case OutputTemplate::kCopy: return "copy.deepcopy(" + (t.obj ? py_repr(t.obj.get()) : std::string("?")) + ")";
    case OutputTemplate::kGetAttr: return attr(t.items.empty() ? "?" : template_python(t.items[0]), t.obj.get());
    case OutputTemplate::kMethod:
      return name_of(t.obj.get()) + ".__get__(" +
             (t.items.empty() ? "?" : template_python(t.items[0])) + ")";
    case OutputTemplate::kTuple: {
      std::string inner = list(t.items);
      if (t.obj) return name_of(t.obj.get()) + "(" + inner + ")";
      return "(" + inner + (t.items.size() == 1 ? ",)" : ")");
    }
    case OutputTemplate::kList: return "[" + list(t.items) + "]";
    case OutputTemplate::kDict: {
      std::string out = "{";
      for (size_t i = 0; i < t.items.size(); ++i) {
        PyObject* k = t.obj && PyTuple_Check(t.obj.get()) && static_cast<Py_ssize_t>(i) < PyTuple_GET_SIZE(t.obj.get())
                          ? PyTuple_GET_ITEM(t.obj.get(), i)
                          : nullptr;
        out += (i ? ", " : "") + (k ? py_repr(k) : std::string("?")) + ": " + template_python(t.items[i]);
      }
      return out + "}";
    }
    case OutputTemplate::kNewObject: {
      std::string out = "__new_object(" + name_of(t.obj.get());
      if (!t.dict_part.empty()) out += ", " + template_python(t.dict_part[0]);
      for (size_t i = 0; i < t.items.size(); ++i)
        out += ", " + (t.names && static_cast<Py_ssize_t>(i) < PyTuple_GET_SIZE(t.names.get()) ? key_text(PyTuple_GET_ITEM(t.names.get(), i)) : "?") +
               "=" + template_python(t.items[i]);
      return out + ")";
    }
    case OutputTemplate::kNumpy: {
      const std::string arr = (t.items.empty() ? std::string("?") : template_python(t.items[0])) + ".numpy()";
      return t.obj.get() == Py_True ? arr + "[()]" : arr;
    }
  }
  return "?";
}

namespace {

int line_of(PyCodeObject* code, int offset) { return PyCode_Addr2Line(code, offset); }

std::string where(PyCodeObject* code, int offset) {
  return py_str(code->co_filename) + ":" + std::to_string(line_of(code, offset));
}

// Name of local slot i of `code` (the resume function's parameters are the frame's slots).
std::string slot_name(PyCodeObject* code, int i) {
  PyObject* names = PyCode_GetVarnames(code);
  std::string out = "__slot" + std::to_string(i);
  if (names && i < PyTuple_GET_SIZE(names)) out = py_str(PyTuple_GET_ITEM(names, i));
  Py_XDECREF(names);
  PyErr_Clear();
  return out;
}

}  // namespace

// New contents for a list or dict the frame was given (run_entry: list slice assignment, dict clear + update).
std::string write_back(const std::string& target, const OutputTemplate& value) {
  if (value.kind == OutputTemplate::kList) return target + "[:] = " + template_python(value) + "  # contents written back\n";
  return target + ".clear(); " + target + ".update(" + template_python(value) + ")  # contents written back\n";
}

std::string entry_python(const Capture& cap, PyCodeObject* code) {
  std::string out;
  const std::string qual = py_str(code->co_qualname), name = py_str(code->co_name);
  out += "# What kiln runs for " + qual + " (" + py_str(code->co_filename) + ":" + std::to_string(code->co_firstlineno) +
         ") in place of its bytecode\n";
  out += "# whenever this entry's guards (guards.txt) pass: run_entry in csrc/frontend/hook/frame_dispatch.cpp does\n";
  out += "# these steps in C++; this is their Python form. The graph is graph_module.py (graph.py: shapes, user lines).\n";
  // The signature: positional slots, *args (its slot follows the keyword-only ones), keyword-only, **kwargs.
  std::vector<std::string> params_list;
  const int npos = code->co_argcount, nkw = code->co_kwonlyargcount;
  const bool varargs = code->co_flags & CO_VARARGS, varkw = code->co_flags & CO_VARKEYWORDS;
  for (int i = 0; i < npos; ++i) params_list.push_back(slot_name(code, i));
  if (varargs) params_list.push_back("*" + slot_name(code, npos + nkw));
  else if (nkw) params_list.push_back("*");
  for (int i = npos; i < npos + nkw; ++i) params_list.push_back(slot_name(code, i));
  if (varkw) params_list.push_back("**" + slot_name(code, npos + nkw + (varargs ? 1 : 0)));
  std::string params;
  for (size_t i = 0; i < params_list.size(); ++i) params += (i ? ", " : "") + params_list[i];
  out += "def " + name + "(" + params + "):\n";
  for (const auto& m : cap.made)
    out += "    __made" + std::to_string(m->index) + " = " + name_of(m->obj.get()) + "()  # made anew before every run\n";
  std::string args;
  for (size_t i = 0; i < cap.inputs.size(); ++i) {
    auto among = [&](const std::vector<SourcePtr>& v) { return std::find(v.begin(), v.end(), cap.inputs[i]) != v.end(); };
    const bool from_numpy = among(cap.numpy_inputs), from_float = among(cap.float_inputs);
    const std::string src = source_python(cap.inputs[i]);
    args += (i ? ", " : "") + (from_numpy ? "torch.from_numpy(" + src + ")" : from_float ? "torch.scalar_tensor(" + src + ", dtype=torch.float64)" : src);
  }
  // The user lines the graph's ops came from (of this file; inlined callees' lines are in graph.py).
  const std::string file = py_str(code->co_filename);
  int lo = 0, hi = 0;
  for (const auto& node : cap.graph->nodes()) {
    const auto colon = node.user_loc.rfind(':');
    if (colon == std::string::npos || node.user_loc.compare(0, colon, file) != 0) continue;
    const int line = atoi(node.user_loc.c_str() + colon + 1);
    if (line <= 0) continue;
    lo = lo ? std::min(lo, line) : line;
    hi = std::max(hi, line);
  }
  out += "    __graph_out = __graph(" + args + ")  # " + std::to_string(cap.graph->num_calls()) + " ops";
  if (lo) out += ", from " + file + ":" + std::to_string(lo) + (hi > lo ? "-" + std::to_string(hi) : "");
  out += "\n";
  if (!cap.brk) {
    for (const auto& se : cap.side_effects) {
      const std::string target = se.source ? source_python(se.source) : value_python(se.target.get());
      if (se.name) out += "    " + attr(target, se.name.get()) + " = " + template_python(se.value) + "\n";
      else out += "    " + write_back(target, se.value);
    }
    return out + "    return " + template_python(cap.output) + "\n";
  }
  // A graph break: the output template is the frame's state at the break, the live stack (its
  // non-NULL items) then every local slot.
  const BreakState& b = *cap.brk;
  std::vector<std::string> stack;
  size_t k = 0;
  const auto& items = cap.output.items;
  auto item = [&](size_t i) { return i < items.size() ? template_python(items[i]) : std::string("?"); };
  for (bool null : b.stack_null) stack.push_back(null ? "NULL" : item(k++));
  std::vector<std::string> locals;
  for (int i = 0; i < b.n_locals; ++i) {
    bool unbound = false;
    for (int u : b.unbound) unbound = unbound || u == i;
    locals.push_back(unbound ? "__unbound" : item(k + static_cast<size_t>(i)));
  }
  for (const auto& se : cap.side_effects) {
    const std::string target = se.source ? source_python(se.source) : value_python(se.target.get());
    if (se.name) out += "    " + attr(target, se.name.get()) + " = " + template_python(se.value) + "\n";
    else out += "    " + write_back(target, se.value);
  }
  const DecodedCode& dc = decoded_code(code);
  auto resume_call = [&](int target_index, const std::vector<std::string>& rest) {
    const int offset = dc.bc->at(target_index).offset;
    std::string a;
    for (size_t i = 0; i < locals.size(); ++i) a += (i ? ", " : "") + locals[i];
    for (const auto& s : rest)
      if (s != "NULL") a += ", " + s;
    // A nested function's qualified name holds "<locals>": spelled `locals` so that the file parses.
    std::string callee = qual;
    for (size_t at; (at = callee.find("<locals>")) != std::string::npos;) callee.replace(at, 8, "locals");
    return callee + ".__resume_at_" + std::to_string(offset) + "(" + a + ")  # its own folder in this dump";
  };
  const std::string at = where(code, b.offset);
  if (b.kind == BreakState::kCall) {
    const size_t n = static_cast<size_t>(b.call_args);
    const size_t base = stack.size() >= n + 2 ? stack.size() - n - 2 : 0;
    std::vector<std::string> argv;
    std::string callee;
    if (stack.size() >= n + 2 && stack[base] != "NULL") {  // a method: [method, self, args...]
      callee = stack[base];
      argv.push_back(stack[base + 1]);
    } else {
      callee = stack.size() > base + 1 ? stack[base + 1] : "?";
    }
    for (size_t i = 0; i < n && base + 2 + i < stack.size(); ++i) argv.push_back(stack[base + 2 + i]);
    size_t nkw = b.kw_names ? static_cast<size_t>(PyTuple_GET_SIZE(b.kw_names.get())) : 0;
    std::string call;
    for (size_t i = 0; i < argv.size(); ++i) {
      call += i ? ", " : "";
      if (i + nkw >= argv.size()) call += py_str(PyTuple_GET_ITEM(b.kw_names.get(), i + nkw - argv.size())) + "=";
      call += argv[i];
    }
    out += "    __result = " + callee + "(" + call + ")  # " + at + ": the graph break, run eagerly\n";
    std::vector<std::string> rest(stack.begin(), stack.begin() + static_cast<long>(base));
    rest.push_back("__result");
    out += "    return " + resume_call(b.index + 1, rest) + "\n";
  } else if (b.kind == BreakState::kSubscript) {
    const std::string container = stack.size() >= 2 ? stack[stack.size() - 2] : "?", key = stack.empty() ? "?" : stack.back();
    out += "    __result = " + container + "[" + key + "]  # " + at + ": the graph break, run eagerly\n";
    std::vector<std::string> rest(stack.begin(), stack.end() - std::min<size_t>(stack.size(), 2));
    rest.push_back("__result");
    out += "    return " + resume_call(b.index + 1, rest) + "\n";
  } else if (b.kind == BreakState::kStoreAttr) {
    const std::string owner = stack.empty() ? "?" : stack.back(), value = stack.size() >= 2 ? stack[stack.size() - 2] : "?";
    out += "    " + owner + "." + py_str(b.attr_name.get()) + " = " + value + "  # " + at + ": the graph break, run eagerly\n";
    std::vector<std::string> rest(stack.begin(), stack.end() - std::min<size_t>(stack.size(), 2));
    out += "    return " + resume_call(b.index + 1, rest) + "\n";
  } else {
    std::vector<std::string> rest(stack.begin(), stack.end() - (stack.empty() ? 0 : 1));
    const std::string cond = stack.empty() ? "?" : stack.back();
    out += "    if " + std::string(b.kind == BreakState::kJumpIfFalse ? "not " : "") + cond + ":  # " + at +
           ": the graph break, a branch on a value known only at run time\n";
    out += "        return " + resume_call(dc.bc->at(b.index).target, rest) + "\n";
    out += "    return " + resume_call(b.index + 1, rest) + "\n";
  }
  return out;
}

}  // namespace kiln::frontend
