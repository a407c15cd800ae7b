#include "server/address_slots.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace epq::server {
namespace {

TEST(AddressSlots, EachAddressHoldsAtMostTheLimit) {
  AddressSlots slots(2);
  std::vector<AddressSlots::Slot> held;
  held.push_back(slots.take("10.0.0.1"));
  held.push_back(slots.take("10.0.0.1"));
  EXPECT_TRUE(held[0] && held[1]);
  EXPECT_FALSE(slots.take("10.0.0.1"));  // a third from the same address
  EXPECT_EQ(slots.held("10.0.0.1"), 2);  // the refused one took nothing
  const AddressSlots::Slot other = slots.take("10.0.0.2");
  EXPECT_TRUE(other);  // another address is not held back
  held.pop_back();
  EXPECT_EQ(slots.held("10.0.0.1"), 1);
  EXPECT_TRUE(slots.take("10.0.0.1"));  // given back: taken again (and given back at once)
  held.clear();
  EXPECT_EQ(slots.held("10.0.0.1"), 0);
  EXPECT_EQ(slots.held("10.0.0.2"), 1);
}

TEST(AddressSlots, AMovedSlotIsGivenBackOnce) {
  AddressSlots slots(1);
  {
    AddressSlots::Slot first = slots.take("::1");
    const AddressSlots::Slot moved(std::move(first));
    EXPECT_FALSE(first);
    EXPECT_TRUE(moved);
    EXPECT_FALSE(slots.take("::1"));
  }
  EXPECT_EQ(slots.held("::1"), 0);
  EXPECT_TRUE(slots.take("::1"));
}

TEST(AddressSlots, NoLimitTakesEverySlot) {
  AddressSlots slots;
  std::vector<AddressSlots::Slot> held;
  for (int i = 0; i < 100; ++i) held.push_back(slots.take("127.0.0.1"));
  for (const auto& s : held) EXPECT_TRUE(s);
  EXPECT_EQ(slots.held("127.0.0.1"), 100);
}

}  // namespace
}  // namespace epq::server
