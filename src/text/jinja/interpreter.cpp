#include "text/jinja/interpreter.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>

#include "text/jinja/budget.h"
#include "text/jinja/globals.h"

namespace epq::text::jinja {
namespace {

constexpr int kMaxCallDepth = 256;
// Statements and expressions being run at once, across macro calls (each recursion is a
// few stack frames): the parser bounds one template's nesting and one expression's
// height, this bounds their sum through macro calls, in levels and in stack bytes (frame
// sizes differ between builds; sanitizers make them several times larger). Rendering
// threads have 8 MiB stacks.
constexpr int kMaxEvalDepth = 4096;
constexpr uintptr_t kMaxStackBytes = 4 << 20;

// Counts one level of evaluation for as long as it lives.
class EvalDepth {
 public:
  EvalDepth(int& depth, uintptr_t stack_base) : depth_(depth) {
    const auto here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    if (depth_ >= kMaxEvalDepth || stack_base - here > kMaxStackBytes) {
      failure("statements and expressions nested too deep through macro calls (over {} levels or {} MiB of stack)", kMaxEvalDepth,
              kMaxStackBytes >> 20);
    }
    ++depth_;
  }
  ~EvalDepth() { --depth_; }
  EvalDepth(const EvalDepth&) = delete;
  EvalDepth& operator=(const EvalDepth&) = delete;

 private:
  int& depth_;
};

struct Scope {
  explicit Scope(std::shared_ptr<Scope> outer) : parent(std::move(outer)) {}
  std::shared_ptr<Scope> parent;
  std::unordered_map<std::string, Value> variables;
};

enum class Flow { Normal, Break, Continue };

bool compare(CompareOp op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOp::Equal: return a == b;
    case CompareOp::NotEqual: return !(a == b);
    case CompareOp::Less: return a.less(b);
    case CompareOp::LessEqual: return a.less(b) || a == b;
    case CompareOp::Greater: return b.less(a);
    case CompareOp::GreaterEqual: return b.less(a) || a == b;
    case CompareOp::In: return contains(b, a);
    case CompareOp::NotIn: return !contains(b, a);
  }
  return false;
}

Value loop_variable(const Array& items, size_t i) {
  const auto n = static_cast<int64_t>(items.size());
  const auto index = static_cast<int64_t>(i);
  Object loop;
  loop.append_unique("index", index + 1);
  loop.append_unique("index0", index);
  loop.append_unique("revindex", n - index);
  loop.append_unique("revindex0", n - index - 1);
  loop.append_unique("first", index == 0);
  loop.append_unique("last", index == n - 1);
  loop.append_unique("length", n);
  loop.append_unique("depth", 1);
  loop.append_unique("depth0", 0);
  if (i > 0) loop.append_unique("previtem", items[i - 1]);
  if (i + 1 < items.size()) loop.append_unique("nextitem", items[i + 1]);
  return loop;
}

// One render. An error anywhere ends it: nothing restores the scope or output after an
// exception, because nothing catches one and carries on.
class Interpreter {
 public:
  Interpreter(const Value& context, const RenderOptions& options) : max_statements_(options.max_statements) {
    auto globals = std::make_shared<Scope>(nullptr);
    const Object functions = make_globals(options);
    for (const auto& [name, value] : functions.entries()) globals->variables[name] = value;
    scope_ = std::make_shared<Scope>(std::move(globals));
    for (const auto& [name, value] : context.object().entries()) scope_->variables[name] = value;
  }

  std::string run(const Body& body) {
    WorkBudget budget(max_statements_ * WorkBudget::kStatement);
    std::string out;
    out_ = &out;
    exec(body);
    return out;
  }

 private:
  Flow exec(const Body& body) {
    for (const Stmt& s : body) {
      const Flow flow = exec(s);
      if (flow != Flow::Normal) return flow;
    }
    return Flow::Normal;
  }

  Flow exec(const Stmt& s) {
    try {
      const EvalDepth depth(eval_depth_, stack_base_);
      step();
      return std::visit([&](const auto& node) { return run(node); }, s.node);
    } catch (const Failure& f) {
      fail_at(s.at, f.what());
    }
  }

  Value eval(const Expr& e) {
    try {
      const EvalDepth depth(eval_depth_, stack_base_);
      return std::visit([&](const auto& node) { return value_of(node); }, e.node);
    } catch (const Failure& f) {
      fail_at(e.at, f.what());
    }
  }

  static void step() { WorkBudget::charge(WorkBudget::kStatement); }

  void emit(std::string_view text) {
    out_->append(text);
    check_bytes(out_->size());
  }

