#pragma once
// The files of a model opened for direct reads: one ModelFile per shard of a split model
// (gguf/split.h), one in all for an unsplit file. Shard numbers are those of
// gguf::TensorInfo::shard.
#include <memory>
#include <string>
#include <vector>

#include "pager/model_file.h"

namespace epq::pager {

class ShardFiles {
 public:
  // force_buffered skips O_DIRECT (for tests of the fallback path).
  explicit ShardFiles(const std::vector<std::string>& paths, bool force_buffered = false);

  size_t size() const { return files_.size(); }
  const ModelFile& operator[](uint32_t shard) const { return *files_[shard]; }
  // Whether every shard is read with O_DIRECT; if not, why (naming the shard when
  // there are several).
  bool direct() const;
  std::string fallback_reason() const;

 private:
  std::vector<std::unique_ptr<ModelFile>> files_;
};

}  // namespace epq::pager
