// Evaluation of the Jinja syntax tree (eval/exec of ast.hpp) with Jinja2's default Undefined:
// printing it gives "", testing it is false, iterating it gives nothing, but using it in
// arithmetic or reading an attribute of it is an error, as in transformers.
#include <algorithm>
#include <cmath>
#include <optional>

#include "runtime/core/error.hpp"
#include "runtime/tokenizer/jinja/ast.hpp"
#include "runtime/tokenizer/jinja/context.hpp"

namespace troupe::jinja {

namespace {

constexpr int max_macro_depth = 64;

[[noreturn]] void fail(const std::string& what) { throw_error(errc::invalid_input, what); }

[[noreturn]] void undefined_error(const value& v) {
  const auto& u = std::get<undefined>(v.v);
  fail(u.name.empty() ? "a value is undefined" : u.name + " is undefined");
}

void require_defined(const value& v) {
  if (v.is_undefined()) undefined_error(v);
}

int64_t as_int(const value& v) {
  if (v.is_int()) return std::get<int64_t>(v.v);
  if (v.is_bool()) return std::get<bool>(v.v) ? 1 : 0;
  fail(std::string("expected an integer, got ") + type_name(v));
}

bool int_like(const value& v) { return v.is_int() || v.is_bool(); }

value arithmetic(const std::string& op, const value& a, const value& b) {
  require_defined(a);
  require_defined(b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) return value(a.str() + b.str());
    if (a.is_list() && b.is_list()) {
      list out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return value::make_list(std::move(out));
    }
  }
  if (op == "*") {
    const value* seq = a.is_string() || a.is_list() ? &a : b.is_string() || b.is_list() ? &b : nullptr;
    const value* count = seq == &a ? &b : &a;
    if (seq && int_like(*count)) {
      int64_t n = std::max<int64_t>(0, as_int(*count));
      if (seq->is_string()) {
        std::string out;
        for (int64_t i = 0; i < n; ++i) out += seq->str();
        return value(std::move(out));
      }
      list out;
      for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq->as_list().begin(), seq->as_list().end());
      return value::make_list(std::move(out));
    }
  }
  if (!a.is_number() || !b.is_number())
    fail("unsupported operand types for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
  if (int_like(a) && int_like(b) && op != "/") {
    int64_t x = as_int(a), y = as_int(b);
    if (op == "+") return value(x + y);
    if (op == "-") return value(x - y);
    if (op == "*") return value(x * y);
    if (op == "//" || op == "%") {
      if (y == 0) fail("integer division or modulo by zero");
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        --q;
        r += y;
      }
      return value(op == "//" ? q : r);
    }
    if (op == "**") {
      if (y < 0) return value(std::pow(static_cast<double>(x), static_cast<double>(y)));
      int64_t r = 1;
      for (int64_t i = 0; i < y; ++i) r *= x;
      return value(r);
    }
  }
  double x = a.as_double(), y = b.as_double();
  if (op == "+") return value(x + y);
  if (op == "-") return value(x - y);
  if (op == "*") return value(x * y);
  if (op == "/") {
    if (y == 0) fail("division by zero");
    return value(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) fail("float division or modulo by zero");
    double q = std::floor(x / y);
    return value(op == "//" ? q : x - q * y);
  }
  if (op == "**") return value(std::pow(x, y));
  fail("unknown operator " + op);
}

void eval_args(const arg_list& a, context& ctx, std::vector<value>& args, kwargs& kw) {
  for (const auto& e : a.positional) args.push_back(e->eval(ctx));
  for (const auto& [k, e] : a.named) kw.emplace_back(k, e->eval(ctx));
}

}  // namespace

// ---- context ----

context::context(std::unordered_map<std::string, value> globals) { frames_.push_back(std::move(globals)); }

value context::lookup(const std::string& name) const {
  for (size_t i = frames_.size(); i-- > 0;) {
    if (i > 0 && i < barrier_) continue;
    auto it = frames_[i].find(name);
    if (it != frames_[i].end()) return it->second;
  }
  return value(undefined{name});
}

size_t context::enter_macro() {
  size_t saved = barrier_;
  barrier_ = frames_.size();
  push_frame();
  return saved;
}

void context::leave_macro(size_t saved_barrier) {
  pop_frame();
  barrier_ = saved_barrier;
}

// ---- expressions ----

value name_expr::eval(context& ctx) const { return ctx.lookup(name); }

value attr_expr::eval(context& ctx) const {
  value o = obj->eval(ctx);
  if (o.is_undefined()) fail(obj->text() + " is undefined (reading ." + name + ")");
  value r = get_attribute(o, name);
  if (r.is_undefined()) std::get<undefined>(r.v).name = text();
  return r;
}

value item_expr::eval(context& ctx) const {
  value o = obj->eval(ctx);
  if (o.is_undefined()) fail(obj->text() + " is undefined (reading [" + index->text() + "])");
  value r = get_item(o, index->eval(ctx));
  if (r.is_undefined()) std::get<undefined>(r.v).name = text();
  return r;
}