  // The output of a body, rendered aside: block sets and macro calls.
  std::string capture(const Body& body) {
    std::string buffer;
    std::string* const outer = std::exchange(out_, &buffer);
    exec(body);
    out_ = outer;
    return buffer;
  }

  Value lookup(const std::string& name) const {
    for (const Scope* s = scope_.get(); s != nullptr; s = s->parent.get()) {
      const auto it = s->variables.find(name);
      if (it != s->variables.end()) return it->second;
    }
    return {};
  }

  // "a = v" or "a, b = v" (v unpacked), in the innermost scope.
  void assign(const std::vector<std::string>& names, const Value& value) {
    if (names.size() == 1) {
      scope_->variables[names[0]] = value;
      return;
    }
    const Array parts = iterate(value);
    if (parts.size() != names.size()) failure("cannot unpack {} values into {} variables", parts.size(), names.size());
    for (size_t i = 0; i < names.size(); ++i) scope_->variables[names[i]] = parts[i];
  }

  Arguments arguments(const CallArgs& args) {
    Arguments out;
    for (const ExprPtr& e : args.positional) out.positional.push_back(eval(*e));
    for (const auto& [name, e] : args.named) out.named.emplace_back(name, eval(*e));
    return out;
  }

  // -- statements

  Flow run(const stmt::Text& node) {
    emit(node.text);
    return Flow::Normal;
  }

  Flow run(const stmt::Output& node) {
    emit(eval(*node.value).to_string());
    return Flow::Normal;
  }

  Flow run(const stmt::If& node) {
    for (const auto& [condition, body] : node.branches) {
      if (eval(*condition).truthy()) return exec(body);
    }
    return exec(node.otherwise);
  }

  Flow run(const stmt::For& node) {
    Array items = iterate(eval(*node.iterable));
    const std::shared_ptr<Scope> outer = scope_;
    if (node.condition) {
      Array kept;
      for (Value& item : items) {
        scope_ = std::make_shared<Scope>(outer);
        assign(node.targets, item);
        if (eval(*node.condition).truthy()) kept.push_back(std::move(item));
      }
      scope_ = outer;
      items = std::move(kept);
    }
    if (items.empty()) return exec(node.otherwise);
    for (size_t i = 0; i < items.size(); ++i) {
      step();
      scope_ = std::make_shared<Scope>(outer);
      assign(node.targets, items[i]);
      scope_->variables["loop"] = loop_variable(items, i);
      const Flow flow = exec(node.body);
      scope_ = outer;
      if (flow == Flow::Break) break;
    }
    return Flow::Normal;
  }

  Flow run(const stmt::Set& node) {
    const Value value = node.value ? eval(*node.value) : Value(capture(node.body));
    if (node.attribute.empty()) {
      assign(node.names, value);
      return Flow::Normal;
    }
    const Value target = lookup(node.names[0]);
    if (!target.is_object() || !target.object().is_namespace()) {
      failure("cannot set '{}.{}': '{}' is not a namespace()", node.names[0], node.attribute, node.names[0]);
    }
    if (holds(value, target)) failure("cannot set '{}.{}' to a value that holds '{}'", node.names[0], node.attribute, node.names[0]);
    target.object().set(node.attribute, value);
    return Flow::Normal;
  }

  Flow run(const stmt::Macro& node) {
    const std::weak_ptr<Scope> where = scope_;
    scope_->variables[node.name] =
        Function{node.name, [this, &node, where](const Arguments& args) { return call_macro(node, where, args); }};
    return Flow::Normal;
  }

  Flow run(const stmt::Break&) { return Flow::Break; }
  Flow run(const stmt::Continue&) { return Flow::Continue; }

  // A macro sees its arguments, then the variables of the scope it was defined in.
  // Extra arguments go to varargs and kwargs; parameters not given take their defaults,
  // evaluated in the macro's scope, or are undefined.
  Value call_macro(const stmt::Macro& macro, const std::weak_ptr<Scope>& where, const Arguments& args) {
    std::shared_ptr<Scope> parent = where.lock();
    if (!parent) failure("macro '{}' called after the scope that defined it ended", macro.name);
    if (depth_ >= kMaxCallDepth) failure("macro calls nested more than {} deep", kMaxCallDepth);
    auto scope = std::make_shared<Scope>(std::move(parent));
    Array varargs;
    for (size_t i = 0; i < args.positional.size(); ++i) {
      if (i < macro.params.size()) {
        scope->variables[macro.params[i].first] = args.positional[i];
      } else {
        varargs.push_back(args.positional[i]);
      }
    }
    Object kwargs;
    for (const auto& [name, value] : args.named) {
      const std::string& key = name;  // clang 14 cannot capture a structured binding
      const auto param = std::find_if(macro.params.begin(), macro.params.end(), [&](const auto& p) { return p.first == key; });
      if (param == macro.params.end()) {
        kwargs.set(name, value);
      } else if (static_cast<size_t>(param - macro.params.begin()) < args.positional.size()) {
        failure("macro '{}' got multiple values for argument '{}'", macro.name, name);
      } else {
        scope->variables[name] = value;
      }
    }
    scope->variables["varargs"] = std::move(varargs);
    scope->variables["kwargs"] = std::move(kwargs);
    const std::shared_ptr<Scope> caller = std::exchange(scope_, scope);
    ++depth_;
    for (const auto& [name, fallback] : macro.params) {
      if (!scope->variables.contains(name)) scope->variables[name] = fallback ? eval(*fallback) : Value();
    }
    std::string output = capture(macro.body);
    --depth_;
    scope_ = caller;
    return output;
  }

