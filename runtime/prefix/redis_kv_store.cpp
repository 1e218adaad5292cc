#include "runtime/prefix/redis_kv_store.hpp"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <functional>

#include "runtime/core/error.hpp"

namespace troupe::prefix {

// NOTE: commands are written with our own RESP framing and sendmsg(), not hiredis's output
// buffer: hiredis 0.14 copies every argument into that buffer and memmoves the rest of it after
// each partial write, which is quadratic for a pipeline of multi-megabyte blocks. hiredis still
// owns the connection set-up and parses every reply (redisReaderFeed / redisGetReplyFromReader).
namespace {

struct reply_deleter {
  void operator()(redisReply* r) const {
    if (r) freeReplyObject(r);
  }
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

void resp_array(std::string& out, size_t argc) {
  out += '*';
  out += std::to_string(argc);
  out += "\r\n";
}
void resp_bulk_header(std::string& out, size_t len) {
  out += '$';
  out += std::to_string(len);
  out += "\r\n";
}
void resp_arg(std::string& out, std::string_view a) {
  resp_bulk_header(out, a.size());
  out.append(a);
  out += "\r\n";
}

enum class io { ok, timeout, failed };

}  // namespace

struct redis_kv_store::impl {
  redis_options opts;
  redisContext* ctx = nullptr;
  store_clock::time_point next_attempt{};
  std::chrono::milliseconds backoff;
  redis_counters c;
  std::vector<char> rbuf = std::vector<char>(size_t{1} << 20);

  explicit impl(redis_options o) : opts(std::move(o)), backoff(opts.backoff_initial) {}
  ~impl() { drop(); }

  void drop() {
    if (ctx) redisFree(ctx);
    ctx = nullptr;
  }
  void back_off() {
    next_attempt = store_clock::now() + backoff;
    backoff = std::min(backoff * 2, opts.backoff_max);
  }
  // An established connection broke (server gone, reset): retry at once, then back off.
  void lost() {
    ++c.disconnects;
    drop();
    next_attempt = store_clock::now();
  }
  // The server is too slow: do not hammer it with new connections either.
  void timed_out() {
    ++c.timeouts;
    if (ctx) ++c.disconnects;
    drop();
    back_off();
  }
  void connect_failed() {
    ++c.connect_failures;
    drop();
    back_off();
  }

