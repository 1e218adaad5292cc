#include "examples/cpp/troupe_client.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/core/error.hpp"
#include "runtime/wire/event_codec.hpp"
#include "runtime/wire/request_codec.hpp"

namespace troupe::client {

connection::connection(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string where = host + ":" + std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0)
    throw_error(errc::io_error, "cannot resolve " + where + ": " + gai_strerror(rc));
  int err = 0;
  for (auto* a = res; a; a = a->ai_next) {
    fd_ = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd_ < 0) continue;
    if (::connect(fd_, a->ai_addr, a->ai_addrlen) == 0) break;
    err = errno;
    ::close(fd_);
    fd_ = -1;
  }
  freeaddrinfo(res);
  if (fd_ < 0) throw_error(errc::io_error, "cannot connect to " + where + ": " + std::strerror(err));
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

connection::~connection() { close(); }

void connection::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void connection::send_raw(std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_error(errc::io_error, std::string("send: ") + std::strerror(errno));
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

void connection::send(const wire::request& r) {
  std::string out;
  wire::append_frame(out, wire::encode_request(r));
  send_raw(out);
}

std::optional<wire::event> connection::next_event(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string payload;
  for (;;) {
    if (decoder_.next(payload) == wire::frame_decoder::status::frame) {
      auto d = wire::decode_event(payload);
      if (!d.ok()) throw_error(errc::invalid_input, "undecodable event from the server: " + d.error);
      return std::move(*d.ev);
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{fd_, POLLIN, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) continue;
    char buf[65536];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw_error(errc::io_error, "the server closed the connection");
    decoder_.feed(std::string_view(buf, static_cast<size_t>(n)));
  }
}

bool connection::closed_by_peer(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[65536];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return true;
  }
}

// ---- client ------------------------------------------------------------------------------------

namespace {
std::string id_of(const wire::event& e) {
  return std::visit([](const auto& x) { return x.id; }, e);
}
}  // namespace

wire::event client::next_for(const std::string& id) {
  auto& q = pending_[id];
  while (q.empty()) {
    auto ev = conn_.next_event();
    pending_[id_of(*ev)].push_back(std::move(*ev));
  }
  auto ev = std::move(q.front());
  q.pop_front();
  return ev;
}

stream client::generate(wire::generate_request r) {
  if (r.id.empty()) r.id = "cpp-" + std::to_string(next_id_++);
  std::string id = r.id;
  conn_.send(r);
  return stream(this, id, r.sequences());
}

std::optional<wire::token_event> stream::next() {
  while (!finished()) {
    auto ev = client_->next_for(id_);
    if (auto* t = std::get_if<wire::token_event>(&ev)) return std::move(*t);
    if (auto* d = std::get_if<wire::done_event>(&ev)) {
      auto i = static_cast<size_t>(d->index.value_or(0));
      if (i >= dones_.size())
        throw_error(errc::invalid_input, "done event with index " + std::to_string(i) + " for request '" + id_ + "'");
      dones_[i] = std::move(*d);
      if (++num_done_ == dones_.size()) client_->pending_.erase(id_);
      continue;
    }
    client_->pending_.erase(id_);
    if (auto* e = std::get_if<wire::wire_error>(&ev)) throw request_error(*e);
    throw_error(errc::invalid_input, "unexpected event for generate request '" + id_ + "'");
  }
  return std::nullopt;
}

const std::vector<wire::done_event>& stream::dones() {
  while (next()) {
  }
  return dones_;
}

const wire::done_event& stream::done() { return dones().front(); }

std::vector<completion> client::complete_all(wire::generate_request r) {
  auto s = generate(std::move(r));
  std::vector<completion> out(s.dones_.size());
  while (auto t = s.next()) {
    auto& c = out.at(static_cast<size_t>(t->index.value_or(0)));
    c.text += t->text;
    if (t->reasoning) c.reasoning += *t->reasoning;
    c.ids.insert(c.ids.end(), t->ids.begin(), t->ids.end());
    if (t->logprobs) c.logprobs.push_back(*t->logprobs);
  }
  for (size_t i = 0; i < out.size(); ++i) {
    auto& c = out[i];
    c.done = s.dones_[i];
    if (c.done.has_output) {
      c.text = c.done.text;
      c.reasoning = c.done.reasoning.value_or("");
      c.ids = c.done.ids;
      c.logprobs = c.done.logprobs;
    }
  }
  return out;
}

std::vector<std::vector<float>> client::embed(wire::generate_request r) {
  if (!r.embed) throw_error(errc::invalid_argument, "embed() needs a request with embed fields");
  r.n = static_cast<int32_t>(r.embed->texts.empty() ? r.embed->ids.size() : r.embed->texts.size());
  std::vector<std::vector<float>> out;
  for (auto& c : complete_all(std::move(r))) {
    if (c.done.error) throw request_error(*c.done.error);
    if (!c.done.embedding) throw_error(errc::invalid_input, "a done event without an embedding for '" + c.done.id + "'");
    out.push_back(std::move(*c.done.embedding));
  }
  return out;
}

std::vector<client::classification> client::classify(wire::generate_request r) {
  if (!r.embed) throw_error(errc::invalid_argument, "classify() needs a request with embed fields (its inputs)");
  r.embed->classify = true;
  r.n = static_cast<int32_t>(r.embed->texts.empty() ? r.embed->ids.size() : r.embed->texts.size());
  std::vector<classification> out;
  for (auto& c : complete_all(std::move(r))) {
    if (c.done.error) throw request_error(*c.done.error);
    if (!c.done.probs || !c.done.label)
      throw_error(errc::invalid_input, "a done event without label probabilities for '" + c.done.id + "'");
    out.push_back({std::move(*c.done.probs), std::move(*c.done.label)});
  }
  return out;
}

std::vector<double> client::rerank(wire::generate_request r) {
  if (!r.rerank) throw_error(errc::invalid_argument, "rerank() needs a request with rerank fields");
  r.n = static_cast<int32_t>(r.rerank->documents.size());
  std::vector<double> out;
  for (auto& c : complete_all(std::move(r))) {
    if (c.done.error) throw request_error(*c.done.error);
    if (!c.done.score) throw_error(errc::invalid_input, "a done event without a score for '" + c.done.id + "'");
    out.push_back(*c.done.score);
  }
  return out;
}

completion client::complete(wire::generate_request r) {
  if (r.sequences() != 1)
    throw_error(errc::invalid_argument, "complete() reads one completion; use complete_all() for n > 1 or a batch of prompts");
  return std::move(complete_all(std::move(r)).front());
}

void client::cancel(const std::string& id) { conn_.send(wire::cancel_request{id}); }

wire::event client::simple(wire::request r, std::string& id) {
  id = "cpp-" + std::to_string(next_id_++);
  std::visit([&](auto& x) { x.id = id; }, r);
  conn_.send(r);
  auto ev = next_for(id);
  pending_.erase(id);
  if (auto* e = std::get_if<wire::wire_error>(&ev)) throw request_error(*e);
  return ev;
}

std::vector<int32_t> client::tokenize(wire::tokenize_request r) {
  std::string id;
  return std::get<wire::tokenize_event>(simple(std::move(r), id)).ids;
}

wire::health_event client::health() {
  std::string id;
  return std::get<wire::health_event>(simple(wire::health_request{}, id));
}

std::vector<wire::model_info> client::models() {
  std::string id;
  return std::get<wire::models_event>(simple(wire::models_request{}, id)).models;
}

}  // namespace troupe::client