value slice_expr::eval(context& ctx) const {
  value o = obj->eval(ctx);
  require_defined(o);
  auto opt = [&](const expr_ptr& e) -> std::optional<int64_t> {
    if (!e) return std::nullopt;
    value v = e->eval(ctx);
    if (v.is_none()) return std::nullopt;
    return as_int(v);
  };
  std::optional<int64_t> lo = opt(start), hi = opt(stop), st = opt(step);
  int64_t s = st.value_or(1);
  if (s == 0) fail("slice step cannot be zero");
  auto pick = [&](int64_t n, auto&& take) {
    // Python's slice.indices()
    auto clamp = [&](std::optional<int64_t> v, int64_t def) {
      if (!v) return def;
      int64_t x = *v < 0 ? *v + n : *v;
      if (s > 0) return std::clamp<int64_t>(x, 0, n);
      return std::clamp<int64_t>(x, -1, n - 1);
    };
    int64_t b = clamp(lo, s > 0 ? 0 : n - 1);
    int64_t e = clamp(hi, s > 0 ? n : -1);
    for (int64_t i = b; s > 0 ? i < e : i > e; i += s) take(static_cast<size_t>(i));
  };
  if (o.is_list()) {
    const list& l = o.as_list();
    list out;
    pick(static_cast<int64_t>(l.size()), [&](size_t i) { out.push_back(l[i]); });
    return value::make_list(std::move(out));
  }
  if (o.is_string()) {
    std::u32string u = to_u32(o.str());
    std::u32string out;
    pick(static_cast<int64_t>(u.size()), [&](size_t i) { out.push_back(u[i]); });
    return value(from_u32(out));
  }
  fail(std::string("cannot slice a ") + type_name(o));
}

value call_expr::eval(context& ctx) const {
  value f = callee->eval(ctx);
  if (f.is_undefined()) undefined_error(f);
  if (!f.is_callable()) fail(std::string("'") + type_name(f) + "' object is not callable");
  std::vector<value> a;
  kwargs kw;
  eval_args(args, ctx, a, kw);
  return f.as_callable().fn(a, kw);
}

value filter_expr::eval(context& ctx) const {
  value v = operand->eval(ctx);
  std::vector<value> a;
  kwargs kw;
  eval_args(args, ctx, a, kw);
  return apply_filter(name, std::move(v), a, kw, ctx);
}

value test_expr::eval(context& ctx) const {
  value v = operand->eval(ctx);
  std::vector<value> a;
  kwargs kw;
  eval_args(args, ctx, a, kw);
  bool r = apply_test(name, v, a, ctx);
  return value(negated ? !r : r);
}

value unary_expr::eval(context& ctx) const {
  value v = operand->eval(ctx);
  if (op == "not") return value(!truthy(v));
  require_defined(v);
  if (op == "-") {
    if (v.is_float()) return value(-std::get<double>(v.v));
    return value(-as_int(v));
  }
  if (!v.is_number()) fail(std::string("bad operand type for unary +: '") + type_name(v) + "'");
  return v;
}

value binary_expr::eval(context& ctx) const {
  if (op == "and") {
    value l = left->eval(ctx);
    return truthy(l) ? right->eval(ctx) : l;
  }
  if (op == "or") {
    value l = left->eval(ctx);
    return truthy(l) ? l : right->eval(ctx);
  }
  value l = left->eval(ctx);
  value r = right->eval(ctx);
  if (op == "~") return value(to_str(l) + to_str(r));
  return arithmetic(op, l, r);
}

value compare_expr::eval(context& ctx) const {
  value l = first->eval(ctx);
  for (const auto& [op, e] : rest) {
    value r = e->eval(ctx);
    bool ok;
    if (op == "==") ok = equals(l, r);
    else if (op == "!=") ok = !equals(l, r);
    else if (op == "in") ok = contains(r, l);
    else if (op == "not in") ok = !contains(r, l);
    else {
      require_defined(l);
      require_defined(r);
      if (op == "<") ok = less(l, r);
      else if (op == ">") ok = less(r, l);
      else if (op == "<=") ok = !less(r, l);
      else ok = !less(l, r);
    }
    if (!ok) return value(false);
    l = std::move(r);
  }
  return value(true);
}

value cond_expr::eval(context& ctx) const {
  if (truthy(cond->eval(ctx))) return then->eval(ctx);
  return otherwise ? otherwise->eval(ctx) : value(undefined{});
}

value list_expr::eval(context& ctx) const {
  list out;
  out.reserve(items.size());
  for (const auto& e : items) out.push_back(e->eval(ctx));
  return value::make_list(std::move(out));
}

value dict_expr::eval(context& ctx) const {
  value d = value::make_dict();
  for (const auto& [k, v] : items) {
    value key = k->eval(ctx);
    if (!key.is_string()) fail(std::string("dict keys must be strings here, got ") + type_name(key));
    d.as_dict().set(key.str(), v->eval(ctx));
  }
  return d;
}

// ---- statements ----

