// Recursive-descent Jinja parser (see parser.hpp); the precedence ladder mirrors
// jinja2/parser.py: condexpr < or < and < not < compare < + - < ~ < * / // % < ** < unary <
// postfix (. [] ()) and filters / tests.
#include "runtime/tokenizer/jinja/parser.hpp"

#include <set>

#include "runtime/core/error.hpp"

namespace troupe::jinja {

namespace {

class parser {
 public:
  explicit parser(std::vector<token> toks) : t_(std::move(toks)) {}

  body parse_template() {
    std::string end;
    body b = parse_body({}, end);
    if (peek().kind != token_kind::end) fail("unexpected tag");
    return b;
  }

 private:
  // ---- token helpers ----
  const token& peek(size_t ahead = 0) const {
    size_t i = std::min(pos_ + ahead, t_.size() - 1);
    return t_[i];
  }
  const token& next() {
    const token& tk = t_[pos_];
    if (pos_ + 1 < t_.size()) ++pos_;
    return tk;
  }
  bool is_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).kind == token_kind::op && peek(ahead).text == op;
  }
  bool is_name(const char* n, size_t ahead = 0) const {
    return peek(ahead).kind == token_kind::name && peek(ahead).text == n;
  }
  bool accept_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool accept_name(const char* n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  [[noreturn]] void fail(const std::string& what) const {
    const token& tk = peek();
    std::string got = tk.kind == token_kind::end         ? "end of template"
                      : tk.kind == token_kind::block_end ? "'%}'"
                      : tk.kind == token_kind::var_end   ? "'}}'"
                                                         : "'" + tk.text + "'";
    throw_error(errc::unsupported, "chat template line " + std::to_string(tk.line) + ": " + what + " (at " + got + ")");
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) fail(std::string("expected '") + op + "'");
  }
  std::string expect_name() {
    if (peek().kind != token_kind::name) fail("expected a name");
    return next().text;
  }
  void expect_block_end() {
    if (peek().kind != token_kind::block_end) fail("expected '%}'");
    next();
  }
  template <class T>
  std::unique_ptr<T> make() {
    auto n = std::make_unique<T>();
    n->line = peek().line;
    return n;
  }

  // ---- statements ----
  // Parses statements until a block tag whose keyword is in `ends`; leaves that keyword in `end`
  // (the tag's '{%' and keyword consumed, the rest of the tag not).
  body parse_body(const std::set<std::string>& ends, std::string& end) {
    body b;
    while (true) {
      const token& tk = peek();
      if (tk.kind == token_kind::end) {
        if (!ends.empty()) {
          std::string closer = *ends.begin();
          for (const std::string& e : ends)
            if (e.rfind("end", 0) == 0) closer = e;
          fail("missing {% " + closer + " %}");
        }
        return b;
      }
      if (tk.kind == token_kind::text) {
        auto s = make<text_stmt>();
        s->text = next().text;
        b.push_back(std::move(s));
      } else if (tk.kind == token_kind::var_begin) {
        next();
        auto s = make<output_stmt>();
        s->e = parse_tuple();
        if (peek().kind != token_kind::var_end) fail("expected '}}'");
        next();
        b.push_back(std::move(s));
      } else if (tk.kind == token_kind::block_begin) {
        next();
        if (peek().kind != token_kind::name) fail("expected a tag name");
        std::string kw = peek().text;
        if (ends.count(kw)) {
          next();
          end = kw;
          return b;
        }
        b.push_back(parse_statement());
      } else {
        fail("unexpected token");
      }
    }
  }

  stmt_ptr parse_statement() {
    std::string kw = peek().text;
    if (kw == "if") return parse_if();
    if (kw == "for") return parse_for();
    if (kw == "set") return parse_set();
    if (kw == "macro") return parse_macro();
    if (kw == "break" || kw == "continue") {
      auto s = make<loop_control_stmt>();
      next();
      s->is_break = kw == "break";
      expect_block_end();
      return s;
    }
    if (kw == "generation") {
      auto s = make<block_stmt>();
      next();
      expect_block_end();
      std::string end;
      s->inner = parse_body({"endgeneration"}, end);
      expect_block_end();
      return s;
    }
    fail("unsupported tag '" + kw + "' (Troupe's Jinja subset: if, for, set, macro, break, continue, generation)");
  }

