#include "server/http_server.h"

#include <httplib.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <strings.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <fmt/core.h>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "gguf/split.h"
#include "runtime/conversation_checkpoint.h"
#include "server/access_policy.h"
#include "server/connection_threads.h"
#include "server/generation_queue.h"
#include "server/guarded_server.h"
#include "server/metrics.h"
#include "server/openai_protocol.h"
#include "server/reasoning_splitter.h"
#include "server/request_memory.h"
#include "server/web_page.h"
#include "text/chat_template.h"
#include "util/error.h"
#include "util/format.h"

namespace epq::server {
namespace {

using nlohmann::json;

constexpr std::chrono::milliseconds kMemoryPatience{30000};  // how long a request waits for request memory

// Events of one streaming response, passed from the generation worker to the HTTP thread.
struct EventStream {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> events;
  bool done = false;

  void push(std::string event) {
    {
      std::lock_guard lock(mu);
      events.push_back(std::move(event));
    }
    cv.notify_all();
  }
  void finish() {
    {
      std::lock_guard lock(mu);
      done = true;
    }
    cv.notify_all();
  }
};

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

bool httplib_is_chunked(const httplib::Request& req) { return strcasecmp(req.get_header_value("Transfer-Encoding").c_str(), "chunked") == 0; }

std::string sse(const json& j) { return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n"; }

class Server {
 public:
  Server(runtime::Engine& engine, const ServerOptions& options)
      : engine_(engine),
        options_(options),
        chat_template_(engine.file(), engine.tokenizer(), options.chat_template),
        queue_(engine, options.parallel),
        body_memory_(kRequestBytesPerBodyByte * options.max_body_bytes),
        prepare_memory_(kRequestFixedBytes),
        access_({options.api_key, options.cors_origins, options.host}) {
    if (options_.model_id.empty()) options_.model_id = gguf::model_name(engine.options().model_path);
    routes();
  }

  void listen() {
    http_.new_task_queue = [n = options_.max_connections] { return new ConnectionThreads(n); };
    int listener = -1;
    http_.set_socket_options([&listener](socket_t sock) {
      httplib::default_socket_options(sock);
      listener = sock;
    });
    if (!http_.bind_to_port(options_.host, options_.port)) {
      fail("cannot listen on {}:{} (is the port in use?)", options_.host, options_.port);
    }
    // Debian's httplib listens with a backlog of 5: a burst of connections overflows it and
    // some are reset. Listening again on the socket raises the backlog.
    if (listener >= 0) ::listen(listener, SOMAXCONN);
    fmt::print(stderr, "epq serve: {} on http://{}:{}/ (model id '{}', {}; {} reserved for up to {} connections{} and {}-byte bodies)\n",
               engine_.info().name, options_.host, options_.port, options_.model_id,
               chat_template_.is_chatml_fallback() ? "ChatML template" : "the model's chat template", format_bytes(server_reserve_bytes(options_)),
               options_.max_connections,
               options_.max_connections_per_address > 0 ? fmt::format(", {} per address", options_.max_connections_per_address) : "",
               options_.max_body_bytes);
    if (options_.api_key.empty() && !is_loopback_host(options_.host)) {
      fmt::print(stderr, "epq serve: warning: listening on {} without an API key: anyone who can reach port {} can use the model "
                 "(set --api-key-file, --api-key or EPQ_API_KEY)\n", options_.host, options_.port);
    }
    if (!http_.listen_after_bind()) fail("the server stopped accepting connections on {}:{}", options_.host, options_.port);
  }

  // Finishes queued generations, then stops the HTTP server.
  void shutdown() {
    queue_.drain();
    http_.stop();
  }

 private:
  void routes() {
    http_.set_payload_max_length(options_.max_body_bytes);
    // Every request passes the access policy before it is routed or its body is read.
    http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      try {
        return access_.admit(req, res) ? httplib::Server::HandlerResponse::Handled : httplib::Server::HandlerResponse::Unhandled;
      } catch (const ApiError& e) {
        metrics_.failure(e.status);
        send_error(res, e);
        if (e.status == 401) res.set_header("WWW-Authenticate", "Bearer");
        // The body is left unread: the connection cannot carry another request.
        if (req.has_header("Content-Length") || req.has_header("Transfer-Encoding")) res.set_header("Connection", "close");
        return httplib::Server::HandlerResponse::Handled;
      }
    });
    http_.Get("/", [](const httplib::Request&, httplib::Response& res) { res.set_content(chat_page_html(), "text/html; charset=utf-8"); });
    http_.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(json{{"status", "ok"}, {"queue_depth", queue_.depth()}}.dump(), "application/json");
    });
    http_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      json model = {{"id", options_.model_id}, {"object", "model"}, {"created", start_time_}, {"owned_by", "epq"}};
      res.set_content(json{{"object", "list"}, {"data", json::array({model})}}.dump(), "application/json");
    });
    http_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics_.render(queue_.depth(), queue_.running(), engine_.batched_passes().counts(),
                                          engine_.pager() ? engine_.pager()->arena_bytes() : 0), "text/plain; version=0.0.4");
    });
    http_.set_read_timeout(options_.read_timeout_seconds, 0);
    http_.set_write_timeout(options_.read_timeout_seconds, 0);
    http_.set_keep_alive_timeout(options_.read_timeout_seconds);
    // A request's line, headers and body arrive within --request-timeout, its headers within
    // bounds, or the connection ends (server/guarded_server.h).
    http_.set_request_timeout(std::chrono::seconds(options_.request_timeout_seconds));
    // A reply waits for its client to read it at most --reply-timeout in all.
    http_.set_reply_timeout(std::chrono::seconds(options_.reply_timeout_seconds));
    http_.set_max_connections_per_address(options_.max_connections_per_address);
    http_.set_refusal_handler([this](int status, const std::string& message) {
      metrics_.failure(status);
      return ApiError(status, status == 429 ? "rate_limit_error" : "invalid_request_error", message).body();
    });
    http_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& body) {
      complete(req, body, res, true);
    });
    http_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& body) {
      complete(req, body, res, false);
    });
    // Errors httplib raises itself (unknown path, body too large) get OpenAI-style bodies too.
    http_.set_error_handler([this](const httplib::Request&, httplib::Response& res) {
      if (!res.body.empty()) return;
      const std::string message = res.status == 413 ? fmt::format("the request body is larger than {} bytes", options_.max_body_bytes)
                                  : res.status == 404 ? "no such endpoint"
                                                      : fmt::format("HTTP error {}", res.status);
      metrics_.failure(res.status);
      res.set_content(ApiError(res.status, res.status >= 500 ? "server_error" : "invalid_request_error", message).body(), "application/json");
    });
  }

  static void send_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status;
    if (e.status == 503) res.set_header("Retry-After", "1");
    res.set_content(e.body(), "application/json");
  }

  static ApiError busy() { return ApiError(503, "server_error", "the server is busy with other large requests; retry shortly"); }

  // Reads the body, at most --max-body bytes whether sized or chunked, holding the part
  // of its cost per body byte (see request_bytes) in `body_share` as it arrives: a sized
  // body's all before it is read, a chunked body's chunk by chunk. (The fixed part is
  // taken once the body is complete: a client that sends its body slowly, or never
  // finishes it, holds only its body's share, and the requests of others go on.)
  std::string read_body(const httplib::Request& req, const httplib::ContentReader& reader, MemoryReservation& body_share) {
    const size_t limit = options_.max_body_bytes;
    auto too_large = [&] { return ApiError(413, "invalid_request_error", fmt::format("the request body is larger than {} bytes (--max-body)", limit)); };
    const bool sized = req.has_header("Content-Length") && !httplib_is_chunked(req);
    if (sized) {
      const uint64_t declared = req.get_header_value<uint64_t>("Content-Length");
      if (declared > limit) throw too_large();
      if (!body_share.grow(declared * kRequestBytesPerBodyByte, kMemoryPatience)) throw busy();
    }
    std::string body;
    bool over = false, starved = false;
    const bool ok = reader([&](const char* data, size_t n) {
      if (body.size() + n > limit) return !(over = true);
      if (!sized && !body_share.grow((body.size() + n) * kRequestBytesPerBodyByte - body_share.bytes(), kMemoryPatience)) {
        return !(starved = true);
      }
      body.append(data, n);
      return true;
    });
    if (over) throw too_large();
    if (starved) throw busy();
    if (!ok) {
      const ReadCut cut = GuardedServer::read_cut();
      if (cut == ReadCut::deadline) {
        throw ApiError(408, "invalid_request_error",
                       fmt::format("the request did not arrive within {} s (--request-timeout)", options_.request_timeout_seconds));
      }
      if (cut == ReadCut::silent) {
        throw ApiError(408, "invalid_request_error",
                       fmt::format("the client sent nothing for {} s in the middle of its body (--timeout)", options_.read_timeout_seconds));
      }
      throw invalid_request("the request body could not be read");
    }
    return body;
  }

  // The request's prompt as tokens; its messages (or prompt text) are moved out.
  // For models with recurrent state, *checkpoint is where the conversation before the
  // generation prompt ends (see runtime/conversation_checkpoint.h).
  std::vector<int32_t> tokenize_prompt(CompletionRequest& r, bool* opens_reasoning, int32_t* checkpoint) {
    std::string text = std::move(r.prompt);
    // Recurrent models: the request, kept for the checkpoint (within the reservation).
    std::optional<nlohmann::ordered_json> history, history_tools, history_kwargs;
    if (r.chat) {
      try {
        if (engine_.info().recurrent_bytes > 0) history = r.messages, history_tools = r.tools, history_kwargs = r.template_kwargs;
        text = chat_template_.render(std::move(r.messages), std::move(r.tools), true, std::move(r.template_kwargs));
      } catch (const Error& e) {
        throw invalid_request(std::string("the chat template failed: ") + e.what(), "messages");
      }
    }
    *opens_reasoning = r.chat && prompt_opens_reasoning(text);
    const text::Tokenizer& tok = engine_.tokenizer();
    const size_t ctx = static_cast<size_t>(engine_.options().n_ctx);
    auto too_long = [&](const std::string& count) {
      return ApiError(400, "invalid_request_error", fmt::format("the prompt has {} tokens, but the context holds {} (--ctx)", count, ctx),
                      "context_length_exceeded", r.chat ? "messages" : "prompt");
    };
    // No token covers more than longest_token_bytes() of text: a longer prompt is refused
    // before it is tokenized.
    if (text.size() > ctx * tok.longest_token_bytes()) throw too_long(fmt::format("more than {}", ctx));
    std::vector<int32_t> ids = tok.encode_prompt(text, true);
    if (ids.empty()) throw invalid_request("the prompt is empty", r.chat ? "messages" : "prompt");
    if (ids.size() >= ctx) throw too_long(std::to_string(ids.size()));
    if (history) {
      try {
        *checkpoint = runtime::conversation_checkpoint(chat_template_, tok, std::move(*history), std::move(*history_tools),
                                                       std::move(*history_kwargs), ids);
      } catch (const Error&) {
        *checkpoint = 0;  // the template cannot render the conversation without a generation prompt: no checkpoint
      }
    }
    return ids;
  }

  void complete(const httplib::Request& req, const httplib::ContentReader& reader, httplib::Response& res, bool chat) {
    metrics_.request(chat);
    bool body_read = false;
    try {
      CompletionRequest r;
      bool opens_reasoning = false;
      auto job = std::make_shared<Job>();
      {
        // The request's memory until its prompt is tokens: its body's share, then the
        // fixed part for preparing it (one request is prepared at a time).
        MemoryReservation body_share(body_memory_), prepare_share(prepare_memory_);
        std::string body = read_body(req, reader, body_share);
        body_read = true;
        if (!prepare_share.grow(kRequestFixedBytes, kMemoryPatience)) throw busy();
        r = parse_completion_request(std::exchange(body, {}), chat, options_.max_tokens);  // the body is freed once parsed
        if (!r.model.empty() && r.model != options_.model_id) {
          throw ApiError(404, "invalid_request_error",
                         fmt::format("the model '{}' does not exist; this server has '{}'", r.model, options_.model_id), "model_not_found",
                         "model");
        }
        job->prompt = tokenize_prompt(r, &opens_reasoning, &job->checkpoint);
      }
      job->options = r.generate;
      const Reply reply{fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", ++next_id_), options_.model_id,
                        unix_seconds(),
                        chat};
      if (r.stream) {
        stream(res, r, job, reply, opens_reasoning);
      } else {
        respond(res, job, reply, opens_reasoning);
      }
    } catch (const ApiError& e) {
      metrics_.failure(e.status);
      send_error(res, e);
    } catch (const std::exception& e) {
      metrics_.failure(500);
      send_error(res, ApiError(500, "server_error", printable(e.what())));
    }
    // A body left unread (refused for its size, or cut off) leaves the connection unable to carry another request.
    if (!body_read) res.set_header("Connection", "close");
  }

  void record(const Job& job) {
    const auto& g = job.result;
    metrics_.generation(g.prompt_tokens, g.prompt_seconds, static_cast<int>(g.tokens.size()), g.generation_seconds,
                        engine_.pager() ? &engine_.pager()->stats() : nullptr);
  }

  void respond(httplib::Response& res, const std::shared_ptr<Job>& job, const Reply& reply, bool opens_reasoning) {
    ReasoningSplitter splitter(opens_reasoning);
    std::string content, reasoning;
    job->on_text = [&](std::string_view piece) {
      auto d = reply.chat ? splitter.push(piece) : ReasoningSplitter::Delta{"", std::string(piece)};
      content += d.content, reasoning += d.reasoning;
      return true;
    };
    if (!queue_.submit(job)) throw ApiError(503, "server_error", "the server is shutting down");
    job->wait();
    if (!job->error.empty()) throw ApiError(500, "server_error", job->error);
    record(*job);
    if (reply.chat) {
      auto d = splitter.finish();
      content += d.content, reasoning += d.reasoning;
    }
    json logprobs;
    if (job->options.logprobs >= 0) {
      const text::Tokenizer& tok = engine_.tokenizer();
      logprobs = logprobs_json(reply.chat, job->result.logprobs, [&](int32_t id) { return tok.token_text(id, false); });
    }
    res.set_content(completion_response(reply, content, reasoning, job->result.finish_reason, job->result.prompt_tokens, job->result.cached_tokens,
                                        static_cast<int>(job->result.tokens.size()), logprobs)
                        .dump(-1, ' ', false, json::error_handler_t::replace),
                    "application/json");
  }

  void stream(httplib::Response& res, const CompletionRequest& r, const std::shared_ptr<Job>& job, const Reply& reply, bool opens_reasoning) {
    auto events = std::make_shared<EventStream>();
    auto splitter = std::make_shared<ReasoningSplitter>(opens_reasoning);
    auto emit = [events, reply](const ReasoningSplitter::Delta& d) {
      if (!reply.chat) {
        if (!d.content.empty()) events->push(sse(completion_chunk(reply, d.content, "")));
        return;
      }
      if (!d.reasoning.empty()) events->push(sse(completion_chunk(reply, {{"reasoning_content", d.reasoning}}, "")));
      if (!d.content.empty()) events->push(sse(completion_chunk(reply, {{"content", d.content}}, "")));
    };
    if (reply.chat) events->push(sse(completion_chunk(reply, {{"role", "assistant"}, {"content", ""}}, "")));
    job->on_text = [splitter, emit, chat = reply.chat](std::string_view piece) {
      emit(chat ? splitter->push(piece) : ReasoningSplitter::Delta{"", std::string(piece)});
      return true;
    };
    // When the job ends (on the generation worker): the closing chunks.
    job->on_done = [this, job = job.get(), events, splitter, emit, reply, include_usage = r.include_usage] {
      if (!job->error.empty()) {
        metrics_.failure(500);
        events->push(sse(ApiError(500, "server_error", job->error).to_json()));
      } else {
        record(*job);
        if (reply.chat) emit(splitter->finish());
        events->push(sse(completion_chunk(reply, reply.chat ? json::object() : json(""), job->result.finish_reason)));
        if (include_usage) events->push(sse(usage_chunk(reply, job->result.prompt_tokens, job->result.cached_tokens, static_cast<int>(job->result.tokens.size()))));
      }
      events->push("data: [DONE]\n\n");
      events->finish();
    };
    if (!queue_.submit(job)) throw ApiError(503, "server_error", "the server is shutting down");
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream", [events, job](size_t, httplib::DataSink& sink) {
      std::unique_lock lock(events->mu);
      events->cv.wait(lock, [&] { return !events->events.empty() || events->done; });
      while (!events->events.empty()) {
        const std::string e = std::move(events->events.front());
        events->events.pop_front();
        lock.unlock();
        if (!sink.write(e.data(), e.size())) {
          job->cancelled = true;  // the client went away: stop generating
          return false;
        }
        lock.lock();
      }
      if (events->done) sink.done();
      return true;
    }, [job](bool success) {
      if (!success) job->cancelled = true;
    });
  }

  runtime::Engine& engine_;
  ServerOptions options_;
  text::ChatTemplate chat_template_;
  GenerationQueue queue_;
  RequestMemory body_memory_, prepare_memory_;  // together request_bytes(--max-body)
  AccessPolicy access_;
  Metrics metrics_;
  GuardedServer http_;
  std::atomic<uint64_t> next_id_{0};
  int64_t start_time_ = unix_seconds();
};

}  // namespace

namespace {
sigset_t shutdown_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  return signals;
}
}  // namespace

void block_shutdown_signals() {
  const sigset_t signals = shutdown_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

uint64_t server_reserve_bytes(const ServerOptions& o) {
  constexpr uint64_t kOwnBytes = 16 << 20;  // template, web page, metrics, queued responses
  return kOwnBytes + static_cast<uint64_t>(o.max_connections) * kConnectionBytes + request_bytes(o.max_body_bytes);
}

void serve(runtime::Engine& engine, const ServerOptions& options) {
  // Signals go to one thread that waits for them; the others never see them.
  block_shutdown_signals();
  const sigset_t signals = shutdown_signals();
  Server server(engine, options);
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    fmt::print(stderr, "epq serve: {} received; finishing queued requests\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    server.shutdown();
  });
  try {
    server.listen();
  } catch (...) {
    pthread_kill(waiter.native_handle(), SIGTERM);
    waiter.join();
    throw;
  }
  waiter.join();
  fmt::print(stderr, "epq serve: stopped\n");
}

}  // namespace epq::server
