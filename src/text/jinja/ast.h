#pragma once
// The parsed form of a template: statements (text, {{ output }}, if, for, set, macro,
// break, continue) holding expressions. Every node records where it starts, for errors.
// Filters and tests are resolved to their functions when parsing.
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "text/jinja/error.h"
#include "text/jinja/filters.h"
#include "text/jinja/operations.h"
#include "text/jinja/value.h"

namespace epq::text::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct CallArgs {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> named;
};

enum class CompareOp { Equal, NotEqual, Less, LessEqual, Greater, GreaterEqual, In, NotIn };

namespace expr {
struct Literal { Value value; };
struct Name { std::string name; };
struct List { std::vector<ExprPtr> items; };  // also tuples
struct Dict { std::vector<std::pair<ExprPtr, ExprPtr>> items; };
struct Attribute { ExprPtr object; std::string name; };
struct Item { ExprPtr object; ExprPtr key; };
struct Slice { ExprPtr object, start, stop, step; };  // omitted bounds are null
struct Call { ExprPtr callee; CallArgs args; };
struct Filter { ExprPtr input; jinja::Filter function; CallArgs args; };
struct Test { ExprPtr input; jinja::Test function; CallArgs args; bool negated; };
struct Not { ExprPtr operand; };
struct Negate { ExprPtr operand; };
struct Binary { BinaryOp op; ExprPtr left, right; };
struct Logical { bool is_and; ExprPtr left, right; };  // returns the deciding operand, as Python
struct Compare { ExprPtr first; std::vector<std::pair<CompareOp, ExprPtr>> rest; };  // a < b <= c
struct Conditional { ExprPtr condition, then, otherwise; };  // no else: undefined
}  // namespace expr

struct Expr {
  Location at;
  std::variant<expr::Literal, expr::Name, expr::List, expr::Dict, expr::Attribute, expr::Item, expr::Slice, expr::Call,
               expr::Filter, expr::Test, expr::Not, expr::Negate, expr::Binary, expr::Logical, expr::Compare,
               expr::Conditional>
      node;
  // Nodes on the longest path down from this one, itself included: evaluating and
  // destroying the tree recurse this deep, so the parser bounds it.
  int height = 1;
};

struct Stmt;
using Body = std::vector<Stmt>;

namespace stmt {
struct Text { std::string text; };
struct Output { ExprPtr value; };
struct If { std::vector<std::pair<ExprPtr, Body>> branches; Body otherwise; };
struct For {
  std::vector<std::string> targets;  // several: each item is unpacked into them
  ExprPtr iterable;
  ExprPtr condition;  // "for x in xs if cond": null when absent
  Body body;
  Body otherwise;  // runs when no item was visited
};
struct Set {
  std::vector<std::string> names;  // several: the value is unpacked into them
  std::string attribute;           // "set ns.attribute = ...": names holds ns alone
  ExprPtr value;                   // null for a block set, whose value is the body's output
  Body body;
};
struct Macro {
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default null when there is none
  Body body;
};
struct Break {};
struct Continue {};
}  // namespace stmt

struct Stmt {
  Location at;
  std::variant<stmt::Text, stmt::Output, stmt::If, stmt::For, stmt::Set, stmt::Macro, stmt::Break, stmt::Continue> node;
};

struct Program {
  Body body;
};

}  // namespace epq::text::jinja