  stmt_ptr parse_if() {
    auto s = make<if_stmt>();
    next();  // if
    while (true) {
      expr_ptr cond = parse_tuple();
      expect_block_end();
      std::string end;
      body b = parse_body({"elif", "else", "endif"}, end);
      s->branches.emplace_back(std::move(cond), std::move(b));
      if (end == "elif") continue;
      if (end == "else") {
        expect_block_end();
        s->otherwise = parse_body({"endif"}, end);
      }
      expect_block_end();
      return s;
    }
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    bool paren = accept_op("(");
    names.push_back(expect_name());
    while (accept_op(",")) {
      if (peek().kind != token_kind::name) break;
      names.push_back(expect_name());
    }
    if (paren) expect_op(")");
    return names;
  }

  stmt_ptr parse_for() {
    auto s = make<for_stmt>();
    next();  // for
    s->targets = parse_targets();
    if (!accept_name("in")) fail("expected 'in'");
    s->iter = parse_tuple(/*with_condexpr=*/false);
    if (accept_name("if")) s->filter = parse_tuple();
    if (is_name("recursive")) fail("recursive loops are not supported");
    expect_block_end();
    std::string end;
    s->loop_body = parse_body({"else", "endfor"}, end);
    if (end == "else") {
      expect_block_end();
      s->otherwise = parse_body({"endfor"}, end);
    }
    expect_block_end();
    return s;
  }

  stmt_ptr parse_set() {
    auto s = make<set_stmt>();
    next();  // set
    std::string first = expect_name();
    s->targets.push_back(first);
    if (accept_op(".")) {
      s->attr = expect_name();
    } else {
      while (accept_op(",")) s->targets.push_back(expect_name());
    }
    if (accept_op("=")) {
      s->e = parse_tuple();
      expect_block_end();
      return s;
    }
    if (!s->attr.empty() || s->targets.size() != 1) fail("expected '='");
    expect_block_end();
    std::string end;
    s->captured = parse_body({"endset"}, end);
    expect_block_end();
    return s;
  }

  stmt_ptr parse_macro() {
    auto s = make<macro_stmt>();
    next();  // macro
    s->name = expect_name();
    expect_op("(");
    if (!is_op(")")) {
      do {
        std::string p = expect_name();
        expr_ptr def;
        if (accept_op("=")) def = parse_expression();
        s->params.emplace_back(std::move(p), std::move(def));
      } while (accept_op(","));
    }
    expect_op(")");
    expect_block_end();
    std::string end;
    s->macro_body = parse_body({"endmacro"}, end);
    if (peek().kind == token_kind::name) next();  // {% endmacro name %}
    expect_block_end();
    return s;
  }

  // ---- expressions ----
  // A comma-separated list without brackets is a tuple (as in `{% set a = 1, 2 %}`).
  expr_ptr parse_tuple(bool with_condexpr = true) {
    int line = peek().line;
    expr_ptr first = with_condexpr ? parse_expression() : parse_or();
    if (!is_op(",")) return first;
    auto l = std::make_unique<list_expr>();
    l->line = line;
    l->items.push_back(std::move(first));
    while (accept_op(",")) {
      if (peek().kind == token_kind::block_end || peek().kind == token_kind::var_end) break;
      l->items.push_back(with_condexpr ? parse_expression() : parse_or());
    }
    return l;
  }

  expr_ptr parse_expression() {
    expr_ptr e = parse_or();
    while (is_name("if")) {
      auto c = make<cond_expr>();
      next();
      c->cond = parse_or();
      if (accept_name("else")) c->otherwise = parse_expression();
      c->then = std::move(e);
      e = std::move(c);
    }
    return e;
  }

  expr_ptr binary(const std::string& op, expr_ptr l, expr_ptr r, int line) {
    auto b = std::make_unique<binary_expr>();
    b->line = line;
    b->op = op;
    b->left = std::move(l);
    b->right = std::move(r);
    return b;
  }

  expr_ptr parse_or() {
    expr_ptr e = parse_and();
    while (is_name("or")) {
      int line = next().line;
      e = binary("or", std::move(e), parse_and(), line);
    }
    return e;
  }

  expr_ptr parse_and() {
    expr_ptr e = parse_not();
    while (is_name("and")) {
      int line = next().line;
      e = binary("and", std::move(e), parse_not(), line);
    }
    return e;
  }

