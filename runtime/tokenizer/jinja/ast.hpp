// Syntax tree of the Jinja subset: expression nodes evaluate to values, statement nodes append
// to the output. eval()/exec() are defined in interpreter.cpp.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/tokenizer/jinja/value.hpp"

namespace troupe::jinja {

class context;

enum class flow { normal, break_loop, continue_loop };

struct expr {
  int line = 0;
  virtual ~expr() = default;
  virtual value eval(context& ctx) const = 0;
  // Source-like text for error messages ("messages[0].role").
  virtual std::string text() const { return "(expression)"; }
};
using expr_ptr = std::unique_ptr<expr>;

struct arg_list {
  std::vector<expr_ptr> positional;
  std::vector<std::pair<std::string, expr_ptr>> named;
};

struct literal_expr : expr {
  value val;
  value eval(context&) const override { return val; }
  std::string text() const override { return repr(val); }
};
struct name_expr : expr {
  std::string name;
  value eval(context& ctx) const override;
  std::string text() const override { return name; }
};
struct attr_expr : expr {  // obj.name
  expr_ptr obj;
  std::string name;
  value eval(context& ctx) const override;
  std::string text() const override { return obj->text() + "." + name; }
};
struct item_expr : expr {  // obj[index]
  expr_ptr obj, index;
  value eval(context& ctx) const override;
  std::string text() const override { return obj->text() + "[" + index->text() + "]"; }
};
struct slice_expr : expr {  // obj[start:stop:step]
  expr_ptr obj, start, stop, step;  // each may be null
  value eval(context& ctx) const override;
};
struct call_expr : expr {
  expr_ptr callee;
  arg_list args;
  value eval(context& ctx) const override;
};
struct filter_expr : expr {  // operand | name(args)
  expr_ptr operand;
  std::string name;
  arg_list args;
  value eval(context& ctx) const override;
};
struct test_expr : expr {  // operand is [not] name(args)
  expr_ptr operand;
  std::string name;
  arg_list args;
  bool negated = false;
  value eval(context& ctx) const override;
};
struct unary_expr : expr {  // not, -, +
  std::string op;
  expr_ptr operand;
  value eval(context& ctx) const override;
};
struct binary_expr : expr {  // and or + - * / // % ** ~
  std::string op;
  expr_ptr left, right;
  value eval(context& ctx) const override;
};
struct compare_expr : expr {  // a == b, a < b <= c, x in y, x not in y
  expr_ptr first;
  std::vector<std::pair<std::string, expr_ptr>> rest;
  value eval(context& ctx) const override;
};
struct cond_expr : expr {  // then if cond else otherwise
  expr_ptr cond, then, otherwise;  // otherwise may be null (undefined)
  value eval(context& ctx) const override;
};
struct list_expr : expr {  // [a, b] and (a, b)
  std::vector<expr_ptr> items;
  value eval(context& ctx) const override;
};
struct dict_expr : expr {
  std::vector<std::pair<expr_ptr, expr_ptr>> items;
  value eval(context& ctx) const override;
};

struct stmt {
  int line = 0;
  virtual ~stmt() = default;
  virtual flow exec(context& ctx, std::string& out) const = 0;
};
using stmt_ptr = std::unique_ptr<stmt>;
using body = std::vector<stmt_ptr>;

flow exec_body(const body& b, context& ctx, std::string& out);

struct text_stmt : stmt {
  std::string text;
  flow exec(context&, std::string& out) const override {
    out += text;
    return flow::normal;
  }
};
struct output_stmt : stmt {
  expr_ptr e;
  flow exec(context& ctx, std::string& out) const override;
};
struct if_stmt : stmt {
  std::vector<std::pair<expr_ptr, body>> branches;
  body otherwise;
  flow exec(context& ctx, std::string& out) const override;
};
struct for_stmt : stmt {
  std::vector<std::string> targets;  // one name, or names to unpack
  expr_ptr iter;
  expr_ptr filter;  // {% for x in xs if cond %}; may be null
  body loop_body, otherwise;
  flow exec(context& ctx, std::string& out) const override;
};
struct set_stmt : stmt {
  std::vector<std::string> targets;  // names to assign (several: unpacking)
  std::string attr;                  // non-empty: {% set targets[0].attr = ... %} on a namespace
  expr_ptr e;                        // null: block form, `captured` is rendered instead
  body captured;
  flow exec(context& ctx, std::string& out) const override;
};
struct macro_stmt : stmt {
  std::string name;
  std::vector<std::pair<std::string, expr_ptr>> params;  // default may be null
  body macro_body;
  flow exec(context& ctx, std::string& out) const override;
};
struct loop_control_stmt : stmt {
  bool is_break = false;
  flow exec(context&, std::string&) const override { return is_break ? flow::break_loop : flow::continue_loop; }
};
struct block_stmt : stmt {  // {% generation %} ... {% endgeneration %}: renders its body
  body inner;
  flow exec(context& ctx, std::string& out) const override { return exec_body(inner, ctx, out); }
};

}  // namespace troupe::jinja
