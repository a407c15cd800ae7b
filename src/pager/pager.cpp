#include "pager/pager.h"

#include <algorithm>
#include <chrono>

#include "models/resident_experts.h"
#include "pager/uring_engine.h"
#include "util/error.h"

namespace epq::pager {

Pager::Pager(const std::string& model_path, std::vector<models::ExpertLayout> layouts, const PagerOptions& options)
    : file_(model_path, options.io.force_buffered),
      layouts_(std::move(layouts)),
      classes_(size_classes(layouts_)),
      slots_per_class_(options.slots_per_class),
      cache_(classes_, slots_per_class_, make_eviction_policy(options.policy)),
      io_options_(options.io) {
  if (!file_.direct()) notes_.push_back("direct I/O unavailable (" + file_.fallback_reason() + "): buffered reads, pages dropped after each read");
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
  io_ = make_io_engine(file_, io_options_, regions, &note);
  if (!note.empty()) notes_.push_back(note);
}

Pager::~Pager() { io_.reset(); }  // drain reads before the arena goes away

uint64_t Pager::arena_bytes() const {
  uint64_t total = 0;
  for (const Buffer& b : arena_) total += Buffer::footprint(b.size());
  return total;
}

void Pager::load(int s, int layer, int expert) {
  Slot& slot = slots_[static_cast<size_t>(s)];
  const models::ExpertLayout& layout = layouts_[static_cast<size_t>(layer)];
  const SizeClass& cls = classes_.classes[static_cast<size_t>(slot.cls)];
  slot.ready = false;
  slot.reads_left = 0;
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
        pieces_[tag] = {s, start + k, piece_needed};
      } else {
        tag = pieces_.size();
        pieces_.push_back({s, start + k, piece_needed});
      }
      to_submit_.push_back({start + k, length, slot.data + base + k, tag});
      ++slot.reads_left;
      cache_.stats().bytes_read += length;
    }
    base += cls.part_bytes[p];
  }
}

void Pager::submit_loads() {
  cache_.stats().reads += to_submit_.size();
  io_->submit(to_submit_);
  to_submit_.clear();
}

void Pager::complete(const ReadCompletion& c) {
  const Piece piece = pieces_[c.tag];
  free_pieces_.push_back(c.tag);
  if (c.result < static_cast<int64_t>(piece.needed)) file_.read_failed(piece.offset, piece.needed, static_cast<long>(c.result));
  file_.after_read(piece.offset, static_cast<size_t>(c.result));
  Slot& slot = slots_[static_cast<size_t>(piece.slot)];
  if (--slot.reads_left == 0) slot.ready = true;
}

void Pager::begin(int layer, std::span<const int> experts) {
  for (int s : held_) cache_.unpin(s);
  held_.clear();
  cache_.begin(layer);
  request_.assign(experts.begin(), experts.end());
  request_slot_.assign(request_.size(), -1);
  delivered_.assign(request_.size(), 0);
  waiting_.clear();
  n_delivered_ = 0;
  for (size_t i = 0; i < request_.size(); ++i) {
    request_slot_[i] = cache_.lookup(request_[i]);
    if (request_slot_[i] < 0) waiting_.push_back(static_cast<int>(i));
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
}

models::ReadyExpert Pager::view(int request_index, int s) const {
  const Slot& slot = slots_[static_cast<size_t>(s)];
  const models::ExpertLayout& layout = layouts_[static_cast<size_t>(cache_.slot(s).layer)];
  return {request_index, models::expert_matrix(layout.gate, slot.data + slot.part_offset[0]),
          models::expert_matrix(layout.up, slot.data + slot.part_offset[1]), models::expert_matrix(layout.down, slot.data + slot.part_offset[2])};
}

bool Pager::next(std::vector<models::ReadyExpert>& ready) {
  ready.clear();
  for (int s : held_) cache_.unpin(s);
  held_.clear();
  // Experts that had to wait for a slot get one now that delivered experts are released.
  while (!waiting_.empty()) {
    const int i = waiting_.front();
    const int s = cache_.place(request_[static_cast<size_t>(i)]);
    if (s < 0) break;
    waiting_.erase(waiting_.begin());
    request_slot_[static_cast<size_t>(i)] = s;
    load(s, cache_.layer(), request_[static_cast<size_t>(i)]);
  }
  submit_loads();
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
    for (size_t i = 0; i < request_.size(); ++i) {
      const int s = request_slot_[i];
      if (delivered_[i] || s < 0 || !slots_[static_cast<size_t>(s)].ready) continue;
      delivered_[i] = 1;
      ++n_delivered_;
      held_.push_back(s);
      ready.push_back(view(static_cast<int>(i), s));
    }
    if (!ready.empty() || n_delivered_ == request_.size()) return !ready.empty();
    if (io_->in_flight() == 0) fail("internal: pager stalled with {} experts waiting for a slot", waiting_.size());
  }
}

}  // namespace epq::pager
