/* The C ABI between the PEP 523 hook (eval_frame.c, which alone touches CPython's internal
 * frame layout) and the C++ frontend. */
#pragma once
#include <Python.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A borrowed view of a frame that is about to run, read before any of its bytecode ran. */
typedef struct {
  PyCodeObject* code;
  PyObject* func;      /* the function object being called */
  PyObject* globals;
  PyObject* builtins;
  PyObject** localsplus; /* arguments in their slots; cell/free slots not yet initialised */
  int nlocalsplus;
} kiln_frame;

/* Implemented in C++ (frame_dispatch.cpp). Returns a new reference and sets *handled = 1 when
 * it produced the frame's result itself (or NULL with an exception set, also handled); leaves
 * *handled = 0 to have the frame evaluated normally, or KILN_RUN_UNCAPTURED to have it evaluated
 * normally with no frame it calls offered to kiln. */
#define KILN_RUN_UNCAPTURED 2
PyObject* kiln_on_frame(kiln_frame* frame, int* handled);

/* Per-thread mode: 0 = pass every frame through, 1 = offer frames to kiln_on_frame. */
int kiln_hook_get_mode(void);
void kiln_hook_set_mode(int mode);
/* Interpreter-wide install, counted: the hook is present only while some thread uses
 * compiled code, and chains to whatever evaluator was installed before it. */
void kiln_hook_acquire(void);
void kiln_hook_release(void);
int kiln_hook_installed(void);

#ifdef __cplusplus
}
#endif
