// End to end: the shard executor steps on the backend model.device names. 'cuda' takes its backend
// from the binary (server_options::cuda_backend: the troupe CLI links the CUDA runner); these cases
// give it a stand-in that counts what it is asked and steps on the CPU engine, so they check the
// plumbing on any machine: refused without one, a backend that cannot start stops the start with
// its message, the first backend is made at start-up and a fresh one after an executor restart.
// The CUDA runner itself serving is tests/runtime/serve/cuda (device machines).
#include "tests/actors/e2e_fixture.hpp"

#include <atomic>

#include "runtime/core/error.hpp"

using namespace troupe;
using namespace troupe::e2e;

namespace {

// Steps on the CPU engine, counting its steps (the server takes it for the CUDA backend).
class counting_backend final : public serve::step_backend {
 public:
  counting_backend(std::unique_ptr<serve::step_backend> inner, std::atomic<int>& steps)
      : inner_(std::move(inner)), steps_(steps) {}
  void step(std::span<const step_sequence> batch, step_result& out) override {
    ++steps_;
    inner_->step(batch, out);
  }
  void save_block(block_id b, std::string& out) const override { inner_->save_block(b, out); }
  void load_block(block_id b, std::string_view payload) override { inner_->load_block(b, payload); }
  prefix::kv_layout kv_layout() const override { return inner_->kv_layout(); }
  int32_t num_blocks() const noexcept override { return inner_->num_blocks(); }

