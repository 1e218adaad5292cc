// Prometheus text exposition (format 0.0.4) for every component that renders metrics: the
// server's registry, the prefix cache, the policy host. Names get the "troupe:" prefix here,
// vLLM's convention with our name, so existing vLLM dashboards work for the shared metrics.
#pragma once

#include <string>
#include <string_view>

namespace troupe::prometheus {

// A sample value: shortest form that reads back exactly (%.17g).
std::string number(double v);
// A label value with \, " and newline escaped.
std::string escape_label(std::string_view v);
// "# HELP troupe:<name> <help>" and "# TYPE troupe:<name> <type>".
void family(std::string& out, std::string_view name, std::string_view type, std::string_view help);
// "troupe:<name>{<labels>} <value>".
void sample(std::string& out, std::string_view name, std::string_view labels, std::string_view value);
// The same with `extra` labels after `labels` (either may be empty).
void sample(std::string& out, std::string_view name, std::string_view labels, std::string_view extra, double value);

}  // namespace troupe::prometheus
