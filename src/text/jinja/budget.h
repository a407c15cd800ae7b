#pragma once
// The work one render may do, so that no template keeps a thread busy for long. A render
// installs a WorkBudget on its thread; the interpreter charges 64 units for each statement
// and loop iteration, and the operations that walk data charge one unit per item or per
// 64 bytes (iterating, "in", slicing, building strings and lists). Charges made on a
// thread with no budget installed are free.
#include <cstdint>

namespace epq::text::jinja {

class WorkBudget {
 public:
  static constexpr uint64_t kStatement = 64;  // the cost of a statement or a loop iteration

  explicit WorkBudget(uint64_t units);  // installs itself on this thread until destroyed
  ~WorkBudget();
  WorkBudget(const WorkBudget&) = delete;
  WorkBudget& operator=(const WorkBudget&) = delete;

  // Throws Failure once the installed budget is spent.
  static void charge(uint64_t units);
  static void charge_bytes(uint64_t bytes) { charge(bytes / 64 + 1); }

 private:
  uint64_t left_;
  uint64_t statements_;
  WorkBudget* outer_;
};

}  // namespace epq::text::jinja
