// End to end: `troupe serve --lora NAME=DIR` with two PEFT adapters (tests/data/golden/*-lora*).
// Concurrent requests for either adapter and for the base model share the batches and each gets
// exactly the tokens the generator gives it alone with its adapter; the prefix cache never hands
// one adapter's blocks to another; unknown adapters and bad adapter settings are clear errors.
#include "tests/actors/e2e_fixture.hpp"
#include "runtime/core/error.hpp"
#include "runtime/lora/lora_adapter.hpp"
#include "tests/actors/http_client.hpp"

#include <nlohmann/json.hpp>

using namespace troupe;
using namespace troupe::e2e;

namespace {

const std::string peft_dir = TROUPE_TEST_DATA_DIR "/golden/tiny-dense-lora/adapter";
const std::string rs_dir = TROUPE_TEST_DATA_DIR "/golden/tiny-dense-lora-rs/adapter";

// What `troupe generate --lora DIR` gives the request alone.
std::vector<int32_t> lora_reference(const wire::generate_request& r) {
  static const auto peft = std::make_shared<const lora_adapter>(load_lora_adapter(peft_dir, tiny_dense().config));
  static const auto rs = std::make_shared<const lora_adapter>(load_lora_adapter(rs_dir, tiny_dense().config));
  return reference(tiny_dense(), r, r.adapter == "peft" ? peft : r.adapter == "rs" ? rs : nullptr);
}

serve::server_config lora_config() {
  auto c = test_config();
  c.lora_modules = "peft=" + peft_dir + ",rs=" + rs_dir;
  return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(e2e_lora)

BOOST_AUTO_TEST_CASE(adapters_and_the_base_model_share_batches_and_each_gets_its_own_tokens) {
  auto srv = start(lora_config());
  std::mt19937 rng(21);
  std::vector<wire::generate_request> reqs;
  const char* adapters[] = {"", "peft", "rs"};
  for (int i = 0; i < 12; ++i) {
    auto r = ids_request("r" + std::to_string(i), random_prompt(rng, 40), 10, i % 2 ? i : -1);
    r.adapter = adapters[i % 3];
    reqs.push_back(std::move(r));
  }
  client::client cl("127.0.0.1", srv->port());
  const auto got = stream_all(cl, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) BOOST_TEST(got[i] == lora_reference(reqs[i]), boost::test_tools::per_element());
  // vLLM's lora_requests_info: nothing running now; a long request under rs shows while it runs.
  auto lora_info = [&] {
    const auto text = srv->metrics().render();
    const auto at = text.find("\ntroupe:lora_requests_info{");
    return at == std::string::npos ? std::string() : text.substr(at + 1, text.find('\n', at + 1) - at - 1);
  };
  BOOST_TEST(eventually([&] { return lora_info().find("max_lora=\"2\",running_lora_adapters=\"\",") != std::string::npos; }),
             lora_info());
  auto long_req = ids_request("long", {1, 2, 3}, 200);
  long_req.adapter = "rs";
  auto s = cl.generate(long_req);
  BOOST_REQUIRE(s.next());
  BOOST_TEST(eventually([&] { return lora_info().find("running_lora_adapters=\"rs\"") != std::string::npos; }),
             lora_info());
  cl.cancel("long");
  while (s.next()) {
  }

  // The adapters matter: the same greedy request under each gives other tokens.
  auto a = reqs[0];
  auto b = a, c = a;
  b.adapter = "peft", b.id = "b";
  c.adapter = "rs", c.id = "c";
  const auto ta = cl.complete(a).ids, tb = cl.complete(b).ids, tc = cl.complete(c).ids;
  BOOST_TEST(ta != tb);
  BOOST_TEST(tb != tc);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

// vLLM's max_loras: with room for one adapter, concurrent requests over both adapters and the base
// model all finish with their own tokens (each adapter's requests run while the other's wait), and
// the gauge's max_lora label is the cap.
BOOST_AUTO_TEST_CASE(max_loras_one_serves_both_adapters_in_turn) {
  auto cfg = lora_config();
  cfg.max_loras = 1;
  auto srv = start(cfg);
  std::mt19937 rng(23);
  std::vector<wire::generate_request> reqs;
  const char* adapters[] = {"peft", "rs", ""};
  for (int i = 0; i < 9; ++i) {
    auto r = ids_request("m" + std::to_string(i), random_prompt(rng, 30), 8);
    r.adapter = adapters[i % 3];
    reqs.push_back(std::move(r));
  }
  client::client cl("127.0.0.1", srv->port());
  const auto got = stream_all(cl, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) BOOST_TEST(got[i] == lora_reference(reqs[i]), boost::test_tools::per_element());
  BOOST_TEST(eventually([&] { return srv->metrics().render().find("max_lora=\"1\"") != std::string::npos; }));
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

BOOST_AUTO_TEST_CASE(the_prefix_cache_keeps_adapters_apart) {
  auto srv = start(lora_config());
  std::mt19937 rng(22);
  std::vector<int32_t> prompt(50);  // three full blocks of 16
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % 4000);
  client::client cl("127.0.0.1", srv->port());
  auto run = [&](const std::string& id, const std::string& adapter) {
    auto r = ids_request(id, prompt, 6);
    r.adapter = adapter;
    auto out = cl.complete(r);
    BOOST_TEST(out.ids == lora_reference(r), boost::test_tools::per_element());
    return out.done.usage.cached_prompt_tokens;
  };
  BOOST_TEST(run("p1", "peft") == 0);
  BOOST_TEST(run("p2", "rs") == 0);    // peft's blocks are not rs's K/V
  BOOST_TEST(run("p3", "") == 0);      // nor the base model's
  BOOST_TEST(run("p4", "peft") == 48);  // its own are
  BOOST_TEST(run("p5", "") == 48);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

BOOST_AUTO_TEST_CASE(models_lists_the_adapters_and_unknown_ones_are_refused) {
  auto srv = start(lora_config());
  BOOST_TEST(srv->banner().find("LoRA adapter 'rs': " + rs_dir + " (r 4, 6 projections") != std::string::npos,
             srv->banner());
  client::client cl("127.0.0.1", srv->port());
  const auto models = cl.models();
  BOOST_REQUIRE_EQUAL(models.size(), 3u);
  BOOST_TEST(models[0].name == "tiny-dense");
  BOOST_TEST(models[0].parent.empty());
  BOOST_TEST(models[1].name == "peft");
  BOOST_TEST(models[1].parent == "tiny-dense");
  BOOST_TEST(models[2].name == "rs");
  auto r = ids_request("x", {1, 2, 3}, 4);
  r.adapter = "pfet";
  try {
    cl.complete(r);
    BOOST_ERROR("an unknown adapter was served");
  } catch (const client::request_error& e) {
    BOOST_TEST(wire::to_string(e.error().code) == "invalid_value");
    BOOST_TEST(e.error().message.find("adapter 'pfet' is not served here; the LoRA adapters are: peft, rs") !=
                   std::string::npos,
               e.error().message);
  }
  // The connection and the server go on.
  r.adapter = "rs";
  BOOST_TEST(cl.complete(r).ids == lora_reference(r), boost::test_tools::per_element());
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

BOOST_AUTO_TEST_CASE(bad_lora_modules_stop_the_start_with_a_clear_error) {
  auto expect = [](const std::string& modules, const std::string& needle) {
    auto c = test_config();
    c.lora_modules = modules;
    try {
      start(c);
      BOOST_ERROR("started with lora_modules = " << modules);
    } catch (const troupe::error& e) {
      BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, e.what());
    }
  };
  expect("peft", "model.lora_modules (--lora): 'peft' is not NAME=DIR");
  expect("a=" + peft_dir + ",a=" + rs_dir, "adapter name 'a' is given twice");
  expect("a=/nowhere", "/nowhere/adapter_config.json");
  // vLLM's max_lora_rank: rs's rank is 4.
  auto c = test_config();
  c.lora_modules = "rs=" + rs_dir;
  c.max_lora_rank = 3;
  try {
    start(c);
    BOOST_ERROR("started with an adapter above max_lora_rank");
  } catch (const troupe::error& e) {
    BOOST_TEST(std::string(e.what()).find("LoRA adapter 'rs' (" + rs_dir +
                                          ") has rank 4, above model.max_lora_rank (--max-lora-rank) 3") != std::string::npos,
               e.what());
  }
}

// vLLM's runtime LoRA updating (server.allow_runtime_lora_updating): an adapter loaded while the
// server runs serves requests exactly as one given at start-up; unloading it refuses new requests
// at once while a running one finishes with its own tokens, and then the slot's weights go; it
// loads again; bad requests get their status; a server without the setting has no such paths.
BOOST_AUTO_TEST_CASE(adapters_load_and_unload_while_the_server_runs) {
  using json = nlohmann::json;
  auto cfg = test_config();
  cfg.allow_runtime_lora_updating = true;
  auto srv = start(cfg);
  http_client h(srv->http_port());
  auto post = [&](const std::string& path, const json& body) {
    h.post(path, body.dump());
    return h.read();
  };
  auto r = post("/v1/load_lora_adapter", {{"lora_name", "peft"}, {"lora_path", peft_dir}});
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  BOOST_TEST(r.body == "Success: LoRA adapter 'peft' added successfully.");
  h.get("/v1/models");
  BOOST_TEST(h.read().body.find("\"peft\"") != std::string::npos);
  client::client cl("127.0.0.1", srv->port());
  auto q = ids_request("q", {5, 6, 7, 8, 9}, 8);
  q.adapter = "peft";
  BOOST_TEST(cl.complete(q).ids == lora_reference(q), boost::test_tools::per_element());

  // Bad requests: the same name again, a path with no adapter, a missing field, the model's name.
  r = post("/v1/load_lora_adapter", {{"lora_name", "peft"}, {"lora_path", rs_dir}});
  BOOST_TEST(r.status == 400);
  BOOST_TEST(r.body.find("already been loaded") != std::string::npos, r.body);
  r = post("/v1/load_lora_adapter", {{"lora_name", "x"}, {"lora_path", "/no/such/adapter"}});
  BOOST_TEST(r.status == 404, r.body);
  BOOST_TEST(r.body.find("/no/such/adapter") != std::string::npos, r.body);
  r = post("/v1/load_lora_adapter", {{"lora_name", "x"}});
  BOOST_TEST(r.status == 400);
  BOOST_TEST(json::parse(r.body)["error"]["param"] == "lora_path");
  r = post("/v1/load_lora_adapter", {{"lora_name", "tiny-dense"}, {"lora_path", rs_dir}});
  BOOST_TEST(r.status == 400, r.body);
  r = post("/v1/unload_lora_adapter", {{"lora_name", "nope"}});
  BOOST_TEST(r.status == 404);
  {  // a rank above max_lora_rank: 400 naming it (rs's rank is 4)
    auto capped = cfg;
    capped.max_lora_rank = 2;
    auto small = start(capped);
    http_client hs(small->http_port());
    hs.post("/v1/load_lora_adapter", json({{"lora_name", "rs"}, {"lora_path", rs_dir}}).dump());
    const auto refused = hs.read();
    BOOST_TEST(refused.status == 400);
    BOOST_TEST(refused.body.find("has rank 4, above model.max_lora_rank (--max-lora-rank) 2") != std::string::npos,
               refused.body);
  }

  // Unloading while a request of the adapter runs: it finishes with its own tokens; new ones are
  // refused; the slot empties once it is done.
  auto long_req = ids_request("long", {1, 2, 3}, 200);
  long_req.adapter = "peft";
  long_req.ignore_eos = true;
  auto s = cl.generate(long_req);
  std::vector<int32_t> streamed;
  const auto first = s.next();
  BOOST_REQUIRE(first.has_value());
  streamed = first->ids;
  r = post("/v1/unload_lora_adapter", {{"lora_name", "peft"}});
  BOOST_TEST(r.status == 200, r.body);
  BOOST_TEST(r.body == "Success: LoRA adapter 'peft' removed successfully.");
  auto after = q;
  after.id = "after";
  BOOST_CHECK_THROW(cl.complete(after), client::request_error);  // the name is gone
  while (auto t = s.next()) streamed.insert(streamed.end(), t->ids.begin(), t->ids.end());
  BOOST_TEST(streamed == lora_reference(long_req), boost::test_tools::per_element());
  BOOST_TEST(eventually([&] { return srv->model().adapters->draining().empty(); }));
  BOOST_TEST(srv->model().adapters->slots()[0] == nullptr);  // its weights went

  // Loaded again (a new slot), and the other adapter beside it.
  r = post("/v1/load_lora_adapter", {{"lora_name", "peft"}, {"lora_path", peft_dir}});
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  r = post("/v1/load_lora_adapter", {{"lora_name", "rs"}, {"lora_path", rs_dir}});
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  auto again = q, other = q;
  again.id = "again";
  other.id = "other";
  other.adapter = "rs";
  BOOST_TEST(cl.complete(again).ids == lora_reference(again), boost::test_tools::per_element());
  BOOST_TEST(cl.complete(other).ids == lora_reference(other), boost::test_tools::per_element());
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));

  // Off by default: no such paths.
  auto plain = start(test_config());
  http_client p(plain->http_port());
  p.post("/v1/load_lora_adapter", json({{"lora_name", "peft"}, {"lora_path", peft_dir}}).dump());
  r = p.read();
  BOOST_TEST(r.status == 404);
  BOOST_TEST(r.body.find("--allow-runtime-lora-updating") != std::string::npos, r.body);
}

// Loads and unloads racing traffic: each round loads an adapter, starts requests for it and for
// the base model on several connections, and unloads it while they run. Every request either ends
// with exactly its reference tokens (admitted before the unload) or is refused naming the adapter
// (built after it); none hangs; afterwards every slot has drained and emptied, and every KV block
// is free.
BOOST_AUTO_TEST_CASE(loads_and_unloads_race_running_requests) {
  using json = nlohmann::json;
  auto cfg = test_config();
  cfg.allow_runtime_lora_updating = true;
  auto srv = start(cfg);
  http_client h(srv->http_port());
  std::mt19937 rng(33);
  int finished = 0, refused = 0;
  for (int round = 0; round < 4; ++round) {
    const std::string name = round % 2 ? "rs" : "peft";
    h.post("/v1/load_lora_adapter", json({{"lora_name", name}, {"lora_path", round % 2 ? rs_dir : peft_dir}}).dump());
    BOOST_TEST_REQUIRE(h.read().status == 200);
    std::vector<std::unique_ptr<client::client>> conns;
    std::vector<wire::generate_request> reqs;
    std::vector<std::optional<client::stream>> streams;
    for (int i = 0; i < 6; ++i) {
      auto r = ids_request("r" + std::to_string(round) + "-" + std::to_string(i), random_prompt(rng, 30), 12 + 8 * (i % 3));
      r.ignore_eos = true;
      r.adapter = i % 3 == 2 ? "" : name;
      conns.push_back(std::make_unique<client::client>("127.0.0.1", srv->port()));
      streams.emplace_back(conns.back()->generate(r));
      reqs.push_back(std::move(r));
    }
    h.post("/v1/unload_lora_adapter", json({{"lora_name", name}}).dump());
    BOOST_TEST_REQUIRE(h.read().status == 200);
    for (size_t i = 0; i < reqs.size(); ++i) {
      std::vector<int32_t> ids;
      try {
        while (auto t = streams[i]->next()) ids.insert(ids.end(), t->ids.begin(), t->ids.end());
        BOOST_TEST(ids == lora_reference(reqs[i]), boost::test_tools::per_element());
        ++finished;
      } catch (const client::request_error& e) {
        BOOST_TEST(!reqs[i].adapter.empty(), e.what());  // only an adapter's request may be refused
        ++refused;
      }
    }
  }
  BOOST_TEST(finished >= 8);  // the base model's at least
  BOOST_TEST_MESSAGE(finished << " finished, " << refused << " refused");
  BOOST_TEST(eventually([&] { return srv->model().adapters->draining().empty(); }));
  for (const auto& a : srv->model().adapters->slots()) BOOST_TEST(a == nullptr);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

BOOST_AUTO_TEST_SUITE_END()