  static int remaining_ms(store_clock::time_point deadline) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - store_clock::now()).count();
    return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, INT_MAX));
  }

  io wait(short events, store_clock::time_point deadline) {
    for (;;) {
      int ms = remaining_ms(deadline);
      if (ms == 0) return io::timeout;
      pollfd p{ctx->fd, events, 0};
      int r = ::poll(&p, 1, ms);
      if (r > 0) return io::ok;
      if (r == 0) return io::timeout;
      if (errno != EINTR) return io::failed;
    }
  }

  io write_all(std::vector<iovec>& iov, store_clock::time_point deadline) {
    size_t i = 0;
    while (i < iov.size()) {
      msghdr m{};
      m.msg_iov = &iov[i];
      m.msg_iovlen = std::min<size_t>(iov.size() - i, IOV_MAX);
      ssize_t n = ::sendmsg(ctx->fd, &m, MSG_NOSIGNAL);  // no SIGPIPE when the server is gone
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return io::failed;
        if (auto w = wait(POLLOUT, deadline); w != io::ok) return w;
        continue;
      }
      auto left = static_cast<size_t>(n);
      while (i < iov.size() && left >= iov[i].iov_len) left -= iov[i++].iov_len;
      if (left > 0) {
        iov[i].iov_base = static_cast<char*>(iov[i].iov_base) + left;
        iov[i].iov_len -= left;
      }
    }
    return io::ok;
  }

  io read_reply(reply_ptr& out, store_clock::time_point deadline) {
    for (;;) {
      void* r = nullptr;
      if (redisGetReplyFromReader(ctx, &r) != REDIS_OK) return io::failed;  // protocol error
      if (r) {
        out.reset(static_cast<redisReply*>(r));
        return io::ok;
      }
      ssize_t n = ::read(ctx->fd, rbuf.data(), rbuf.size());
      if (n > 0) {
        if (redisReaderFeed(ctx->reader, rbuf.data(), static_cast<size_t>(n)) != REDIS_OK) return io::failed;
        continue;
      }
      if (n == 0) return io::failed;  // the server closed the connection
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return io::failed;
      if (auto w = wait(POLLIN, deadline); w != io::ok) return w;
    }
  }

  // Sends `iov` (n_replies commands) and hands each reply to `on_reply` in order. Error replies
  // are counted and make the result `error`, but every reply is read so the stream stays in step.
  store_status exchange(std::vector<iovec>& iov, size_t n_replies, store_clock::time_point deadline,
                        const std::function<void(size_t, reply_ptr&)>& on_reply) {
    auto fail = [&](io e) {
      if (e == io::timeout) {
        timed_out();
        return store_status::timeout;
      }
      lost();
      return store_status::unavailable;
    };
    if (auto e = write_all(iov, deadline); e != io::ok) return fail(e);
    bool had_error = false;
    for (size_t i = 0; i < n_replies; ++i) {
      reply_ptr r;
      if (auto e = read_reply(r, deadline); e != io::ok) return fail(e);
      if (r->type == REDIS_REPLY_ERROR) {
        ++c.error_replies;
        had_error = true;
      }
      on_reply(i, r);
    }
    return had_error ? store_status::error : store_status::ok;
  }

  store_status exchange(std::string& commands, size_t n_replies, store_clock::time_point deadline,
                        const std::function<void(size_t, reply_ptr&)>& on_reply) {
    std::vector<iovec> iov{{commands.data(), commands.size()}};
    return exchange(iov, n_replies, deadline, on_reply);
  }

  store_status ensure(store_clock::time_point deadline) {
    if (ctx) return store_status::ok;
    auto now = store_clock::now();
    if (now < next_attempt) {
      ++c.skipped_backoff;
      return store_status::unavailable;
    }
    auto budget = std::min<store_clock::duration>(opts.connect_timeout, deadline - now);
    if (budget <= store_clock::duration::zero()) return store_status::timeout;
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(budget).count();
    timeval tv{static_cast<time_t>(us / 1000000), static_cast<suseconds_t>(us % 1000000)};
    const auto& u = opts.url;
    ctx = u.unix_socket ? redisConnectUnixWithTimeout(u.path.c_str(), tv)
                        : redisConnectWithTimeout(u.host.c_str(), u.port, tv);
    if (!ctx || ctx->err) {
      connect_failed();
      return store_status::unavailable;
    }
    // From here on we drive the socket ourselves, non-blocking, with poll() for every wait.
    int flags = ::fcntl(ctx->fd, F_GETFL);
    if (flags < 0 || ::fcntl(ctx->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
      connect_failed();
      return store_status::unavailable;
    }
    ctx->flags &= ~REDIS_BLOCK;
    ctx->reader->maxbuf = 0;  // keep the read buffer between multi-megabyte replies
    std::string hello;
    size_t n = 0;
    if (!u.password.empty()) {
      resp_array(hello, u.user.empty() ? 2 : 3);
      resp_arg(hello, "AUTH");
      if (!u.user.empty()) resp_arg(hello, u.user);
      resp_arg(hello, u.password);
      ++n;
    }
    if (u.db != 0) {
      resp_array(hello, 2);
      resp_arg(hello, "SELECT");
      resp_arg(hello, std::to_string(u.db));
      ++n;
    }
    if (n > 0) {
      auto st = exchange(hello, n, deadline, [](size_t, reply_ptr&) {});
      if (st != store_status::ok) {
        // Wrong password or db (the server said so), or no answer: retrying at once won't help.
        connect_failed();
        return st;
      }
    }
    ++c.connects;
    backoff = opts.backoff_initial;
    return store_status::ok;
  }
};

redis_kv_store::redis_kv_store(redis_options opts) : impl_(std::make_unique<impl>(std::move(opts))) {}
redis_kv_store::~redis_kv_store() = default;

std::string redis_kv_store::describe() const { return "redis " + impl_->opts.url.redacted(); }
bool redis_kv_store::connected() const noexcept { return impl_->ctx != nullptr; }
store_clock::time_point redis_kv_store::next_attempt() const noexcept { return impl_->next_attempt; }
redis_counters redis_kv_store::counters() const noexcept { return impl_->c; }
void redis_kv_store::disconnect() {
  impl_->drop();
  impl_->next_attempt = {};
}

