// Options storage and the log bridge to Python (kiln/_logging.py formats and prints).
#include "frontend/hook/options.h"

#include <Python.h>

namespace kiln::frontend {

static PyObject* g_log_callback = nullptr;

Options& options() {
  static Options o;
  return o;
}

void set_log_callback(void* cb) {
  PyObject* o = static_cast<PyObject*>(cb);
  Py_XINCREF(o);
  Py_XSETREF(g_log_callback, o);
}

void log(LogChannel channel, const std::string& message) {
  if (!(options().log_mask & channel) || !g_log_callback) return;
  const char* name = channel == kLogGraphBreaks ? "graph_breaks" : channel == kLogRecompiles ? "recompiles"
                   : channel == kLogGuards ? "guards" : channel == kLogGraphCode ? "graph_code" : channel == kLogDynamic ? "dynamic" : "perf";
  PyObject* exc_type, *exc_value, *exc_tb;
  PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
  PyObject* r = PyObject_CallFunction(g_log_callback, "ss", name, message.c_str());
  if (!r) PyErr_Clear();
  Py_XDECREF(r);
  PyErr_Restore(exc_type, exc_value, exc_tb);
}

}  // namespace kiln::frontend
