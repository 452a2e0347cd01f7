// The syntax tree of a .dg program, with a source location on every node.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/diag.h"

namespace gradc::ast {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Index {  // one item of x[...]: a single index, or a slice start:end
  Loc loc;
  bool is_slice = false;
  ExprPtr start, end;  // either may be null in a slice
};

struct KwArg {
  std::string name;
  Loc loc;
  ExprPtr value;
};

struct Expr {
  Expr() = default;
  Expr(const Expr&) = delete;
  Expr& operator=(const Expr&) = delete;
  ~Expr();  // iterative: a 100k-term chain must not recurse 100k deep
  enum Kind { Number, Name, Unary, Binary, Call, Subscript, List, String } kind;
  Loc loc;
  bool is_int = false;  // Number
  int64_t ival = 0;
  double fval = 0;
  std::string text;           // Name, Call's callee, String's text, or the operator of Unary/Binary
  std::vector<ExprPtr> args;  // operands, positional arguments, list items, or the subscripted value
  std::vector<KwArg> kwargs;  // Call
  std::vector<Index> index;   // Subscript
};

struct Name {
  std::string text;
  Loc loc;
};

struct TypeExpr {
  Loc loc;
  std::string dtype;
  std::vector<ExprPtr> dims;
};

struct Stmt {
  enum Kind { World, Mesh, Size, Input, Assign, Output, For } kind;
  Loc loc;
  std::vector<Name> names;        // targets, outputs, the input's or size's name, or the mesh's axes
  ExprPtr value;                  // the assigned value, the input's or size's default, or world's count
  std::vector<ExprPtr> sizes;     // Mesh: each axis's size
  TypeExpr type;                  // Input
  bool shared = false;            // Input
  std::vector<Name> shared_over;  // Input: shared(dp, ...) names the axes (none: every axis)
  // For: names[0] is the loop variable, `value` the range(...) call, `body` the statements.
  std::vector<Stmt> body;
};

struct Func {
  Name name;
  std::vector<Name> params;
  std::vector<Stmt> body;
  std::vector<ExprPtr> results;
  Loc return_loc;
};

struct Program {
  std::vector<Stmt> stmts;
  std::map<std::string, Func> funcs;
};

}  // namespace gradc::ast

namespace gradc {
ast::Program parse_program(const std::string& text);
}
