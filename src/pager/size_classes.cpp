#include "pager/size_classes.h"

#include <algorithm>

#include "pager/model_file.h"

namespace epq::pager {

SizeClasses size_classes(const std::vector<models::ExpertLayout>& layouts) {
  SizeClasses out;
  out.class_of_layer.assign(layouts.size(), -1);
  for (size_t l = 0; l < layouts.size(); ++l) {
    const models::ExpertLayout& layout = layouts[l];
    if (layout.n_expert == 0) continue;
    SizeClass c;
    c.n_expert = layout.n_expert;
    for (int p = 0; p < 3; ++p) {
      const models::ExpertPart& part = layout.part(p);
      for (int e = 0; e < layout.n_expert; ++e) {
        const uint64_t off = part.expert_offset(e);
        c.part_bytes[p] = std::max(c.part_bytes[p], align_up(off + part.bytes) - align_down(off));
      }
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

}  // namespace epq::pager