 private:
  std::unique_ptr<serve::step_backend> inner_;
  std::atomic<int>& steps_;
};

actors::server_options device_options(const std::string& device) {
  actors::server_options o;
  o.cfg = test_config();
  o.cfg.device = device;
  o.model_dir = tiny_dense_dir;
  return o;
}

void expect_start_error(const actors::server_options& o, errc code, const std::string& needle) {
  try {
    actors::server srv(o);
    BOOST_FAIL("the server started; expected an error containing '" << needle << "'");
  } catch (const troupe::error& e) {
    BOOST_TEST((e.code() == code), e.what());
    BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, "'" << e.what() << "' lacks '" << needle << "'");
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(e2e_device)

BOOST_AUTO_TEST_CASE(cuda_is_refused_by_a_binary_without_the_cuda_backend) {
  expect_start_error(device_options("cuda"), errc::unsupported,
                     "model.device = 'cuda' (--device cuda): this troupe was built without CUDA");
}

// What the CUDA backend throws on a machine without a device (cuda_model_runner's message) stops the
// start: the backend is made before the server listens, not in the executor (a restart loop).
BOOST_AUTO_TEST_CASE(a_backend_that_cannot_start_stops_the_start_with_its_message) {
  auto o = device_options("cuda");
  int calls = 0;
  o.cuda_backend = [&](std::shared_ptr<const checkpoint>, int32_t, int32_t) -> std::unique_ptr<serve::step_backend> {
    ++calls;
    throw_error(errc::unsupported, "cuda_model_runner: no CUDA device");
  };
  expect_start_error(o, errc::unsupported, "cuda_model_runner: no CUDA device");
  BOOST_TEST(calls == 1);
}

BOOST_AUTO_TEST_CASE(the_executor_steps_on_the_backend_of_model_device) {
  auto o = device_options("cuda");
  o.cfg.max_model_len = 512;
  std::atomic<int> made{0}, steps{0};
  int32_t asked_blocks = 0, asked_block_size = 0;
  o.cuda_backend = [&](std::shared_ptr<const checkpoint> ck, int32_t n, int32_t bs) -> std::unique_ptr<serve::step_backend> {
    ++made;
    asked_blocks = n;
    asked_block_size = bs;
    return std::make_unique<counting_backend>(serve::make_cpu_backend(std::move(ck), n, bs), steps);
  };
  actors::server srv(o);
  BOOST_TEST(made.load() == 1);  // at start-up, before any request
  BOOST_TEST(asked_blocks == srv.num_kv_blocks());
  BOOST_TEST(asked_block_size == o.cfg.block_size);
  BOOST_TEST(srv.banner().find("  device: cuda (device 0") != std::string::npos, srv.banner());
  BOOST_TEST(srv.banner().find("step threads") == std::string::npos);
  BOOST_TEST(steps.load() == 0);

  std::mt19937 rng(5);
  client::client cl("127.0.0.1", srv.port());
  std::vector<wire::generate_request> reqs;
  std::vector<client::stream> streams;
  for (int i = 0; i < 6; ++i) {
    reqs.push_back(ids_request("d" + std::to_string(i), random_prompt(rng, 30), 120, i % 2 ? 40 + i : -1));
    streams.push_back(cl.generate(reqs.back()));
  }
  std::vector<std::vector<int32_t>> got(reqs.size());
  auto first = streams[0].next();
  BOOST_REQUIRE(first.has_value());
  got[0] = first->ids;
  const int before = steps.load();
  BOOST_TEST(before > 0);
  // A restarted executor gets a fresh backend (a clean pool); the requests are recomputed on it.
  srv.kill_executor();
  for (size_t i = 0; i < streams.size(); ++i) {
    while (auto t = streams[i].next()) got[i].insert(got[i].end(), t->ids.begin(), t->ids.end());
    BOOST_TEST_CONTEXT("request " << i) {
      BOOST_TEST((streams[i].done().reason == wire::finish_reason::length));
      BOOST_TEST(got[i] == reference(tiny_dense(), reqs[i]), boost::test_tools::per_element());
    }
  }
  BOOST_TEST(srv.restarts() == 1);
  BOOST_TEST(made.load() == 2);
  BOOST_TEST(steps.load() > before);
  BOOST_TEST(eventually([&] { return server_idle(srv); }));
}

// A restarted executor whose backend cannot be made (the device lost) fails the steps with the
// reason: the requests end with an error naming it, none waits for ever, the server stays up.
BOOST_AUTO_TEST_CASE(an_executor_that_cannot_restart_fails_requests_with_the_reason) {
  auto o = device_options("cuda");
  std::atomic<int> made{0}, steps{0};
  o.cuda_backend = [&](std::shared_ptr<const checkpoint> ck, int32_t n, int32_t bs) -> std::unique_ptr<serve::step_backend> {
    if (++made > 1) throw_error(errc::internal, "cudaErrorDevicesUnavailable: the device is lost");
    return std::make_unique<counting_backend>(serve::make_cpu_backend(std::move(ck), n, bs), steps);
  };
  actors::server srv(o);
  client::client cl("127.0.0.1", srv.port());
  auto first = cl.complete(ids_request("ok", {1, 2, 3}, 4));
  BOOST_TEST(first.ids == reference(tiny_dense(), ids_request("ok", {1, 2, 3}, 4)), boost::test_tools::per_element());
  srv.kill_executor();
  BOOST_TEST(eventually([&] { return srv.restarts() == 1; }));
  // The new executor makes its backend on its own thread, after the supervisor counted the restart.
  BOOST_TEST(eventually([&] { return made.load() == 2; }));
  for (int i = 0; i < 2; ++i) {
    auto out = cl.complete(ids_request("lost" + std::to_string(i), {4, 5, 6}, 4));
    BOOST_TEST((out.done.reason == wire::finish_reason::error));
    BOOST_REQUIRE(out.done.error.has_value());
    BOOST_TEST(out.done.error->message.find("restarting it failed: cudaErrorDevicesUnavailable: the device is lost") !=
                   std::string::npos,
               out.done.error->message);
  }
  BOOST_TEST(srv.restarts() == 1);  // no restart loop
  BOOST_TEST(eventually([&] { return server_idle(srv); }));
}

BOOST_AUTO_TEST_SUITE_END()
