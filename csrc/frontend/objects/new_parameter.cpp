// nn.Parameter(data) inside captured code: the modules a function builds while it runs (a Linear
// made in forward, a local helper module). Dynamo's approach: the Parameter object itself cannot
// come out of a graph (it is an autograd leaf, which a graph only takes as an input), so the
// entry's prologue makes an empty Parameter of the traced size before every run (Source::kMade),
// the graph takes it as an input and writes the data into it without autograd, and from then on
// the capture's `data` names the Parameter's memory, as the two share it in eager.
#include "frontend/interpreter/interpreter.h"
#include "frontend/interpreter/interpreter_frame.h"
#include "frontend/objects/tensor_probe.h"
#include "frontend/objects/torch_types.h"

namespace kiln::frontend {

VarPtr Interpreter::new_parameter(PyObject* cls, std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs) {
  VarPtr data = args.size() > 0 ? args[0] : nullptr, rg = args.size() > 1 ? args[1] : nullptr;
  if (args.size() > 2) unsupported("nn.Parameter() with more than two arguments");
  for (auto& [k, v] : kwargs) {
    if (k == "data" && !data) data = v;
    else if (k == "requires_grad" && !rg) rg = v;
    else unsupported("nn.Parameter() with argument " + k);
  }
  bool requires_grad = true;
  if (rg) {
    if (!rg->is_const() || !PyBool_Check(rg->obj.get())) unsupported("nn.Parameter() whose requires_grad is not a constant bool");
    requires_grad = rg->obj.get() == Py_True;
  }
  if (!data || !data->is_tensor()) unsupported("nn.Parameter() of a value that is not a tensor the capture computed");
  // Memory shared with something the frame holds (an input, a view of one) would have to stay
  // shared; only data made by this capture becomes the Parameter's.
  if (data->source) unsupported("nn.Parameter() of a tensor the frame was given");
  const void* st = probe_storage(data->fake.get());
  if (!st) unsupported("nn.Parameter(): the data's storage is unknown");
  for (const auto& [repr, w] : wrapped_)
    if (w->is_tensor() && probe_storage(w->fake.get()) == st) unsupported("nn.Parameter() of a view of " + repr);
  for (const auto& p : made_parameters_)
    if (probe_storage(p->fake.get()) == st) unsupported("nn.Parameter() of the memory of another Parameter made here");
  PyRef data_rg = PyRef::steal(PyObject_GetAttrString(data->fake.get(), "requires_grad"));
  if (!data_rg || data_rg.get() == Py_True) {
    PyErr_Clear();
    unsupported("nn.Parameter() of a tensor that requires grad");
  }
  if (probe_is_symbolic_tensor(data->fake.get())) unsupported("nn.Parameter() of a tensor with symbolic sizes");

  PyRef shape = PyRef::steal(PyObject_GetAttrString(data->fake.get(), "shape"));
  PyRef dtype = PyRef::steal(PyObject_GetAttrString(data->fake.get(), "dtype"));
  PyObject* make = module_attr("kiln._made", "new_parameter");
  PyObject* partial = module_attr("functools", "partial");
  if (!shape || !dtype || !make || !partial || !data->device) unsupported("nn.Parameter(): " + take_python_error());
  PyRef maker = PyRef::steal(PyObject_CallFunctionObjArgs(partial, make, cls, shape.get(), dtype.get(), data->device.get(),
                                                          requires_grad ? Py_True : Py_False, nullptr));
  PyRef example = maker ? PyRef::steal(PyObject_CallNoArgs(maker.get())) : PyRef();
  if (!example) unsupported("nn.Parameter(): " + take_python_error());

  auto p = std::make_shared<Var>(VarKind::kTensor);
  p->obj = PyRef::borrow(cls);
  p->source = made_source(maker.get(), static_cast<int>(cap_.made.size()), "Parameter " + probe_describe_tensor(example.get()));
  p->fake = PyRef::steal(probe_make_meta(example.get()));
  p->device = PyRef::steal(probe_device(example.get()));
  if (!p->fake || !p->device) unsupported("nn.Parameter(): " + take_python_error());
  cap_.made.push_back(p->source);
  p->node = add_input(p->source, example.get(), probe_describe_tensor(example.get()));
  made_parameters_.push_back(p);

  const bool grad = probe_grad_enabled();
  if (grad) record_grad_mode(false);
  record_op(graph::Op::kCallMethod, nullptr, "copy_", {p, data}, {});
  VarPtr memory = record_op(graph::Op::kCallMethod, nullptr, "detach", {p}, {});
  if (grad) record_grad_mode(true);
  // Every holder of `data` (a local, a list) now reads and writes the Parameter's memory.
  data->node = memory->node;
  data->fake = memory->fake;
  return p;
}

}  // namespace kiln::frontend
