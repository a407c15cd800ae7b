#pragma once
// How many connections each client address holds at once, with a limit: the server's
// connection threads are shared by everyone, and without it one address (a client that
// trickles its requests, or reads its replies a byte at a time, over many connections)
// could take them all while other clients wait. A connection takes a slot for its address
// when a thread takes it up, and gives it back when it ends.
#include <mutex>
#include <string>
#include <unordered_map>

namespace epq::server {

class AddressSlots {
 public:
  // limit: connections one address may hold at once (0: no limit).
  explicit AddressSlots(int limit = 0) : limit_(limit) {}

  // A slot held for one address, given back when it is destroyed.
  class Slot {
   public:
    Slot() = default;
    ~Slot() { release(); }
    Slot(Slot&& other) noexcept : slots_(other.slots_), address_(std::move(other.address_)) { other.slots_ = nullptr; }
    Slot& operator=(Slot&&) = delete;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    explicit operator bool() const { return slots_ != nullptr; }

   private:
    friend class AddressSlots;
    Slot(AddressSlots* slots, std::string address) : slots_(slots), address_(std::move(address)) {}
    void release();

    AddressSlots* slots_ = nullptr;
    std::string address_;
  };

  void set_limit(int limit);
  int limit() const;
  // A slot for `address`, or an empty one if it already holds `limit` of them.
  Slot take(const std::string& address);
  // Slots `address` holds now.
  int held(const std::string& address) const;

 private:
  mutable std::mutex mu_;
  int limit_;
  std::unordered_map<std::string, int> held_;
};

}  // namespace epq::server