  expr_ptr parse_not() {
    if (is_name("not")) {
      auto u = make<unary_expr>();
      next();
      u->op = "not";
      u->operand = parse_not();
      return u;
    }
    return parse_compare();
  }

  expr_ptr parse_compare() {
    int line = peek().line;
    expr_ptr e = parse_math1();
    std::unique_ptr<compare_expr> c;
    while (true) {
      std::string op;
      if (peek().kind == token_kind::op &&
          (peek().text == "==" || peek().text == "!=" || peek().text == "<" || peek().text == "<=" ||
           peek().text == ">" || peek().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      if (!c) {
        c = std::make_unique<compare_expr>();
        c->line = line;
        c->first = std::move(e);
      }
      c->rest.emplace_back(op, parse_math1());
    }
    if (c) return c;
    return e;
  }

  expr_ptr parse_math1() {
    expr_ptr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const token& tk = next();
      e = binary(tk.text, std::move(e), parse_concat(), tk.line);
    }
    return e;
  }

  expr_ptr parse_concat() {
    expr_ptr e = parse_math2();
    while (is_op("~")) {
      int line = next().line;
      e = binary("~", std::move(e), parse_math2(), line);
    }
    return e;
  }

  expr_ptr parse_math2() {
    expr_ptr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const token& tk = next();
      e = binary(tk.text, std::move(e), parse_pow(), tk.line);
    }
    return e;
  }

  expr_ptr parse_pow() {
    expr_ptr e = parse_unary();
    while (is_op("**")) {
      int line = next().line;
      e = binary("**", std::move(e), parse_unary(), line);
    }
    return e;
  }

  expr_ptr parse_unary(bool with_filter = true) {
    expr_ptr e;
    if (is_op("-") || is_op("+")) {
      auto u = make<unary_expr>();
      u->op = next().text;
      u->operand = parse_unary(false);
      e = std::move(u);
    } else {
      e = parse_postfix(parse_primary());
    }
    if (with_filter) e = parse_filters(std::move(e));
    return e;
  }

  expr_ptr parse_primary() {
    const token& tk = peek();
    if (tk.kind == token_kind::name) {
      next();
      const std::string& n = tk.text;
      auto lit = std::make_unique<literal_expr>();
      lit->line = tk.line;
      if (n == "true" || n == "True") lit->val = value(true);
      else if (n == "false" || n == "False") lit->val = value(false);
      else if (n == "none" || n == "None") lit->val = value(none{});
      else {
        auto ne = std::make_unique<name_expr>();
        ne->line = tk.line;
        ne->name = n;
        return ne;
      }
      return lit;
    }
    if (tk.kind == token_kind::string) {
      auto lit = make<literal_expr>();
      std::string s = next().text;
      while (peek().kind == token_kind::string) s += next().text;  // adjacent literals concatenate
      lit->val = value(std::move(s));
      return lit;
    }
    if (tk.kind == token_kind::integer || tk.kind == token_kind::floating) {
      auto lit = make<literal_expr>();
      const token& num = next();
      try {
        if (num.kind == token_kind::integer) lit->val = value(static_cast<int64_t>(std::stoll(num.text)));
        else lit->val = value(std::stod(num.text));
      } catch (const std::exception&) {
        fail("number out of range");
      }
      return lit;
    }
    if (accept_op("(")) {
      if (accept_op(")")) return std::make_unique<list_expr>();  // empty tuple
      int line = peek().line;
      expr_ptr first = parse_expression();
      if (accept_op(")")) return first;
      auto l = std::make_unique<list_expr>();
      l->line = line;
      l->items.push_back(std::move(first));
      while (accept_op(",")) {
        if (is_op(")")) break;
        l->items.push_back(parse_expression());
      }
      expect_op(")");
      return l;
    }
    if (accept_op("[")) {
      auto l = make<list_expr>();
      while (!is_op("]")) {
        l->items.push_back(parse_expression());
        if (!accept_op(",")) break;
      }
      expect_op("]");
      return l;
    }
    if (accept_op("{")) {
      auto d = make<dict_expr>();
      while (!is_op("}")) {
        expr_ptr k = parse_expression();
        expect_op(":");
        d->items.emplace_back(std::move(k), parse_expression());
        if (!accept_op(",")) break;
      }
      expect_op("}");
      return d;
    }
    fail("expected an expression");
  }

