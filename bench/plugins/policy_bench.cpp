// What a scheduling policy costs per step with 1,000 waiting and 64 running requests:
// (a) the policy calls alone, made as the scheduler makes them (one admit_order for the free
//     slots, on_running / on_finished / on_waiting for the requests that came and went, one
//     on_update per running request), through the plugin host's adapter and the C ABI;
// (b) admit_order when all 64 slots are free (the largest ranking a step can ask for);
// (c) a whole scheduler step (schedule + update, no model) with the built-in C++ fcfs
//     comparator versus each plugin, so the host's overhead shows in context.
// Usage: policy_bench [steps]   (default 20000)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "runtime/plugin_host/plugin_policy.hpp"
#include "runtime/sched/scheduler.hpp"

using namespace troupe;
using clk = std::chrono::steady_clock;

namespace {

constexpr int k_waiting = 1000;
constexpr int k_running = 64;

struct workload {
  std::mt19937_64 rng{42};
  int64_t next_id = 0;
  sched::seq_view make(int64_t now_ns) {
    sched::seq_view v;
    v.seq_id = next_id;
    v.arrival = next_id++;
    v.priority = static_cast<int32_t>(rng() % 4);
    static const std::string_view tenants[] = {"a", "b", "c", "d"};
    v.tenant = tenants[rng() % 4];
    v.num_prompt_tokens = 16 + static_cast<int32_t>(rng() % 512);
    v.max_output_tokens = 16 + static_cast<int32_t>(rng() % 256);
    v.num_cached_tokens = static_cast<int32_t>(rng() % 4) * 64 % v.num_prompt_tokens;
    v.arrival_ns = now_ns;
    return v;
  }
};

double pct(std::vector<double>& v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

double us(clk::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// This thread's CPU time: unlike wall time, it does not grow while the OS runs someone else.
double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

struct calls_result {
  double mean_us, p50_us, p99_us, p999_us, max_us, rank64_us;
  int over_50us;
  double cpu_mean_us;
};

// (a) and (b): the adapter driven directly with synthetic requests.
calls_result bench_calls(std::unique_ptr<sched::policy> pol, int steps) {
  workload w;
  int64_t now = 1'000'000'000;
  std::vector<sched::seq_view> views;  // by id
  std::vector<int64_t> waiting, running;
  auto arrive = [&] {
    views.push_back(w.make(now));
    pol->on_waiting(views.back());
    waiting.push_back(views.back().seq_id);
  };
  for (int i = 0; i < k_waiting + k_running; ++i) arrive();
  std::vector<int64_t> order;
  pol->admit_order(waiting, k_running, order);
  for (int64_t id : order) {
    pol->on_running(views[id]);
    running.push_back(id);
    waiting.erase(std::find(waiting.begin(), waiting.end(), id));
  }

  std::mt19937_64 rng(7);
  std::vector<double> per_step;
  per_step.reserve(static_cast<size_t>(steps));
  std::vector<int64_t> finished;
  double cpu = 0;
  for (int s = 0; s < steps; ++s) {
    now += 20'000'000;  // a 20 ms step
    // Untimed: pick 0-3 running requests that finish this step and replace them with arrivals.
    finished.clear();
    int n_done = static_cast<int>(rng() % 4);
    for (int i = 0; i < n_done; ++i) {
      size_t k = rng() % running.size();
      finished.push_back(running[k]);
      running.erase(running.begin() + static_cast<ptrdiff_t>(k));
    }
    double c0 = thread_cpu_us();
    auto t0 = clk::now();
    for (int64_t id : running) {
      ++views[id].num_output_tokens;
      pol->on_update(views[id]);
    }
    for (int64_t id : finished) pol->on_finished(id);
    double t = us(clk::now() - t0);
    cpu += thread_cpu_us() - c0;
    for (int i = 0; i < n_done; ++i) {
      views.push_back(w.make(now));
      waiting.push_back(views.back().seq_id);
    }
    c0 = thread_cpu_us();
    t0 = clk::now();
    for (size_t i = waiting.size() - static_cast<size_t>(n_done); i < waiting.size(); ++i) pol->on_waiting(views[waiting[i]]);
    order.clear();
    pol->admit_order(waiting, static_cast<size_t>(k_running) - running.size(), order);
    for (int64_t id : order) pol->on_running(views[id]);
    t += us(clk::now() - t0);
    cpu += thread_cpu_us() - c0;
    for (int64_t id : order) {
      running.push_back(id);
      waiting.erase(std::find(waiting.begin(), waiting.end(), id));
    }
    per_step.push_back(t);
  }
  if (auto* p = dynamic_cast<plugin_host::plugin_policy*>(pol.get()); p && p->fell_back())
    std::fprintf(stderr, "%s fell back: %s\n", p->path().c_str(), p->fallback_reason().c_str());
  double sum = 0;
  int over = 0;
  for (double x : per_step) sum += x, over += x > 50;
  calls_result r{sum / steps,          pct(per_step, 0.5), pct(per_step, 0.99), pct(per_step, 0.999),
                 pct(per_step, 1.0), 0, over, cpu / steps};
  // (b) a ranking of 64 out of the 1,000 waiting, repeated.
  std::vector<double> ranks;
  for (int i = 0; i < 2000; ++i) {
    order.clear();
    auto t0 = clk::now();
    pol->admit_order(waiting, k_running, order);
    ranks.push_back(us(clk::now() - t0));
  }
  r.rank64_us = pct(ranks, 0.5);
  return r;
}

// (c) a whole scheduler step at 1,000 waiting / 64 running; median microseconds.
double bench_scheduler(std::unique_ptr<sched::policy> pol, int steps) {
  sched::sched_config cfg;
  cfg.max_num_seqs = k_running;
  cfg.max_num_batched_tokens = 512;
  cfg.max_model_len = 2048;
  cfg.max_waiting = 4096;
  sched::scheduler s(cfg, 8192, 16, std::move(pol));
  std::mt19937_64 rng(3);
  int64_t next = 0;
  auto add = [&] {
    sched::request_spec r;
    r.seq_id = next++;
    r.prompt.assign(16 + rng() % 128, 7);
    r.max_tokens = 16 + static_cast<int32_t>(rng() % 128);
    r.priority = static_cast<int32_t>(rng() % 4);
    r.tenant = std::string(1, static_cast<char>('a' + rng() % 4));
    s.add(std::move(r));
  };
  for (int i = 0; i < k_waiting + k_running; ++i) add();
  std::vector<double> t;
  std::vector<int32_t> sampled;
  for (int i = 0; i < steps; ++i) {
    auto t0 = clk::now();
    auto plan = s.schedule();
    sampled.assign(static_cast<size_t>(plan.num_sampled), 1);
    auto events = s.update(plan, sampled);
    double dt = us(clk::now() - t0);
    if (i >= 200) t.push_back(dt);  // after the first prompts are in
    for (const auto& e : events)
      if (e.finished) add();
    while (s.stats().num_waiting < k_waiting) add();
  }
  return pct(t, 0.5);
}

}  // namespace

int main(int argc, char** argv) {
  int steps = argc > 1 ? std::atoi(argv[1]) : 20000;
  const std::pair<const char*, const char*> policies[] = {{"fcfs", ""},
                                                          {"priority", ""},
                                                          {"fair-share", "weight.a=3,weight.b=1"},
                                                          {"shortest-first", ""},
                                                          {"cache-aware", ""}};
  std::printf("policy calls per scheduling step, %d waiting + %d running, %d steps (microseconds)\n", k_waiting,
              k_running, steps);
  std::printf("(the built-in C++ comparator's calls are no-ops: its tail is the machine's noise)\n");
  std::printf("(cpu mean: this thread's CPU time per step, clock reads included; '>50us': steps over budget)\n");
  std::printf("%-22s %8s %8s %8s %8s %8s %8s %8s %14s\n", "policy", "mean", "cpu mean", "p50", "p99", "p99.9", "max",
              ">50us", "rank 64 (p50)");
  auto row = [](const char* name, const calls_result& r) {
    std::printf("%-22s %8.2f %8.2f %8.2f %8.2f %8.2f %8.1f %8d %14.2f\n", name, r.mean_us, r.cpu_mean_us, r.p50_us,
                r.p99_us, r.p999_us, r.max_us, r.over_50us, r.rank64_us);
  };
  row("built-in C++ fcfs", bench_calls(std::make_unique<sched::fcfs_policy>(), steps));
  for (auto [name, config] : policies)
    row((std::string("plugin ") + name).c_str(), bench_calls(plugin_host::load_policy(name, config), steps));
  int sched_steps = std::max(1000, steps / 10);
  std::printf("\nwhole scheduler step (schedule + update, no model), median of %d steps (microseconds)\n",
              sched_steps - 200);
  double base = bench_scheduler(std::make_unique<sched::fcfs_policy>(), sched_steps);
  std::printf("%-24s %10.2f\n", "built-in C++ fcfs", base);
  for (auto [name, config] : policies) {
    double t = bench_scheduler(plugin_host::load_policy(name, config), sched_steps);
    std::printf("%-24s %10.2f  (+%.2f)\n", (std::string("plugin ") + name).c_str(), t, t - base);
  }
  return 0;
}
