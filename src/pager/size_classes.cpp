#include "pager/size_classes.h"

#include <algorithm>

#include "pager/model_file.h"

namespace epq::pager {

LayerSlotShape layer_slot_shape(const models::ExpertLayout& layout) {
  LayerSlotShape shape;
  shape.n_expert = layout.n_expert;
  for (int p = 0; p < 3; ++p) {
    const models::ExpertPart& part = layout.part(p);
    for (int e = 0; e < layout.n_expert; ++e) {
      const uint64_t off = part.expert_offset(e);
      shape.part_bytes[p] = std::max(shape.part_bytes[p], align_up(off + part.bytes) - align_down(off));
    }
  }
  return shape;
}

uint64_t expert_read_bytes(const models::ExpertLayout& layout, int expert) {
  uint64_t bytes = 0;
  for (int p = 0; p < 3; ++p) {
    const uint64_t off = layout.part(p).expert_offset(expert);
    bytes += align_up(off + layout.part(p).bytes) - align_down(off);
  }
  return bytes;
}

SizeClasses size_classes(const std::vector<LayerSlotShape>& layers) {
  SizeClasses out;
  out.class_of_layer.assign(layers.size(), -1);
  for (size_t l = 0; l < layers.size(); ++l) {
    const LayerSlotShape& shape = layers[l];
    if (shape.n_expert == 0) continue;
    SizeClass c;
    c.n_expert = shape.n_expert;
    for (int p = 0; p < 3; ++p) {
      c.part_bytes[p] = shape.part_bytes[p];
      c.slot_bytes += c.part_bytes[p];
    }
    auto same = std::find_if(out.classes.begin(), out.classes.end(), [&](const SizeClass& k) {
      return k.n_expert == c.n_expert && std::equal(k.part_bytes, k.part_bytes + 3, c.part_bytes);
    });
    if (same == out.classes.end()) {
      out.classes.push_back(c);
      same = out.classes.end() - 1;
    }
    same->layers.push_back(static_cast<int>(l));
  }
  // Ascending slot size; then map layers to their class index.
  std::sort(out.classes.begin(), out.classes.end(), [](const SizeClass& a, const SizeClass& b) { return a.slot_bytes < b.slot_bytes; });
  for (size_t c = 0; c < out.classes.size(); ++c) {
    for (int l : out.classes[c].layers) out.class_of_layer[static_cast<size_t>(l)] = static_cast<int>(c);
  }
  return out;
}

SizeClasses size_classes(const std::vector<models::ExpertLayout>& layouts) {
  std::vector<LayerSlotShape> shapes;
  for (const models::ExpertLayout& l : layouts) shapes.push_back(layer_slot_shape(l));
  return size_classes(shapes);
}

}  // namespace epq::pager
