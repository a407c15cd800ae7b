#include "pager/shard_files.h"

namespace epq::pager {

ShardFiles::ShardFiles(const std::vector<std::string>& paths, bool force_buffered) {
  for (const std::string& path : paths) files_.push_back(std::make_unique<ModelFile>(path, force_buffered));
}

bool ShardFiles::direct() const {
  for (const auto& f : files_) {
    if (!f->direct()) return false;
  }
  return true;
}

std::string ShardFiles::fallback_reason() const {
  for (const auto& f : files_) {
    if (!f->direct()) return files_.size() == 1 ? f->fallback_reason() : f->path() + ": " + f->fallback_reason();
  }
  return {};
}

}  // namespace epq::pager
