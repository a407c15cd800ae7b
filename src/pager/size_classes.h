#pragma once
// Expert slot size classes. A slot holds one expert's gate, up and down matrices, each
// in its own 4 KiB-aligned part large enough for the aligned range that encloses the
// matrix in the file (so one O_DIRECT read fills it). Layers whose slots come out the
// same size share a class (e.g. all Q4_K layers), others get their own (BF16 layers).
#include <cstdint>
#include <vector>

#include "models/expert_layout.h"

namespace epq::pager {

struct SizeClass {
  uint64_t slot_bytes = 0;
  uint64_t part_bytes[3] = {};  // capacity of gate, up, down within a slot
  std::vector<int> layers;      // layers whose experts use this class
  int n_expert = 0;             // experts per layer
  uint64_t total_experts() const { return layers.size() * static_cast<uint64_t>(n_expert); }
};

struct SizeClasses {
  std::vector<SizeClass> classes;  // ascending slot size
  std::vector<int> class_of_layer;  // -1 for layers without experts
};

// The slot one layer's experts need (n_expert 0: a layer without routed experts).
struct LayerSlotShape {
  int n_expert = 0;
  uint64_t part_bytes[3] = {};
};
LayerSlotShape layer_slot_shape(const models::ExpertLayout& layout);

SizeClasses size_classes(const std::vector<LayerSlotShape>& layers);
SizeClasses size_classes(const std::vector<models::ExpertLayout>& layouts);

// Bytes the pager reads to load one expert: the aligned ranges enclosing its matrices.
uint64_t expert_read_bytes(const models::ExpertLayout& layout, int expert);

}  // namespace epq::pager
