#pragma once
// Test-only I/O faults, so that tests can check what the pager, `epq run` and `epq serve`
// do when expert reads fail. The environment variable EPQ_FAULT_INJECT names them, as a
// comma list; without it nothing changes. Not for production use.
//
//   eio@N          the Nth expert read to complete (counting from 1, every read the pager
//                  issues, resent remainders included) fails with EIO
//   short@N        the Nth expert read (or the first after it longer than one block)
//                  delivers only part of its bytes, a whole number of blocks, as a read
//                  cut short before the end of the file would
//   uring-refused  io_uring setup fails with EPERM, as a kernel or seccomp filter that
//                  refuses io_uring makes it fail
//
// Faults are applied where the pager takes a completion from its engine, so both engines
// (io_uring and pread) see them alike. A faulted read also overwrites the bytes it did not
// deliver, so that a slot trusted after a failed read would show as wrong output.
#include <cstdint>
#include <string_view>
#include <vector>

#include "pager/io_engine.h"

namespace epq::pager {

class FaultInjection {
 public:
  // The faults EPQ_FAULT_INJECT names (none if unset); throws an Error for a malformed value.
  static FaultInjection from_environment();
  // The faults a value of EPQ_FAULT_INJECT names; throws an Error if it is malformed.
  static FaultInjection parse(std::string_view spec);

  bool uring_refused() const { return uring_refused_; }
  // What the completed read `read` reports: `result` (bytes read, or -errno), or the
  // fault injected for this read. Counts the read.
  int64_t apply(const ReadRequest& read, int64_t result);

 private:
  std::vector<uint64_t> eio_at_, short_at_;  // read numbers, counting from 1
  bool uring_refused_ = false;
  uint64_t reads_ = 0;
  int shorts_due_ = 0;  // short faults whose read number has passed, waiting for a read longer than a block
};

}  // namespace epq::pager
