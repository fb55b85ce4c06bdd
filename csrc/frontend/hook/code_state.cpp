// co_extra storage for CodeState. One extra-slot index is requested at start-up with a free
// function, so a code object's cache dies with it.
#include "frontend/hook/code_state.h"

#include <unordered_set>

namespace kiln::frontend {

#if PY_VERSION_HEX >= 0x030C0000
#define KILN_GET_EXTRA PyUnstable_Code_GetExtra
#define KILN_SET_EXTRA PyUnstable_Code_SetExtra
#define KILN_REQUEST_EXTRA PyUnstable_Eval_RequestCodeExtraIndex
#else
#define KILN_GET_EXTRA _PyCode_GetExtra
#define KILN_SET_EXTRA _PyCode_SetExtra
#define KILN_REQUEST_EXTRA _PyEval_RequestCodeExtraIndex
#endif

static Py_ssize_t g_extra_index = -1;
static std::unordered_set<CodeState*> g_live;

static void free_state(void* p) {
  auto* s = static_cast<CodeState*>(p);
  g_live.erase(s);
  delete s;
}

bool init_code_state() {
  g_extra_index = KILN_REQUEST_EXTRA(free_state);
  return g_extra_index >= 0;
}

CodeState* code_state(PyCodeObject* code) {
  void* extra = nullptr;
  if (KILN_GET_EXTRA(reinterpret_cast<PyObject*>(code), g_extra_index, &extra) < 0) { PyErr_Clear(); return nullptr; }
  if (extra) return static_cast<CodeState*>(extra);
  auto* s = new CodeState();
  if (KILN_SET_EXTRA(reinterpret_cast<PyObject*>(code), g_extra_index, s) < 0) { PyErr_Clear(); delete s; return nullptr; }
  g_live.insert(s);
  return s;
}

void clear_all_code_states() {
  for (CodeState* s : g_live) {
    s->entries.clear();
    s->limit_warned = false;
    s->size_history.by_source.clear();
  }
}

}  // namespace kiln::frontend
