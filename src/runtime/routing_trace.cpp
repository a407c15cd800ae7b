#include "runtime/routing_trace.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "util/error.h"
#include "util/regular_file.h"

namespace epq::runtime {
namespace {

static_assert(std::endian::native == std::endian::little, "traces are written in the host's byte order, little-endian");

constexpr uint8_t kPassTag = 'P', kLayerTag = 'L', kEndTag = 'E';
constexpr uint64_t kPage = 4096;

// Reads fields from the bytes of a trace; running out is "truncated".
class Cursor {
 public:
  Cursor(const std::string& path, const std::string& bytes) : path_(path), bytes_(bytes) {}
  template <typename T>
  T get(const char* what) {
    T v;
    need(sizeof v, what);
    std::memcpy(&v, bytes_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  std::string text(const char* what) {
    const uint32_t n = get<uint32_t>(what);
    need(n, what);
    std::string s = bytes_.substr(at_, n);
    at_ += n;
    return s;
  }
  template <typename T>
  void array(std::vector<T>& out, size_t n, const char* what) {
    need(n * sizeof(T), what);
    out.resize(n);
    std::memcpy(out.data(), bytes_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
  }
  bool done() const { return at_ == bytes_.size(); }
  size_t offset() const { return at_; }
  [[noreturn]] void bad(const std::string& why) const { fail("{}: not a valid routing trace: {} (at byte {})", path_, why, at_); }

 private:
  void need(size_t n, const char* what) const {
    if (bytes_.size() - at_ < n) fail("{}: the routing trace is truncated: it ends inside {} at byte {}", path_, what, bytes_.size());
  }
  const std::string& path_;
  const std::string& bytes_;
  size_t at_ = 0;
};

}  // namespace

TraceHeader TraceHeader::of_model(const std::string& model_path, const models::ModelInfo& info) {
  TraceHeader h;
  h.architecture = info.architecture;
  h.model = std::filesystem::path(model_path).filename().string();
  h.n_layer = info.n_layer;
  h.n_expert = info.n_expert;
  h.k = info.n_expert_used;
  if (h.n_expert > 65536) fail("--trace-routing: {} experts per layer do not fit the trace's 16-bit expert ids", h.n_expert);
  for (const models::ExpertLayout& l : info.experts) {
    h.layers.push_back(pager::layer_slot_shape(l));
    std::vector<uint32_t>& pages = h.read_pages.emplace_back();
    for (int e = 0; e < l.n_expert; ++e) pages.push_back(static_cast<uint32_t>(pager::expert_read_bytes(l, e) / kPage));
  }
  h.layers.resize(static_cast<size_t>(h.n_layer));
  h.read_pages.resize(static_cast<size_t>(h.n_layer));
  return h;
}

std::string TraceHeader::mismatch(const TraceHeader& o) const {
  if (architecture != o.architecture || n_layer != o.n_layer || n_expert != o.n_expert) {
    return fmt::format("recorded on a {} with {} layers of {} experts ({}), not a {} with {} layers of {} experts", architecture, n_layer,
                       n_expert, model, o.architecture, o.n_layer, o.n_expert);
  }
  if (k != o.k) return fmt::format("recorded with {} experts per token, not {}", k, o.k);
  for (size_t l = 0; l < layers.size(); ++l) {
    const auto& a = layers[l];
    const auto& b = o.layers[l];
    if (a.n_expert != b.n_expert || !std::equal(a.part_bytes, a.part_bytes + 3, b.part_bytes) || read_pages[l] != o.read_pages[l]) {
      return fmt::format("layer {} has other expert sizes in the recorded model ({})", l, model);
    }
  }
  return {};
}

std::vector<int> TraceLayer::distinct() const {
  std::vector<int> out(experts.begin(), experts.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

RoutingTrace read_routing_trace(const std::string& path) {
  const std::string bytes = read_regular_file(path, "routing trace", uint64_t{1} << 40);
  Cursor in(path, bytes);
  if (bytes.size() < sizeof kTraceMagic || std::memcmp(bytes.data(), kTraceMagic, sizeof kTraceMagic) != 0) {
    fail("{}: not a routing trace (it does not start with EPQTRACE; record one with --trace-routing)", path);
  }
  for (size_t i = 0; i < sizeof kTraceMagic; ++i) in.get<char>("the magic");
  const uint32_t version = in.get<uint32_t>("the header");
  if (version != kTraceVersion) fail("{}: routing trace version {} is not supported (this epq reads version {})", path, version, kTraceVersion);
  RoutingTrace t;
  TraceHeader& h = t.header;
  h.architecture = in.text("the header");
  h.model = in.text("the header");
  h.n_layer = static_cast<int>(in.get<uint32_t>("the header"));
  h.n_expert = static_cast<int>(in.get<uint32_t>("the header"));
  h.k = static_cast<int>(in.get<uint32_t>("the header"));
  if (h.n_layer < 1 || h.n_layer > 65535 || h.n_expert < 1 || h.n_expert > 65536 || h.k < 1 || h.k > h.n_expert) {
    in.bad(fmt::format("implausible shape: {} layers, {} experts, {} per token", h.n_layer, h.n_expert, h.k));
  }
  for (int l = 0; l < h.n_layer; ++l) {
    pager::LayerSlotShape& s = h.layers.emplace_back();
    s.n_expert = static_cast<int>(in.get<uint32_t>("the layer table"));
    if (s.n_expert > h.n_expert || (s.n_expert > 0 && s.n_expert < h.k)) in.bad(fmt::format("layer {} has {} experts", l, s.n_expert));
    std::vector<uint32_t>& pages = h.read_pages.emplace_back();
    if (s.n_expert == 0) continue;
    for (uint64_t& p : s.part_bytes) {
      p = in.get<uint64_t>("the layer table");
      if (p == 0 || p % kPage != 0 || p > (uint64_t{1} << 40)) in.bad(fmt::format("layer {} has a slot part of {} bytes", l, p));
    }
    in.array(pages, static_cast<size_t>(s.n_expert), "the layer table");
    const uint64_t slot_pages = (s.part_bytes[0] + s.part_bytes[1] + s.part_bytes[2]) / kPage;
    for (uint32_t p : pages) {
      if (p == 0 || p > slot_pages) in.bad(fmt::format("layer {} reads {} pages for an expert of a {}-page slot", l, p, slot_pages));
    }
  }
  if (std::none_of(h.layers.begin(), h.layers.end(), [](const pager::LayerSlotShape& s) { return s.n_expert > 0; })) {
    in.bad("no layer has routed experts");
  }
  uint64_t n_layers = 0;
  for (;;) {
    if (in.done()) fail("{}: the routing trace is truncated: it has no end record (was the recording process killed?)", path);
    const uint8_t tag = in.get<uint8_t>("a record");
    if (tag == kEndTag) {
      const uint64_t passes = in.get<uint64_t>("the end record"), layers = in.get<uint64_t>("the end record");
      if (passes != t.passes.size() || layers != n_layers) {
        in.bad(fmt::format("the end record counts {} passes and {} layers, the file holds {} and {}", passes, layers, t.passes.size(), n_layers));
      }
      if (!in.done()) in.bad("bytes after the end record");
      return t;
    }
    if (tag == kPassTag) {
      TracePass& p = t.passes.emplace_back();
      p.n_tokens = static_cast<int>(in.get<uint32_t>("a pass record"));
      p.pos0 = in.get<int32_t>("a pass record");
      if (p.n_tokens < 1 || p.n_tokens > (1 << 24)) in.bad(fmt::format("a pass of {} tokens", p.n_tokens));
      continue;
    }
    if (tag != kLayerTag) in.bad(fmt::format("unknown record type {}", static_cast<int>(tag)));
    if (t.passes.empty()) in.bad("a layer record before the first pass record");
    TracePass& p = t.passes.back();
    TraceLayer& l = p.layers.emplace_back();
    l.layer = in.get<uint16_t>("a layer record");
    l.n_tokens = static_cast<int>(in.get<uint32_t>("a layer record"));
    if (l.layer >= h.n_layer || h.layers[static_cast<size_t>(l.layer)].n_expert == 0) in.bad(fmt::format("layer {} has no routed experts", l.layer));
    if (p.layers.size() > 1 && l.layer <= p.layers[p.layers.size() - 2].layer) in.bad(fmt::format("layer {} out of order in a pass", l.layer));
    if (l.n_tokens != p.n_tokens) in.bad(fmt::format("layer {} routes {} tokens in a pass of {}", l.layer, l.n_tokens, p.n_tokens));
    const size_t n = static_cast<size_t>(l.n_tokens) * static_cast<size_t>(h.k);
    l.experts.resize(n);
    l.weights.resize(n);
    const int layer_experts = h.layers[static_cast<size_t>(l.layer)].n_expert;
    for (size_t i = 0; i < n; ++i) {
      l.experts[i] = in.get<uint16_t>("a layer record");
      l.weights[i] = in.get<float>("a layer record");
      if (l.experts[i] >= layer_experts) in.bad(fmt::format("expert {} of layer {} (the layer has {})", l.experts[i], l.layer, layer_experts));
    }
    ++n_layers;
  }
}

TraceWriter::TraceWriter(const std::string& path, const TraceHeader& h) : path_(path), k_(h.k) {
  out_ = std::fopen(path.c_str(), "wb");
  if (out_ == nullptr) fail("cannot create {}: {}", path, std::strerror(errno));
  auto u32 = [&](uint64_t v) { const uint32_t x = static_cast<uint32_t>(v); put(&x, 4); };
  auto text = [&](const std::string& s) { u32(s.size()); put(s.data(), s.size()); };
  put(kTraceMagic, sizeof kTraceMagic);
  u32(kTraceVersion);
  text(h.architecture);
  text(h.model);
  u32(static_cast<uint64_t>(h.n_layer));
  u32(static_cast<uint64_t>(h.n_expert));
  u32(static_cast<uint64_t>(h.k));
  for (size_t l = 0; l < h.layers.size(); ++l) {
    u32(static_cast<uint64_t>(h.layers[l].n_expert));
    if (h.layers[l].n_expert == 0) continue;
    put(h.layers[l].part_bytes, sizeof h.layers[l].part_bytes);
    put(h.read_pages[l].data(), h.read_pages[l].size() * 4);
  }
  check();
}

TraceWriter::~TraceWriter() {
  put(&kEndTag, 1);
  put(&passes_, 8);
  put(&layers_, 8);
  if (std::fclose(out_) != 0 || failed_) {
    std::fprintf(stderr, "epq: warning: the routing trace %s could not be completed\n", path_.c_str());
  }
}

void TraceWriter::pass(int64_t n_tokens, int32_t pos0) {
  const uint32_t n = static_cast<uint32_t>(n_tokens);
  put(&kPassTag, 1);
  put(&n, 4);
  put(&pos0, 4);
  ++passes_;
  check();
}

void TraceWriter::layer(int layer, std::span<const int> experts, std::span<const float> weights) {
  const uint16_t l = static_cast<uint16_t>(layer);
  const uint32_t n = static_cast<uint32_t>(experts.size() / static_cast<size_t>(k_));
  put(&kLayerTag, 1);
  put(&l, 2);
  put(&n, 4);
  for (size_t i = 0; i < experts.size(); ++i) {
    const uint16_t e = static_cast<uint16_t>(experts[i]);
    put(&e, 2);
    put(&weights[i], 4);
  }
  ++layers_;
}

void TraceWriter::put(const void* data, size_t bytes) {
  if (std::fwrite(data, 1, bytes, out_) != bytes) failed_ = true;  // check() reports it
}

void TraceWriter::check() {
  if (failed_ || std::ferror(out_)) fail("cannot write the routing trace {}: {}", path_, std::strerror(errno));
}

}  // namespace epq::runtime
