#include "server/address_slots.h"

namespace epq::server {

void AddressSlots::set_limit(int limit) {
  std::lock_guard lock(mu_);
  limit_ = limit;
}

int AddressSlots::limit() const {
  std::lock_guard lock(mu_);
  return limit_;
}

AddressSlots::Slot AddressSlots::take(const std::string& address) {
  std::lock_guard lock(mu_);
  const auto it = held_.find(address);
  if (limit_ > 0 && it != held_.end() && it->second >= limit_) return {};
  ++held_[address];
  return {this, address};
}

int AddressSlots::held(const std::string& address) const {
  std::lock_guard lock(mu_);
  const auto it = held_.find(address);
  return it == held_.end() ? 0 : it->second;
}

void AddressSlots::Slot::release() {
  if (!slots_) return;
  std::lock_guard lock(slots_->mu_);
  if (--slots_->held_[address_] == 0) slots_->held_.erase(address_);
  slots_ = nullptr;
}

}  // namespace epq::server
