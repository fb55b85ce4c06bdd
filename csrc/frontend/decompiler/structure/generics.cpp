// PEP 695 generic functions and classes (3.12): `def f[T: int, *Ts, **P](...)` compiles to a
// function named `<generic parameters of f>` that is called at once. It creates each type
// parameter (CALL_INTRINSIC_1 TYPEVAR / TYPEVARTUPLE / PARAMSPEC, or CALL_INTRINSIC_2
// TYPEVAR_WITH_BOUND / _WITH_CONSTRAINTS with the bound as a lazily evaluated code object) and
// stores it, then builds the function (its annotations read the parameters; its defaults are the
// scope's arguments .defaults and .kwdefaults) and attaches the parameters' tuple (CALL_INTRINSIC_2
// SET_FUNCTION_TYPE_PARAMS), or, for `class C[T](Base)`, stores the tuple in .type_params and
// calls __build_class__ with the bases and Generic[*type params] (.generic_base) after them. This
// file reads that scope back into the def's or class's header.
#include <cstring>

#include "frontend/decompiler/decompiler_state.h"

namespace kiln::decompiler {

namespace {

bool is(const frontend::Instruction& in, const char* n) { return !std::strcmp(in.name, n); }

// CALL_INTRINSIC_1 / CALL_INTRINSIC_2 operands (CPython 3.12's pycore_intrinsics.h)
constexpr int kTypeVar = 7, kParamSpec = 8, kTypeVarTuple = 9, kSubscriptGeneric = 10;
constexpr int kTypeVarWithBound = 2, kTypeVarWithConstraints = 3, kSetFunctionTypeParams = 4;

}  // namespace

ExP Decompiler::generic_scope_call(const FunctionInfo& scope, const std::vector<ExP>& args, int at) {
  const CodeDesc& c = *scope.code;
  Decompiler g(c);
  const int n = g.bc.size();
  auto op = [&](int j, const char* name) { return j < n && is(g.bc.at(j), name); };
  auto unexpected = [&](const char* what) { fail(std::string("generic scope whose ") + what + " has an unexpected shape", at); };
  const bool is_class = n >= 2 && op(n - 2, "CALL") && op(n - 1, "RETURN_VALUE");
  if (!is_class && (n < 3 || !op(n - 3, "SWAP") || g.bc.at(n - 3).arg != 2 || !op(n - 2, "CALL_INTRINSIC_2") ||
                    g.bc.at(n - 2).arg != kSetFunctionTypeParams || !op(n - 1, "RETURN_VALUE")))
    unexpected("scope");
  int j = 0;
  while (op(j, "NOP") || op(j, "RESUME") || op(j, "COPY_FREE_VARS") || op(j, "MAKE_CELL")) ++j;
  // a bound or the constraints: a code object whose body is `return <expression>`
  auto lazy = [&](const CodeDesc& lc) {
    Decompiler d(lc);
    std::vector<Stmt> body = d.body();
    if (body.size() != 1 || body[0].kind != Stmt::Kind::Return || !body[0].e1) unexpected("type parameter bound");
    const ExP& v = body[0].e1;
    return v->kind == ExKind::Display && v->display == '(' ? render(v) : wrap(v, kPrecLambda + 1);
  };
  std::string params;
  int count = 0;
  while (op(j, "LOAD_CONST") && c.consts.at(g.bc.at(j).arg).is_str) {
    const std::string name = c.consts.at(g.bc.at(j).arg).str;
    std::string text;
    ++j;
    if (op(j, "CALL_INTRINSIC_1")) {
      const int k = g.bc.at(j).arg;
      if (k == kTypeVar) text = name;
      else if (k == kTypeVarTuple) text = "*" + name;
      else if (k == kParamSpec) text = "**" + name;
      else unexpected("type parameter");
      ++j;
    } else {
      // [LOAD_CLOSURE ...; BUILD_TUPLE] LOAD_CONST <bound code>; MAKE_FUNCTION; CALL_INTRINSIC_2
      while (op(j, "LOAD_CLOSURE")) ++j;
      if (op(j, "BUILD_TUPLE")) ++j;
      if (!op(j, "LOAD_CONST") || !c.consts.at(g.bc.at(j).arg).code || !op(j + 1, "MAKE_FUNCTION") || !op(j + 2, "CALL_INTRINSIC_2") ||
          (g.bc.at(j + 2).arg != kTypeVarWithBound && g.bc.at(j + 2).arg != kTypeVarWithConstraints))
        unexpected("type parameter");
      text = name + ": " + lazy(*c.consts.at(g.bc.at(j).arg).code);
      j += 3;
    }
    // COPY 1; STORE_FAST/STORE_DEREF name (the parameter is a local of the scope)
    if (!op(j, "COPY") || g.bc.at(j).arg != 1 || !(op(j + 1, "STORE_FAST") || op(j + 1, "STORE_DEREF")) ||
        g.local(g.bc.at(j + 1).arg) != name)
      unexpected("type parameter");
    j += 2;
    params += (count++ ? ", " : "") + text;
  }
  if (!count || !op(j, "BUILD_TUPLE") || g.bc.at(j).arg != count) unexpected("type parameter list");
  ++j;
  if (static_cast<int>(args.size()) != c.argcount) unexpected("call");
  for (int k = 0; k < c.argcount; ++k) g.bound_locals.push_back({c.varnames.at(k), args[k]});
  RegionCtx ctx;
  std::vector<Stmt> out;
  ExP result;
  if (is_class) {
    // STORE_DEREF .type_params; <__build_class__, the body, the name>; LOAD_DEREF .type_params;
    // CALL_INTRINSIC_1 SUBSCRIPT_GENERIC; STORE_FAST .generic_base; <bases>; LOAD_FAST .generic_base;
    // [KW_NAMES]; CALL: the generic base is no source (the compiler adds it), the rest is the header
    if (!op(j, "STORE_DEREF") || g.local(g.bc.at(j).arg) != ".type_params") unexpected("class scope");
    int q = j + 1;
    while (q + 2 < n && !(op(q, "LOAD_DEREF") && op(q + 1, "CALL_INTRINSIC_1") && g.bc.at(q + 1).arg == kSubscriptGeneric &&
                          op(q + 2, "STORE_FAST") && g.local(g.bc.at(q + 2).arg) == ".generic_base"))
      ++q;
    if (q + 2 >= n) unexpected("class scope");
    g.bound_locals.push_back({".generic_base", make_marker(ExKind::Dummy, "<generic base>")});
    Stack st;
    if (g.region(j + 1, q, ctx, st, out) != q || g.region(q + 3, n - 1, ctx, st, out) != n - 1 || !out.empty() ||
        st.size() != 1 || st.back()->kind != ExKind::Class)
      unexpected("class scope");
    result = std::make_shared<Ex>(*st.back());
  } else {
    // the function, built below the parameters' tuple
    Stack st{make_marker(ExKind::Dummy, "<type params>")};
    ctx.base = 1;
    if (g.region(j, n - 3, ctx, st, out) != n - 3 || !out.empty() || st.size() != 2 || st.back()->kind != ExKind::Function ||
        st.back()->fn->generic_scope)
      unexpected("function");
    result = std::make_shared<Ex>(*st.back());
  }
  result->fn = std::make_shared<FunctionInfo>(*result->fn);
  result->fn->type_params = params;
  return result;
}

}  // namespace kiln::decompiler
