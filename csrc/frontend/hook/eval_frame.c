/* The PEP 523 frame-evaluation hook (CPython 3.11 and 3.12).
 *
 * Plain C on purpose: it includes CPython's internal frame headers, which are not meant for C++.
 * The hook offers each new frame to the C++ frontend; when the frontend answers a frame itself
 * (a cache hit), the frame's bytecode never runs. On 3.11 the caller (_PyEval_Vector) clears
 * and pops the frame either way; on 3.12 the evaluator owns that, so a frame we answer must be
 * cleared and popped here. The clear/pop below is written from the 3.12 frame semantics: drop
 * the references held by the frame's slots, its function and code, then release its space on
 * the thread's frame data stack (freeing the chunk if it was the first frame in it). */
#define Py_BUILD_CORE
#include <Python.h>
#if PY_VERSION_HEX >= 0x030C0000
#undef _PyGC_FINALIZED
#endif
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE

#include "frontend/hook/eval_frame.h"

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030D0000
#error "kiln's frame hook supports CPython 3.11 and 3.12; audit the frame layout before adding a version"
#endif

static _Thread_local int tls_mode = 0;
static _PyFrameEvalFunction previous_eval = NULL;
static int install_count = 0;

int kiln_hook_get_mode(void) { return tls_mode; }
void kiln_hook_set_mode(int mode) { tls_mode = mode; }

static PyObject* eval_default(PyThreadState* ts, _PyInterpreterFrame* frame, int throw_flag) {
  if (previous_eval) return previous_eval(ts, frame, throw_flag);
  return _PyEval_EvalFrameDefault(ts, frame, throw_flag);
}

#if PY_VERSION_HEX >= 0x030C0000
static void clear_and_pop_unrun_frame(PyThreadState* ts, _PyInterpreterFrame* frame) {
  for (int i = 0; i < frame->stacktop; i++) Py_XDECREF(frame->localsplus[i]);
  Py_XDECREF(frame->frame_obj);
  Py_XDECREF(frame->f_locals);
  Py_DECREF(frame->f_funcobj);
  Py_DECREF(frame->f_code);
  PyObject** base = (PyObject**)frame;
  _PyStackChunk* chunk = ts->datastack_chunk;
  if (base == &chunk->data[0]) {
    _PyStackChunk* prev = chunk->previous;
    ts->datastack_top = &prev->data[prev->top];
    ts->datastack_chunk = prev;
    ts->datastack_limit = (PyObject**)(((char*)prev) + prev->size);
    PyObjectArenaAllocator alloc;
    PyObject_GetArenaAllocator(&alloc);
    alloc.free(alloc.ctx, chunk, chunk->size);
  } else {
    ts->datastack_top = base;
  }
}
#define KILN_FRAME_FUNC(f) ((f)->f_funcobj)
#else
#define KILN_FRAME_FUNC(f) ((f)->f_func)
#endif

static PyObject* kiln_eval_frame(PyThreadState* ts, _PyInterpreterFrame* frame, int throw_flag) {
  if (!tls_mode || throw_flag || frame->owner != FRAME_OWNED_BY_THREAD || frame->frame_obj != NULL)
    return eval_default(ts, frame, throw_flag);
  /* Another evaluator installed on top of ours (PyTorch's Dynamo running its own region) reaches
   * us only as its "previous" evaluator: those frames are its business, not kiln's. */
  if (_PyInterpreterState_GetEvalFrameFunc(ts->interp) != kiln_eval_frame)
    return eval_default(ts, frame, throw_flag);
  PyCodeObject* code = frame->f_code;
  if (code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE) ||
      !(code->co_flags & CO_OPTIMIZED))
    return eval_default(ts, frame, throw_flag);
  kiln_frame view;
  view.code = code;
  view.func = (PyObject*)KILN_FRAME_FUNC(frame);
  view.globals = frame->f_globals;
  view.builtins = frame->f_builtins;
  view.localsplus = frame->localsplus;
  view.nlocalsplus = code->co_nlocalsplus;
  int handled = 0;
  PyObject* result = kiln_on_frame(&view, &handled);
  if (!handled) return eval_default(ts, frame, throw_flag);
  if (handled == KILN_RUN_UNCAPTURED) {  /* the frame's own bytecode, and nothing it calls captured */
    tls_mode = 0;
    result = eval_default(ts, frame, throw_flag);
    tls_mode = 1;
    return result;
  }
#if PY_VERSION_HEX >= 0x030C0000
  clear_and_pop_unrun_frame(ts, frame);
#endif
  return result;
}

void kiln_hook_acquire(void) {
  PyInterpreterState* interp = PyInterpreterState_Get();
  if (install_count++ == 0) {
    _PyFrameEvalFunction cur = _PyInterpreterState_GetEvalFrameFunc(interp);
    if (cur != kiln_eval_frame) {
      previous_eval = (cur == _PyEval_EvalFrameDefault) ? NULL : cur;
      _PyInterpreterState_SetEvalFrameFunc(interp, kiln_eval_frame);
    }
  }
}

void kiln_hook_release(void) {
  PyInterpreterState* interp = PyInterpreterState_Get();
  if (install_count > 0 && --install_count == 0) {
    /* Only unhook if nobody chained on top of us meanwhile. */
    if (_PyInterpreterState_GetEvalFrameFunc(interp) == kiln_eval_frame)
    {
      _PyInterpreterState_SetEvalFrameFunc(interp, previous_eval ? previous_eval : _PyEval_EvalFrameDefault);
      previous_eval = NULL;
    }
  }
}

int kiln_hook_installed(void) {
  return _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get()) == kiln_eval_frame;
}