flow exec_body(const body& b, context& ctx, std::string& out) {
  for (const auto& s : b) {
    flow f;
    try {
      f = s->exec(ctx, out);
    } catch (const troupe::error& e) {
      std::string msg = e.what();
      if (msg.rfind("chat template line ", 0) == 0) throw;
      throw troupe::error(e.code(), "chat template line " + std::to_string(s->line) + ": " + msg);
    }
    if (f != flow::normal) return f;
  }
  return flow::normal;
}

flow output_stmt::exec(context& ctx, std::string& out) const {
  out += to_str(e->eval(ctx));
  return flow::normal;
}

flow if_stmt::exec(context& ctx, std::string& out) const {
  for (const auto& [cond, b] : branches)
    if (truthy(cond->eval(ctx))) return exec_body(b, ctx, out);
  return exec_body(otherwise, ctx, out);
}

flow for_stmt::exec(context& ctx, std::string& out) const {
  value seq = iter->eval(ctx);
  if (seq.is_none()) fail("'NoneType' object is not iterable");
  list items = iterate(seq);
  auto bind = [&](const value& item) {
    if (targets.size() == 1) {
      ctx.assign(targets[0], item);
      return;
    }
    list parts = iterate(item);
    if (parts.size() != targets.size())
      fail("cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(targets.size()) + " names");
    for (size_t i = 0; i < targets.size(); ++i) ctx.assign(targets[i], parts[i]);
  };
  if (filter) {  // {% for x in xs if cond %}: the loop runs over the items that pass
    list kept;
    for (const value& item : items) {
      ctx.push_frame();
      bind(item);
      bool keep = truthy(filter->eval(ctx));
      ctx.pop_frame();
      if (keep) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec_body(otherwise, ctx, out);
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    ctx.push_frame();
    bind(items[static_cast<size_t>(i)]);
    value loop = value::make_dict();
    dict& d = loop.as_dict();
    d.items = {{"index", value(i + 1)},
               {"index0", value(i)},
               {"revindex", value(n - i)},
               {"revindex0", value(n - i - 1)},
               {"first", value(i == 0)},
               {"last", value(i == n - 1)},
               {"length", value(n)},
               {"depth", value(int64_t{1})},
               {"depth0", value(int64_t{0})},
               {"previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : value(undefined{"loop.previtem"})},
               {"nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : value(undefined{"loop.nextitem"})}};
    ctx.assign("loop", std::move(loop));
    flow f;
    try {
      f = exec_body(loop_body, ctx, out);
    } catch (...) {
      ctx.pop_frame();
      throw;
    }
    ctx.pop_frame();
    if (f == flow::break_loop) break;
  }
  return flow::normal;
}

flow set_stmt::exec(context& ctx, std::string& out) const {
  (void)out;
  value v;
  if (e) {
    v = e->eval(ctx);
  } else {
    std::string captured_text;
    exec_body(captured, ctx, captured_text);
    v = value(std::move(captured_text));
  }
  if (!attr.empty()) {
    value target = ctx.lookup(targets[0]);
    if (!target.is_dict() || !target.as_dict().is_namespace)
      fail("cannot assign attribute '" + attr + "' on '" + targets[0] + "': not a namespace()");
    target.as_dict().set(attr, std::move(v));
    return flow::normal;
  }
  if (targets.size() == 1) {
    ctx.assign(targets[0], std::move(v));
    return flow::normal;
  }
  list parts = iterate(v);
  if (parts.size() != targets.size())
    fail("cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(targets.size()) + " names");
  for (size_t i = 0; i < targets.size(); ++i) ctx.assign(targets[i], parts[i]);
  return flow::normal;
}

flow macro_stmt::exec(context& ctx, std::string& out) const {
  (void)out;
  const macro_stmt* self = this;
  context* c = &ctx;  // macros are only callable while this render runs
  ctx.assign(name, value::make_callable(name, [self, c](std::vector<value>& args, kwargs& kw) {
    if (c->depth >= max_macro_depth) fail("macro '" + self->name + "' nested too deeply");
    if (args.size() > self->params.size()) fail("macro '" + self->name + "' takes " + std::to_string(self->params.size()) + " arguments");
    std::vector<value> bound(self->params.size());
    std::vector<bool> given(self->params.size(), false);
    for (size_t i = 0; i < args.size(); ++i) {
      bound[i] = args[i];
      given[i] = true;
    }
    for (auto& [k, v] : kw) {
      size_t i = 0;
      while (i < self->params.size() && self->params[i].first != k) ++i;
      if (i == self->params.size()) fail("macro '" + self->name + "' has no argument '" + k + "'");
      bound[i] = v;
      given[i] = true;
    }
    size_t saved = c->enter_macro();
    ++c->depth;
    std::string text;
    try {
      for (size_t i = 0; i < bound.size(); ++i) {
        if (!given[i]) bound[i] = self->params[i].second ? self->params[i].second->eval(*c) : value(undefined{self->params[i].first});
        c->assign(self->params[i].first, bound[i]);
      }
      exec_body(self->macro_body, *c, text);
    } catch (...) {
      --c->depth;
      c->leave_macro(saved);
      throw;
    }
    --c->depth;
    c->leave_macro(saved);
    return value(std::move(text));
  }));
  return flow::normal;
}

}  // namespace troupe::jinja
