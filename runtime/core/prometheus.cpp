#include "runtime/core/prometheus.hpp"

#include <cstdio>

namespace troupe::prometheus {

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string escape_label(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out;
}

void family(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out += "# HELP troupe:";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE troupe:";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void sample(std::string& out, std::string_view name, std::string_view labels, std::string_view value) {
  out += "troupe:";
  out += name;
  out += '{';
  out += labels;
  out += "} ";
  out += value;
  out += '\n';
}

void sample(std::string& out, std::string_view name, std::string_view labels, std::string_view extra, double value) {
  std::string all(labels);
  if (!extra.empty()) {
    if (!all.empty()) all += ',';
    all += extra;
  }
  sample(out, name, all, number(value));
}

}  // namespace troupe::prometheus
