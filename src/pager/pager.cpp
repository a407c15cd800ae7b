#include "pager/pager.h"

#include <algorithm>
#include <chrono>

#include "models/resident_experts.h"
#include "pager/uring_engine.h"
#include "quant/rows4_layout.h"
#include "util/error.h"

namespace epq::pager {

Pager::Pager(const std::vector<std::string>& shard_paths, std::vector<models::ExpertLayout> layouts, const PagerOptions& options)
    : files_(shard_paths, options.io.force_buffered),
      layouts_(std::move(layouts)),
      classes_(size_classes(layouts_)),
      slots_per_class_(options.slots_per_class),
      cache_(classes_, slots_per_class_, make_eviction_policy(options.policy)),
      io_options_(options.io),
      prefetch_(options.prefetch) {
  if (!files_.direct()) notes_.push_back("direct I/O unavailable (" + files_.fallback_reason() + "): buffered reads, pages dropped after each read");
  if (io_options_.max_read_bytes < kDirectAlign) fail("--io-split must be at least {} bytes", kDirectAlign);
  io_options_.max_read_bytes = static_cast<uint32_t>(align_down(io_options_.max_read_bytes));

  // Slots numbered class by class, as the cache numbers them.
  std::vector<IoRegion> regions;
  for (size_t c = 0; c < classes_.classes.size(); ++c) {
    const uint64_t slot_bytes = classes_.classes[c].slot_bytes;
    // Buffers of at most 1 GiB, each registered with io_uring as one fixed buffer.
    const int64_t per_buffer = std::max<int64_t>(1, static_cast<int64_t>(UringEngine::kMaxRegistered / slot_bytes));
    for (int64_t done = 0; done < slots_per_class_[c];) {
      const int64_t n = std::min(per_buffer, slots_per_class_[c] - done);
      arena_.emplace_back(static_cast<size_t>(n) * slot_bytes);
      regions.push_back({arena_.back().data(), arena_.back().size()});
      for (int64_t i = 0; i < n; ++i) {
        slots_.push_back({static_cast<int>(c), arena_.back().data() + static_cast<size_t>(i) * slot_bytes});
      }
      done += n;
    }
  }
  std::string note;
  io_ = make_io_engine(files_, io_options_, regions, &note);
  if (!note.empty()) notes_.push_back(note);
  if (prefetch_ == Prefetch::kHistory) predictor_ = std::make_unique<NextLayerPredictor>(classes_);
}

const std::vector<std::string>& prefetch_names() {
  static const std::vector<std::string> names = {"off", "gate", "history"};
  return names;
}

Prefetch parse_prefetch(const std::string& name) {
  if (name == "off") return Prefetch::kOff;
  if (name == "gate") return Prefetch::kStaleGate;
  if (name == "history") return Prefetch::kHistory;
  fail("--prefetch: expected off, gate or history, got '{}'", name);
}

void Pager::predicted(int next_layer, std::span<const int> experts) {
  // A layer the pager does not page (e.g. an MTP block the model skips) is no use.
  const bool paged = next_layer >= 0 && static_cast<size_t>(next_layer) < classes_.class_of_layer.size() &&
                     classes_.class_of_layer[static_cast<size_t>(next_layer)] >= 0;
  told_layer_ = paged ? next_layer : -1;
  if (!paged) return;
  told_.assign(experts.begin(), experts.end());
}

Pager::~Pager() { io_.reset(); }  // drain reads before the arena goes away

uint64_t Pager::arena_bytes() const {
  uint64_t total = 0;
  for (const Buffer& b : arena_) total += Buffer::footprint(b.size());
  return total;
}

void Pager::load(int s, int layer, int expert, bool ahead) {
  Slot& slot = slots_[static_cast<size_t>(s)];
  const models::ExpertLayout& layout = layouts_[static_cast<size_t>(layer)];
  const SizeClass& cls = classes_.classes[static_cast<size_t>(slot.cls)];
  slot.ready = false;
  slot.failed = false;
  slot.deliveries = 0;
  slot.reads_left = 0;
  slot.ahead = slot.ahead_pin = ahead;
  uint64_t base = 0;
  for (int p = 0; p < 3; ++p) {
    const models::ExpertPart& part = layout.part(p);
    const uint64_t off = part.expert_offset(expert), start = align_down(off), end = align_up(off + part.bytes);
    const uint64_t needed = off + part.bytes - start;
    slot.part_offset[p] = base + (off - start);
    for (uint64_t k = 0; k < end - start; k += io_options_.max_read_bytes) {
      const uint32_t length = static_cast<uint32_t>(std::min<uint64_t>(io_options_.max_read_bytes, end - start - k));
      const uint32_t piece_needed = static_cast<uint32_t>(std::min<uint64_t>(length, needed > k ? needed - k : 0));
      uint64_t tag;
      if (!free_pieces_.empty()) {
        tag = free_pieces_.back();
        free_pieces_.pop_back();
        pieces_[tag] = {s, part.shard, start + k, piece_needed, length, ahead, slot.data + base + k};
      } else {
        tag = pieces_.size();
        pieces_.push_back({s, part.shard, start + k, piece_needed, length, ahead, slot.data + base + k});
      }
      to_submit_.push_back({part.shard, start + k, length, slot.data + base + k, tag});
      ++slot.reads_left;
      cache_.stats().bytes_read += length;
      if (ahead) {
        cache_.stats().prefetch_bytes += length;
        ahead_in_flight_ += length;
      } else {
        ++demand_in_flight_;
      }
    }
    base += cls.part_bytes[p];
  }
}

void Pager::submit_loads() {
  cache_.stats().reads += to_submit_.size();
  io_->submit(to_submit_);
  to_submit_.clear();
}

ReadRequest Pager::unread_part(uint64_t tag) const {
  const Piece& p = pieces_[tag];
  return {p.shard, p.offset + p.done, p.length - p.done, p.dest + p.done, tag};
}

void Pager::complete(const ReadCompletion& c) {
  Piece& piece = pieces_[c.tag];
  const ReadRequest read = unread_part(c.tag);
  const int64_t result = faults_.apply(read, c.result);
  const ModelFile& file = files_[piece.shard];
  if (result > 0) file.after_read(read.offset, static_cast<size_t>(result));
  const int64_t missing = static_cast<int64_t>(piece.needed) - piece.done - std::max<int64_t>(result, 0);
  // Cut short before the end of the file (a direct read ends short only at the end, or mid-block): read the rest.
  if (result > 0 && missing > 0 && (!file.direct() || result % static_cast<int64_t>(kDirectAlign) == 0)) {
    piece.done += static_cast<uint32_t>(result);
    to_submit_.push_back(unread_part(c.tag));
    return;
  }
  if (missing > 0 && !failed_read_) failed_read_ = FailedRead{read.shard, read.offset, piece.needed - piece.done, static_cast<long>(result)};
  free_pieces_.push_back(c.tag);
  if (piece.ahead) ahead_in_flight_ -= piece.length;
  else --demand_in_flight_;
  Slot& slot = slots_[static_cast<size_t>(piece.slot)];
  slot.failed |= missing > 0;
  if (--slot.reads_left > 0 || slot.failed) return;
  slot.ready = true;
  if (slot.ahead_pin) {
    slot.ahead_pin = false;
    cache_.unpin(piece.slot);
  }
}

void Pager::place_waiting() {
  while (!waiting_.empty()) {
    const int i = waiting_.front();
    const int s = cache_.place(request_[static_cast<size_t>(i)]);
    if (s < 0) break;
    waiting_.erase(waiting_.begin());
    request_slot_[static_cast<size_t>(i)] = s;
    load(s, cache_.layer(), request_[static_cast<size_t>(i)]);
  }
  submit_loads();
}

void Pager::read_ahead() {
  if (prefetch_ == Prefetch::kOff || ahead_layer_ < 0 || demand_in_flight_ > 0 || !waiting_.empty()) return;
  while (ahead_next_ < ahead_.size() && ahead_in_flight_ < kReadAheadBytes) {
    const int e = ahead_[ahead_next_++];
    if (cache_.holds(ahead_layer_, e)) continue;
    const int s = cache_.place_ahead(ahead_layer_, e);
    if (s < 0) break;  // every slot of the class is pinned
    load(s, ahead_layer_, e, true);
    ++cache_.stats().prefetched;
  }
  if (!to_submit_.empty()) submit_loads();
}

void Pager::settle() {
  while (!to_submit_.empty() || io_->in_flight() > 0) {
    if (!to_submit_.empty()) submit_loads();
    completions_.clear();
    io_->reap(completions_, true);
    for (const ReadCompletion& c : completions_) complete(c);
  }
  for (size_t s = 0; s < slots_.size(); ++s) {
    Slot& slot = slots_[s];
    if (slot.ready || cache_.slot(static_cast<int>(s)).expert < 0) continue;
    cache_.forget(static_cast<int>(s));
    slot.failed = slot.ahead = slot.ahead_pin = false;
  }
  cache_.unpin_all();
  held_.clear();
  waiting_.clear();
  request_.clear();
  request_slot_.clear();
  delivered_.clear();
  n_delivered_ = 0;
  failed_read_.reset();
}

void Pager::fail_request() {
  const FailedRead f = *failed_read_;
  settle();
  files_[f.shard].read_failed(f.offset, f.needed, f.result);
}

void Pager::begin(int layer, std::span<const int> experts) {
  if (n_delivered_ < request_.size()) settle();  // the previous request was abandoned midway
  for (int s : held_) cache_.unpin(s);
  held_.clear();
  cache_.begin(layer);
  request_.assign(experts.begin(), experts.end());
  request_slot_.assign(request_.size(), -1);
  delivered_.assign(request_.size(), 0);
  waiting_.clear();
  n_delivered_ = 0;
  for (size_t i = 0; i < request_.size(); ++i) {
    const int s = request_slot_[i] = cache_.lookup(request_[i]);
    if (s < 0) {
      waiting_.push_back(static_cast<int>(i));
    } else if (slots_[static_cast<size_t>(s)].ahead) {
      slots_[static_cast<size_t>(s)].ahead = false;
      ++cache_.stats().prefetch_used;
    }
  }
  size_t placed = 0;
  for (; placed < waiting_.size(); ++placed) {
    const int s = cache_.place(request_[static_cast<size_t>(waiting_[placed])]);
    if (s < 0) break;
    const int i = waiting_[placed];
    request_slot_[static_cast<size_t>(i)] = s;
    load(s, layer, request_[static_cast<size_t>(i)]);
  }
  waiting_.erase(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(placed));
  submit_loads();
  if (prefetch_ == Prefetch::kOff) return;
  if (ahead_layer_ == layer) {  // how good the prediction for this layer was
    cache_.stats().predicted += ahead_.size();
    for (int e : ahead_) cache_.stats().predicted_right += std::find(request_.begin(), request_.end(), e) != request_.end();
  }
  if (predictor_) {
    predictor_->observe(layer, request_);
    ahead_layer_ = predictor_->next_layer(layer);
    predictor_->predict(layer, request_, request_.size(), ahead_);
  } else {
    ahead_layer_ = told_layer_ > layer ? told_layer_ : -1;
    ahead_.swap(told_);
    told_.clear();
    told_layer_ = -1;
  }
  ahead_next_ = 0;
  read_ahead();
}

void Pager::arrange(int s) {
  const Slot& slot = slots_[static_cast<size_t>(s)];
  const models::ExpertLayout& layout = layouts_[static_cast<size_t>(cache_.slot(s).layer)];
  for (int p = 0; p < 3; ++p) {
    const models::ExpertPart& part = layout.part(p);
    if (quant::use_rows4_layout(part.type, part.cols)) quant::to_rows4_layout(part.type, slot.data + slot.part_offset[p], part.rows, part.cols);
  }
}

models::ReadyExpert Pager::view(int request_index, int s) const {
  const Slot& slot = slots_[static_cast<size_t>(s)];
  const models::ExpertLayout& layout = layouts_[static_cast<size_t>(cache_.slot(s).layer)];
  auto matrix = [&](int p) {
    const models::ExpertPart& part = layout.part(p);
    return models::expert_matrix(part, slot.data + slot.part_offset[p], slot.arranged() && quant::use_rows4_layout(part.type, part.cols));
  };
  return {request_index, matrix(0), matrix(1), matrix(2)};
}

bool Pager::next(std::vector<models::ReadyExpert>& ready) {
  ready.clear();
  for (int s : held_) cache_.unpin(s);
  held_.clear();
  place_waiting();
  for (bool block = false;; block = true) {
    completions_.clear();
    if (block) {
      const auto start = std::chrono::steady_clock::now();
      io_->reap(completions_, true);
      cache_.stats().io_wait_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    } else {
      io_->reap(completions_, false);
    }
    for (const ReadCompletion& c : completions_) complete(c);
    if (failed_read_) fail_request();
    if (!to_submit_.empty()) submit_loads();  // the rest of reads cut short
    if (!waiting_.empty()) place_waiting();  // a landed prefetch may have freed a slot
    read_ahead();
    for (size_t i = 0; i < request_.size(); ++i) {
      const int s = request_slot_[i];
      if (delivered_[i] || s < 0 || !slots_[static_cast<size_t>(s)].ready) continue;
      delivered_[i] = 1;
      ++n_delivered_;
      held_.push_back(s);
      Slot& slot = slots_[static_cast<size_t>(s)];
      if (slot.deliveries < kUsesBeforeRearranging && ++slot.deliveries == kUsesBeforeRearranging) arrange(s);
      ready.push_back(view(static_cast<int>(i), s));
    }
    if (!ready.empty() || n_delivered_ == request_.size()) return !ready.empty();
    if (io_->in_flight() == 0) fail("internal: pager stalled with {} experts waiting for a slot", waiting_.size());
  }
}

}  // namespace epq::pager
