// An in-process Troupe server: loads the model, starts the actor system and every serving actor,
// binds the ports. What `troupe serve` runs and what the end-to-end tests start. No CAF in this
// header: callers (the CLI, tests) stay cheap to compile.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "runtime/serve/metrics.hpp"
#include "runtime/serve/request_builder.hpp"
#include "runtime/serve/server_config.hpp"
#include "runtime/serve/step_backend.hpp"

namespace troupe::actors {

struct server_options {
  serve::server_config cfg;
  std::string model_dir;
  std::string tokenizer_dir;  // "": the model directory when it has tokenizer.json, else none
  // Makes the step backend of model.device 'cuda' (serve::make_cuda_backend): given by a binary
  // built with the CUDA engine (the troupe CLI, the CUDA tests), so that this library and the
  // CPU-only tests never link CUDA. Null: 'cuda' is refused as not built in.
  std::function<std::unique_ptr<serve::step_backend>(std::shared_ptr<const checkpoint>, int32_t num_blocks,
                                                     int32_t block_size)>
      cuda_backend;
  // Where the periodic stats line ([server] log_stats_interval_ms) and the request log
  // ([server] log_requests) go, a line at a time; null: stderr, after "troupe serve: ".
  std::function<void(const std::string&)> log_sink;
};

class server {
 public:
  // Throws troupe::error when the model cannot be loaded, the KV pool cannot hold one
  // max_model_len sequence, or a port cannot be bound.
  explicit server(server_options opts);
  ~server();  // shutdown(0) unless already shut down
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  uint16_t port() const noexcept;
  uint16_t metrics_port() const noexcept;  // 0 when disabled
  uint16_t http_port() const noexcept;     // the OpenAI-compatible API; 0 when disabled
  const serve::model_facts& model() const noexcept;
  int32_t num_kv_blocks() const noexcept;
  std::string banner() const;
  serve::metrics& metrics() noexcept;

  // Stops accepting; running requests get `grace` to finish, then end with `done` (cancelled).
  // Returns once everything has stopped (at most grace + a few seconds).
  void shutdown(std::chrono::milliseconds grace);

  // Test hooks: fail an actor (the supervisor restarts it); restarts so far.
  void kill_executor();
  void kill_scheduler();
  void kill_tokenizer_worker(int32_t index);
  void kill_prefix_cache();  // the look-up actor (with --redis); both prefix-cache actors restart
  int restarts();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace troupe::actors
