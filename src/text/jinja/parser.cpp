#include "text/jinja/parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <utility>

#include "text/jinja/lexer.h"

namespace epq::text::jinja {
namespace {

// Deeper nesting of tags or expressions is refused: it would only exhaust the stack.
// Left-associative chains (1+1+...+1, x|f|f|..., a.b.c...) nest without recursing in
// the parser, so an expression's tree height has its own bound.
constexpr int kMaxNesting = 256;
constexpr int kMaxExpressionHeight = 1024;

std::string describe(const Token& t) {
  switch (t.kind) {
    case TokenKind::Text: return "template text";
    case TokenKind::OutputOpen: return "'{{'";
    case TokenKind::OutputClose: return "'}}'";
    case TokenKind::BlockOpen: return "'{%'";
    case TokenKind::BlockClose: return "'%}'";
    case TokenKind::String: return "a string";
    case TokenKind::End: return "the end of the template";
    default: return "'" + t.text + "'";
  }
}

int height(const ExprPtr& e) { return e ? e->height : 0; }
int height(const std::vector<ExprPtr>& items) {
  int h = 0;
  for (const ExprPtr& e : items) h = std::max(h, height(e));
  return h;
}
int height(const CallArgs& args) {
  int h = height(args.positional);
  for (const auto& [name, e] : args.named) h = std::max(h, height(e));
  return h;
}
template <typename... Parts>
int tallest(const Parts&... parts) {
  return std::max({0, height(parts)...});
}

// The tallest child of each kind of node.
int child_height(const expr::Literal&) { return 0; }
int child_height(const expr::Name&) { return 0; }
int child_height(const expr::List& n) { return height(n.items); }
int child_height(const expr::Dict& n) {
  int h = 0;
  for (const auto& [key, value] : n.items) h = std::max(h, tallest(key, value));
  return h;
}
int child_height(const expr::Attribute& n) { return height(n.object); }
int child_height(const expr::Item& n) { return tallest(n.object, n.key); }
int child_height(const expr::Slice& n) { return tallest(n.object, n.start, n.stop, n.step); }
int child_height(const expr::Call& n) { return tallest(n.callee, n.args); }
int child_height(const expr::Filter& n) { return tallest(n.input, n.args); }
int child_height(const expr::Test& n) { return tallest(n.input, n.args); }
int child_height(const expr::Not& n) { return height(n.operand); }
int child_height(const expr::Negate& n) { return height(n.operand); }
int child_height(const expr::Binary& n) { return tallest(n.left, n.right); }
int child_height(const expr::Logical& n) { return tallest(n.left, n.right); }
int child_height(const expr::Compare& n) {
  int h = height(n.first);
  for (const auto& [op, e] : n.rest) h = std::max(h, height(e));
  return h;
}
int child_height(const expr::Conditional& n) { return tallest(n.condition, n.then, n.otherwise); }

template <typename Node>
ExprPtr make(Location at, Node node) {
  const int h = 1 + child_height(node);
  if (h > kMaxExpressionHeight) fail_at(at, fmt::format("expression nested more than {} levels deep", kMaxExpressionHeight));
  return std::make_unique<Expr>(Expr{at, std::move(node), h});
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Program program() {
    std::string ended;
    return Program{body({}, &ended, {}, "")};
  }

 private:
  class Nesting {
   public:
    Nesting(int& depth, Location at) : depth_(depth) {
      if (++depth_ > kMaxNesting) fail_at(at, fmt::format("nested more than {} levels deep", kMaxNesting));
    }
    ~Nesting() { --depth_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;

   private:
    int& depth_;
  };

  const Token& peek(size_t ahead = 0) const { return tokens_[std::min(i_ + ahead, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& t = tokens_[i_];
    if (i_ + 1 < tokens_.size()) ++i_;
    return t;
  }
  bool is_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::Operator && peek(ahead).text == op;
  }
  bool is_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::Name && peek(ahead).text == name;
  }
  bool skip_op(std::string_view op) { return is_op(op) && (next(), true); }
  bool skip_name(std::string_view name) { return is_name(name) && (next(), true); }

  [[noreturn]] void unexpected(std::string_view expected) const {
    fail_at(peek().at, fmt::format("expected {}, got {}", expected, describe(peek())));
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) unexpected(fmt::format("'{}'", op));
  }
  std::string expect_name(std::string_view what) {
    if (peek().kind != TokenKind::Name) unexpected(what);
    return next().text;
  }
  void expect_close() {
    if (peek().kind != TokenKind::BlockClose) unexpected("'%}'");
    next();
  }

  // Statements up to "{% end" for an `end` in ends (consumed up to the name, which goes
  // to *ended), or to the end of the template when ends is empty. The last of ends names
  // the closing tag for the error when it is missing.
  Body body(std::initializer_list<std::string_view> ends, std::string* ended, Location opened, std::string_view opener) {
    Nesting nesting(depth_, peek().at);
    Body out;
    while (true) {
      const Token& t = peek();
      switch (t.kind) {
        case TokenKind::End:
          if (ends.size() > 0) fail_at(opened, fmt::format("'{}' is never closed (missing {{% {} %}})", opener, *(ends.end() - 1)));
          return out;
        case TokenKind::Text:
          out.push_back(Stmt{t.at, stmt::Text{t.text}});
          next();
          break;
        case TokenKind::OutputOpen: {
          const Location at = next().at;
          ExprPtr value = tuple_or_expression(true);
          if (peek().kind != TokenKind::OutputClose) unexpected("'}}'");
          next();
          out.push_back(Stmt{at, stmt::Output{std::move(value)}});
          break;
        }
        case TokenKind::BlockOpen:
          if (peek(1).kind == TokenKind::Name && std::find(ends.begin(), ends.end(), peek(1).text) != ends.end()) {
            next();
            *ended = next().text;
            return out;
          }
          statement(out);
          break;
        default: unexpected("text or a tag");
      }
    }
  }

  void statement(Body& out) {
    const Location at = next().at;
    const Token& name = peek();
    const std::string tag = expect_name("a tag name");
    if (tag == "if") {
      out.push_back(Stmt{at, if_statement(at)});
    } else if (tag == "for") {
      out.push_back(Stmt{at, for_statement(at)});
    } else if (tag == "set") {
      out.push_back(Stmt{at, set_statement(at)});
    } else if (tag == "macro") {
      out.push_back(Stmt{at, macro_statement(at)});
    } else if (tag == "break" || tag == "continue") {
      if (loops_ == 0) fail_at(name.at, fmt::format("'{}' outside of a for loop", tag));
      expect_close();
      if (tag == "break") {
        out.push_back(Stmt{at, stmt::Break{}});
      } else {
        out.push_back(Stmt{at, stmt::Continue{}});
      }
    } else if (tag == "generation") {  // HuggingFace marks assistant text with it
      expect_close();
      std::string ended;
      Body inner = body({"endgeneration"}, &ended, at, tag);
      expect_close();
      std::move(inner.begin(), inner.end(), std::back_inserter(out));
    } else if (tag == "call" || tag == "filter" || tag == "include" || tag == "import" || tag == "from" || tag == "extends" ||
               tag == "block" || tag == "with" || tag == "autoescape" || tag == "do") {
      fail_at(name.at, fmt::format("the '{}' tag is not supported", tag));
    } else if (tag.starts_with("end") || tag == "elif" || tag == "else") {
      fail_at(name.at, fmt::format("unexpected '{{% {} %}}'", tag));
    } else {
      fail_at(name.at, fmt::format("unknown tag '{}'", tag));
    }
  }

  stmt::If if_statement(Location at) {
    stmt::If node;
    ExprPtr condition = expression(true);
    expect_close();
    while (true) {
      std::string ended;
      Body branch = body({"elif", "else", "endif"}, &ended, at, "if");
      node.branches.emplace_back(std::move(condition), std::move(branch));
      if (ended == "elif") {
        condition = expression(true);
        expect_close();
        continue;
      }
      if (ended == "else") {
        expect_close();
        node.otherwise = body({"endif"}, &ended, at, "if");
      }
      expect_close();
      return node;
    }
  }

  stmt::For for_statement(Location at) {
    stmt::For node;
    const bool parenthesized = skip_op("(");
    do {
      node.targets.push_back(expect_name("a loop variable"));
    } while (skip_op(","));
    if (parenthesized) expect_op(")");
    if (!skip_name("in")) unexpected("'in'");
    node.iterable = tuple_or_expression(false);
    if (skip_name("if")) node.condition = expression(true);
    if (is_name("recursive")) fail_at(peek().at, "recursive loops are not supported");
    expect_close();
    std::string ended;
    ++loops_;
    node.body = body({"else", "endfor"}, &ended, at, "for");
    --loops_;
    if (ended == "else") {
      expect_close();
      node.otherwise = body({"endfor"}, &ended, at, "for");
    }
    expect_close();
    return node;
  }

  stmt::Set set_statement(Location at) {
    stmt::Set node;
    node.names.push_back(expect_name("a variable name"));
    if (skip_op(".")) {
      node.attribute = expect_name("an attribute name");
    } else {
      while (skip_op(",")) node.names.push_back(expect_name("a variable name"));
    }
    if (skip_op("=")) {
      node.value = tuple_or_expression(true);
      expect_close();
      return node;
    }
    if (node.names.size() > 1) unexpected("'='");
    expect_close();
    std::string ended;
    node.body = body({"endset"}, &ended, at, "set");
    expect_close();
    return node;
  }

  stmt::Macro macro_statement(Location at) {
    stmt::Macro node;
    node.name = expect_name("a macro name");
    expect_op("(");
    while (!skip_op(")")) {
      const Location param_at = peek().at;
      std::string param = expect_name("a parameter name");
      ExprPtr fallback;
      if (skip_op("=")) {
        fallback = expression(true);
      } else if (!node.params.empty() && node.params.back().second) {
        fail_at(param_at, "non-default argument follows default argument");
      }
      node.params.emplace_back(std::move(param), std::move(fallback));
      if (!is_op(")")) expect_op(",");
    }
    expect_close();
    const int loops = std::exchange(loops_, 0);
    std::string ended;
    node.body = body({"endmacro"}, &ended, at, "macro");
    loops_ = loops;
    expect_close();
    return node;
  }

  // "a, b" makes a tuple (a list) where Jinja allows one: output, set and for.
  ExprPtr tuple_or_expression(bool with_condition) {
    ExprPtr first = expression(with_condition);
    if (!is_op(",")) return first;
    const Location at = first->at;
    expr::List tuple;
    tuple.items.push_back(std::move(first));
    while (skip_op(",")) {
      if (peek().kind == TokenKind::BlockClose || peek().kind == TokenKind::OutputClose) break;
      tuple.items.push_back(expression(with_condition));
    }
    return make(at, std::move(tuple));
  }

  ExprPtr expression(bool with_condition) {
    Nesting nesting(depth_, peek().at);
    ExprPtr e = or_expression();
    while (with_condition && is_name("if")) {
      const Location at = next().at;
      ExprPtr condition = or_expression();
      ExprPtr otherwise = skip_name("else") ? expression(true) : nullptr;
      e = make(at, expr::Conditional{std::move(condition), std::move(e), std::move(otherwise)});
    }
    return e;
  }

  ExprPtr or_expression() {
    ExprPtr left = and_expression();
    while (is_name("or")) {
      const Location at = next().at;
      left = make(at, expr::Logical{false, std::move(left), and_expression()});
    }
    return left;
  }

  ExprPtr and_expression() {
    ExprPtr left = not_expression();
    while (is_name("and")) {
      const Location at = next().at;
      left = make(at, expr::Logical{true, std::move(left), not_expression()});
    }
    return left;
  }

  ExprPtr not_expression() {
    if (!is_name("not")) return comparison();
    Nesting nesting(depth_, peek().at);
    const Location at = next().at;
    return make(at, expr::Not{not_expression()});
  }

  ExprPtr comparison() {
    static constexpr std::pair<std::string_view, CompareOp> kOperators[] = {
        {"==", CompareOp::Equal}, {"!=", CompareOp::NotEqual},  {"<", CompareOp::Less},
        {"<=", CompareOp::LessEqual}, {">", CompareOp::Greater}, {">=", CompareOp::GreaterEqual}};
    ExprPtr first = additive();
    expr::Compare node;
    while (true) {
      CompareOp op;
      const auto* match = std::find_if(std::begin(kOperators), std::end(kOperators), [&](const auto& o) { return is_op(o.first); });
      if (match != std::end(kOperators)) {
        op = match->second;
      } else if (is_name("in")) {
        op = CompareOp::In;
      } else if (is_name("not") && is_name("in", 1)) {
        next();
        op = CompareOp::NotIn;
      } else {
        break;
      }
      next();
      node.rest.emplace_back(op, additive());
    }
    if (node.rest.empty()) return first;
    const Location at = first->at;
    node.first = std::move(first);
    return make(at, std::move(node));
  }

  ExprPtr binary_level(ExprPtr (Parser::*operand)(), std::initializer_list<std::pair<std::string_view, BinaryOp>> ops) {
    ExprPtr left = (this->*operand)();
    while (true) {
      const auto* match = std::find_if(ops.begin(), ops.end(), [&](const auto& o) { return is_op(o.first); });
      if (match == ops.end()) return left;
      const Location at = next().at;
      ExprPtr right = (this->*operand)();
      left = make(at, expr::Binary{match->second, std::move(left), std::move(right)});
    }
  }

  ExprPtr additive() { return binary_level(&Parser::concatenation, {{"+", BinaryOp::Add}, {"-", BinaryOp::Subtract}}); }
  ExprPtr concatenation() { return binary_level(&Parser::multiplicative, {{"~", BinaryOp::Concat}}); }
  ExprPtr multiplicative() {
    return binary_level(&Parser::power, {{"*", BinaryOp::Multiply},
                                         {"/", BinaryOp::Divide},
                                         {"//", BinaryOp::FloorDivide},
                                         {"%", BinaryOp::Modulo}});
  }
  ExprPtr power() { return binary_level(&Parser::unary_with_filters, {{"**", BinaryOp::Power}}); }
  ExprPtr unary_with_filters() { return unary(true); }

  // Jinja binds unary minus tighter than filters and **: -x|abs is abs(-x), -2**2 is 4.
  ExprPtr unary(bool with_filters) {
    Nesting nesting(depth_, peek().at);
    const Location at = peek().at;
    ExprPtr node;
    if (skip_op("-")) {
      node = make(at, expr::Negate{unary(false)});
    } else if (skip_op("+")) {
      node = unary(false);
    } else {
      node = primary();
    }
    node = postfix(std::move(node));
    return with_filters ? filters_and_tests(std::move(node)) : std::move(node);
  }

  ExprPtr primary() {
    const Token& t = peek();
    const Location at = t.at;
    switch (t.kind) {
      case TokenKind::Name: {
        const std::string name = next().text;
        if (name == "true" || name == "True") return make(at, expr::Literal{true});
        if (name == "false" || name == "False") return make(at, expr::Literal{false});
        if (name == "none" || name == "None") return make(at, expr::Literal{nullptr});
        return make(at, expr::Name{name});
      }
      case TokenKind::String: {
        std::string s;
        while (peek().kind == TokenKind::String) s += next().text;  // "a" "b" is "ab"
        try {
          return make(at, expr::Literal{Value(std::move(s))});
        } catch (const Failure& f) {
          fail_at(at, f.what());
        }
      }
      case TokenKind::Integer: {
        const std::string& digits = next().text;
        int64_t value = 0;
        const auto result = std::from_chars(digits.data(), digits.data() + digits.size(), value);
        if (result.ec != std::errc()) fail_at(at, "integer literal too large");
        return make(at, expr::Literal{value});
      }
      case TokenKind::Float: return make(at, expr::Literal{std::strtod(next().text.c_str(), nullptr)});
      case TokenKind::Operator:
        if (skip_op("(")) {
          if (skip_op(")")) return make(at, expr::List{});
          ExprPtr e = expression(true);
          if (is_op(",")) {
            expr::List tuple;
            tuple.items.push_back(std::move(e));
            while (skip_op(",") && !is_op(")")) tuple.items.push_back(expression(true));
            e = make(at, std::move(tuple));
          }
          expect_op(")");
          return e;
        }
        if (skip_op("[")) {
          expr::List list;
          while (!skip_op("]")) {
            list.items.push_back(expression(true));
            if (!is_op("]")) expect_op(",");
          }
          return make(at, std::move(list));
        }
        if (skip_op("{")) {
          expr::Dict dict;
          while (!skip_op("}")) {
            ExprPtr key = expression(true);
            expect_op(":");
            dict.items.emplace_back(std::move(key), expression(true));
            if (!is_op("}")) expect_op(",");
          }
          return make(at, std::move(dict));
        }
        break;
      default: break;
    }
    unexpected("an expression");
  }

  ExprPtr postfix(ExprPtr node) {
    while (true) {
      const Location at = peek().at;
      if (skip_op(".")) {
        if (peek().kind == TokenKind::Integer) {  // items.0
          ExprPtr index = primary();
          node = make(at, expr::Item{std::move(node), std::move(index)});
        } else {
          node = make(at, expr::Attribute{std::move(node), expect_name("an attribute name")});
        }
      } else if (skip_op("[")) {
        node = subscript(std::move(node), at);
      } else if (is_op("(")) {
        node = make(at, expr::Call{std::move(node), call_args()});
      } else {
        return node;
      }
    }
  }

  ExprPtr subscript(ExprPtr object, Location at) {
    ExprPtr start, stop, step;
    bool is_slice = false;
    if (!is_op(":")) start = expression(true);
    if (skip_op(":")) {
      is_slice = true;
      if (!is_op("]") && !is_op(":")) stop = expression(true);
      if (skip_op(":") && !is_op("]")) step = expression(true);
    }
    expect_op("]");
    if (is_slice) return make(at, expr::Slice{std::move(object), std::move(start), std::move(stop), std::move(step)});
    return make(at, expr::Item{std::move(object), std::move(start)});
  }

  CallArgs call_args() {
    CallArgs args;
    expect_op("(");
    while (!skip_op(")")) {
      if (peek().kind == TokenKind::Name && is_op("=", 1)) {
        std::string name = next().text;
        next();
        args.named.emplace_back(std::move(name), expression(true));
      } else {
        if (!args.named.empty()) fail_at(peek().at, "positional argument follows keyword argument");
        args.positional.push_back(expression(true));
      }
      if (!is_op(")")) expect_op(",");
    }
    return args;
  }

  // "x is test 3" passes one argument without parentheses, as Jinja allows.
  bool starts_bare_test_argument() const {
    const Token& t = peek();
    if (t.kind == TokenKind::Name) {
      return t.text != "else" && t.text != "or" && t.text != "and" && t.text != "if" && t.text != "is" && t.text != "in" &&
             t.text != "not";
    }
    return t.kind == TokenKind::String || t.kind == TokenKind::Integer || t.kind == TokenKind::Float || is_op("[") || is_op("{");
  }

  ExprPtr filters_and_tests(ExprPtr node) {
    while (true) {
      if (skip_op("|")) {
        const Location at = peek().at;
        const std::string name = expect_name("a filter name");
        const Filter function = find_filter(name);
        if (function == nullptr) fail_at(at, fmt::format("unknown filter '{}'", name));
        CallArgs args;
        if (is_op("(")) args = call_args();
        node = make(at, expr::Filter{std::move(node), function, std::move(args)});
      } else if (skip_name("is")) {
        const bool negated = skip_name("not");
        const Location at = peek().at;
        const std::string name = expect_name("a test name");
        const Test function = find_test(name);
        if (function == nullptr) fail_at(at, fmt::format("unknown test '{}'", name));
        CallArgs args;
        if (is_op("(")) {
          args = call_args();
        } else if (starts_bare_test_argument()) {
          args.positional.push_back(postfix(primary()));
        }
        node = make(at, expr::Test{std::move(node), function, std::move(args), negated});
      } else if (is_op("(")) {
        const Location at = peek().at;
        node = make(at, expr::Call{std::move(node), call_args()});
      } else {
        return node;
      }
    }
  }

  std::vector<Token> tokens_;
  size_t i_ = 0;
  int depth_ = 0;
  int loops_ = 0;  // for loops around the statement being parsed, within the same macro
};

}  // namespace

Program parse(std::string_view source) { return Parser(tokenize(source)).program(); }

}  // namespace epq::text::jinja
