// id() of a value that exists only while capturing (Dynamo's FakeIdVariable).
//
// A tensor the graph computes, a list or object the captured code made, or a constant (CPython
// shares small ints and strings as it likes) has no identity a compiled call could reproduce.
// id() of one is a fake id: an int of a private subclass whose value is the address of a token
// object the capture keeps alive, so it differs from every live object's id and equals only the
// fake id of the same value. Fake ids serve as dict keys and in ==/!= (copy.deepcopy's memo);
// any other use (arithmetic, str(), a graph constant, a value handed back) is refused, since the
// number would mean nothing at run time.
#pragma once
#include <Python.h>

namespace kiln::frontend {

// The int subclass of fake ids (created on first use; borrowed).
PyObject* fake_id_type();
PyObject* new_fake_id(PyObject* token);  // new reference: a fake id of token's address
// True when o is a fake id or a tuple / frozenset holding one.
bool holds_fake_id(PyObject* o);

}  // namespace kiln::frontend
