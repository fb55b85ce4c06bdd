// The statement tree the structurer builds and the source printer prints: simple lines and
// compound statements (a header, a body and continuation clauses such as elif/else/except).
#pragma once
#include <string>
#include <vector>

#include "frontend/decompiler/expr.h"

namespace kiln::decompiler {

struct Stmt {
  enum class Kind { Line, If, For, While, Try, With, Def, Break, Continue, Return, Raise, Append, Match, Case };
  Kind kind = Kind::Line;
  std::string text;           // Line: the statement; compound: the header without ':'
  std::vector<Stmt> body;
  struct Clause {
    std::string header;       // "else", "elif c", "except E as e", "finally"
    std::vector<Stmt> body;
  };
  std::vector<Clause> clauses;
  ExP e1, e2, e3;             // If: cond; For: iter (e1), target text in `target`; Return: value;
                              // Append: value (e1) and key (e2) of a comprehension element
  std::string target;         // For: the loop target
  int acc_id = 0;             // Append: which accumulator
  bool is_yield = false;      // Append: a generator expression's yield
};

Stmt line(std::string text);
// True when control cannot fall off the end of the statements.
bool ends_flow(const std::vector<Stmt>& body);
// Indented source of a statement list (empty bodies print `pass`; else-if chains print elif).
std::string print_block(const std::vector<Stmt>& body, int indent);

}  // namespace kiln::decompiler