  arg_list parse_args() {  // after '('
    arg_list a;
    while (!is_op(")")) {
      if (peek().kind == token_kind::name && is_op("=", 1)) {
        std::string k = next().text;
        next();
        a.named.emplace_back(std::move(k), parse_expression());
      } else {
        if (!a.named.empty()) fail("positional argument after a keyword argument");
        a.positional.push_back(parse_expression());
      }
      if (!accept_op(",")) break;
    }
    expect_op(")");
    return a;
  }

  expr_ptr parse_postfix(expr_ptr e) {
    while (true) {
      if (is_op(".")) {
        int line = next().line;
        if (peek().kind == token_kind::integer) {  // x.0 is x[0]
          auto it = std::make_unique<item_expr>();
          it->line = line;
          it->obj = std::move(e);
          auto lit = std::make_unique<literal_expr>();
          try {
            lit->val = value(static_cast<int64_t>(std::stoll(peek().text)));
          } catch (const std::exception&) {
            fail("index out of range");
          }
          next();
          it->index = std::move(lit);
          e = std::move(it);
          continue;
        }
        auto a = std::make_unique<attr_expr>();
        a->line = line;
        a->obj = std::move(e);
        a->name = expect_name();
        e = std::move(a);
      } else if (is_op("[")) {
        int line = next().line;
        expr_ptr parts[3];
        int colons = 0;
        while (!is_op("]")) {
          if (accept_op(":")) {
            if (++colons > 2) fail("too many ':' in a slice");
            continue;
          }
          if (parts[colons]) fail("expected ':' or ']'");
          parts[colons] = parse_expression();
        }
        next();  // ]
        if (colons == 0) {
          if (!parts[0]) fail("empty subscript");
          auto it = std::make_unique<item_expr>();
          it->line = line;
          it->obj = std::move(e);
          it->index = std::move(parts[0]);
          e = std::move(it);
        } else {
          auto sl = std::make_unique<slice_expr>();
          sl->line = line;
          sl->obj = std::move(e);
          sl->start = std::move(parts[0]);
          sl->stop = std::move(parts[1]);
          sl->step = std::move(parts[2]);
          e = std::move(sl);
        }
      } else if (is_op("(")) {
        int line = next().line;
        auto c = std::make_unique<call_expr>();
        c->line = line;
        c->callee = std::move(e);
        c->args = parse_args();
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  expr_ptr parse_filters(expr_ptr e) {
    while (true) {
      if (is_op("|")) {
        int line = next().line;
        auto f = std::make_unique<filter_expr>();
        f->line = line;
        f->operand = std::move(e);
        f->name = expect_name();
        while (accept_op(".")) {
          f->name.push_back('.');
          f->name.append(expect_name());
        }
        if (accept_op("(")) f->args = parse_args();
        e = std::move(f);
      } else if (is_name("is")) {
        int line = next().line;
        auto t = std::make_unique<test_expr>();
        t->line = line;
        t->negated = accept_name("not");
        t->operand = std::move(e);
        const token& tk = peek();
        if (tk.kind == token_kind::name) {
          t->name = next().text;
        } else if (tk.kind == token_kind::op && (tk.text == "==" || tk.text == "!=" || tk.text == "<" ||
                                                 tk.text == "<=" || tk.text == ">" || tk.text == ">=")) {
          t->name = next().text;
        } else {
          fail("expected a test name after 'is'");
        }
        if (accept_op("(")) {
          t->args = parse_args();
        } else {
          const token& a = peek();
          bool starts_arg = a.kind == token_kind::string || a.kind == token_kind::integer ||
                            a.kind == token_kind::floating || (a.kind == token_kind::op && (a.text == "[" || a.text == "{")) ||
                            (a.kind == token_kind::name && a.text != "else" && a.text != "or" && a.text != "and" &&
                             a.text != "if" && a.text != "is" && a.text != "in" && a.text != "not");
          if (starts_arg) t->args.positional.push_back(parse_postfix(parse_primary()));
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  std::vector<token> t_;
  size_t pos_ = 0;
};

}  // namespace

body parse(std::string_view source, const lexer_options& opt) { return parser(lex(source, opt)).parse_template(); }

}  // namespace troupe::jinja