  // -- expressions

  Value value_of(const expr::Literal& node) { return node.value; }
  Value value_of(const expr::Name& node) { return lookup(node.name); }

  Value value_of(const expr::List& node) {
    Array items;
    for (const ExprPtr& e : node.items) items.push_back(eval(*e));
    return items;
  }

  Value value_of(const expr::Dict& node) {
    Object object;
    for (const auto& [key_expr, value_expr] : node.items) {
      const Value key = eval(*key_expr);
      if (!key.is_string()) failure("dict keys must be strings, not '{}'", key.type_name());
      object.set(key.str(), eval(*value_expr));
    }
    return object;
  }

  Value value_of(const expr::Attribute& node) { return get_attribute(eval(*node.object), node.name); }

  Value value_of(const expr::Item& node) {
    const Value object = eval(*node.object);
    return get_item(object, eval(*node.key));
  }

  Value value_of(const expr::Slice& node) {
    const Value object = eval(*node.object);
    const Value start = node.start ? eval(*node.start) : Value();
    const Value stop = node.stop ? eval(*node.stop) : Value();
    const Value step = node.step ? eval(*node.step) : Value();
    return slice(object, start, stop, step);
  }

  Value value_of(const expr::Call& node) {
    Value callee;
    if (const auto* attribute = std::get_if<expr::Attribute>(&node.callee->node)) {
      const Value object = eval(*attribute->object);
      callee = get_attribute(object, attribute->name);
      if (!callee.is_function()) failure("'{}' object has no method '{}'", object.type_name(), attribute->name);
    } else {
      callee = eval(*node.callee);
      const auto* name = std::get_if<expr::Name>(&node.callee->node);
      if (name != nullptr && callee.is_undefined()) failure("'{}' is undefined", name->name);
      if (!callee.is_function()) failure("'{}' object is not callable", callee.type_name());
    }
    return callee.function().call(arguments(node.args));
  }

  Value value_of(const expr::Filter& node) {
    const Value input = eval(*node.input);
    return node.function(input, arguments(node.args));
  }

  Value value_of(const expr::Test& node) {
    const Value input = eval(*node.input);
    return node.function(input, arguments(node.args)) != node.negated;
  }

  Value value_of(const expr::Not& node) { return !eval(*node.operand).truthy(); }
  Value value_of(const expr::Negate& node) { return negate(eval(*node.operand)); }

  Value value_of(const expr::Binary& node) {
    const Value left = eval(*node.left);
    return binary(node.op, left, eval(*node.right));
  }

  Value value_of(const expr::Logical& node) {
    Value left = eval(*node.left);
    if (left.truthy() != node.is_and) return left;
    return eval(*node.right);
  }

  Value value_of(const expr::Compare& node) {
    Value left = eval(*node.first);
    for (const auto& [op, right_expr] : node.rest) {
      Value right = eval(*right_expr);
      if (!compare(op, left, right)) return false;
      left = std::move(right);
    }
    return true;
  }

  Value value_of(const expr::Conditional& node) {
    if (eval(*node.condition).truthy()) return eval(*node.then);
    return node.otherwise ? eval(*node.otherwise) : Value();
  }

  std::shared_ptr<Scope> scope_;
  std::string* out_ = nullptr;
  int depth_ = 0;
  int eval_depth_ = 0;
  // The stack where rendering began (stacks grow down on x86-64).
  const uintptr_t stack_base_ = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  uint64_t max_statements_;
};

}  // namespace

std::string render(const Program& program, const Value& context, const RenderOptions& options) {
  Interpreter interpreter(context, options);
  return interpreter.run(program.body);
}

}  // namespace epq::text::jinja