store_status redis_kv_store::ping(store_clock::time_point deadline) {
  if (auto st = impl_->ensure(deadline); st != store_status::ok) return st;
  std::string cmd;
  resp_array(cmd, 1);
  resp_arg(cmd, "PING");
  return impl_->exchange(cmd, 1, deadline, [](size_t, reply_ptr&) {});
}

store_status redis_kv_store::exists(std::span<const std::string> keys, std::vector<uint8_t>& found,
                                    store_clock::time_point deadline) {
  found.assign(keys.size(), 0);
  if (keys.empty()) return store_status::ok;
  if (auto st = impl_->ensure(deadline); st != store_status::ok) return st;
  std::string cmd;
  for (const auto& k : keys) {
    resp_array(cmd, 2);
    resp_arg(cmd, "EXISTS");
    resp_arg(cmd, k);
  }
  return impl_->exchange(cmd, keys.size(), deadline, [&](size_t i, reply_ptr& r) {
    found[i] = r->type == REDIS_REPLY_INTEGER && r->integer > 0;
  });
}

store_status redis_kv_store::get(std::span<const std::string> keys, std::vector<std::optional<stored_value>>& values,
                                 std::chrono::seconds refresh_ttl, store_clock::time_point deadline) {
  values.assign(keys.size(), std::nullopt);
  if (keys.empty()) return store_status::ok;
  if (auto st = impl_->ensure(deadline); st != store_status::ok) return st;
  const bool refresh = refresh_ttl.count() > 0;
  const std::string ttl = std::to_string(refresh_ttl.count());
  std::string cmd;
  for (const auto& k : keys) {
    resp_array(cmd, 2);
    resp_arg(cmd, "GET");
    resp_arg(cmd, k);
    if (refresh) {  // EXPIRE rather than GETEX: works on every Redis since 1.0
      resp_array(cmd, 3);
      resp_arg(cmd, "EXPIRE");
      resp_arg(cmd, k);
      resp_arg(cmd, ttl);
    }
  }
  const size_t per_key = refresh ? 2 : 1;
  auto st = impl_->exchange(cmd, keys.size() * per_key, deadline, [&](size_t i, reply_ptr& r) {
    if (i % per_key != 0 || r->type != REDIS_REPLY_STRING) return;
    std::shared_ptr<redisReply> owner(r.release(), reply_deleter{});
    values[i / per_key] = stored_value{owner, std::string_view(owner->str, owner->len)};
  });
  if (st != store_status::ok && st != store_status::error) values.assign(keys.size(), std::nullopt);
  return st;
}

store_status redis_kv_store::put(std::span<const std::string> keys, std::span<const std::string_view> values,
                                 std::chrono::seconds ttl, size_t& written, store_clock::time_point deadline) {
  TROUPE_ASSERT(keys.size() == values.size());
  written = 0;
  if (keys.empty()) return store_status::ok;
  if (ttl.count() < 1) throw_error(errc::invalid_argument, "redis put: ttl must be >= 1 s; got " + std::to_string(ttl.count()));
  if (auto st = impl_->ensure(deadline); st != store_status::ok) return st;
  // Per key: "*6 SET key $len" | the value, in place | "EX ttl NX". Built first, so the strings
  // no longer move when the iovecs point into them.
  std::vector<std::string> heads(keys.size()), tails(keys.size());
  std::string tail;
  tail += "\r\n";
  resp_arg(tail, "EX");
  resp_arg(tail, std::to_string(ttl.count()));
  resp_arg(tail, "NX");
  std::vector<iovec> iov;
  iov.reserve(3 * keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    resp_array(heads[i], 6);
    resp_arg(heads[i], "SET");
    resp_arg(heads[i], keys[i]);
    resp_bulk_header(heads[i], values[i].size());
    tails[i] = tail;
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    iov.push_back({heads[i].data(), heads[i].size()});
    iov.push_back({const_cast<char*>(values[i].data()), values[i].size()});
    iov.push_back({tails[i].data(), tails[i].size()});
  }
  return impl_->exchange(iov, keys.size(), deadline, [&](size_t, reply_ptr& r) {
    written += r->type == REDIS_REPLY_STATUS;  // "+OK"; nil when NX found the key
  });
}

}  // namespace troupe::prefix
