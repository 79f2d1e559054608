// One scenario for every link that combines (Link::recv_combine), whatever it combines out
// of (TCP's staging buffer, a shared-memory ring): ranks 0 and 1 each send rank 2 three
// float64 messages of `count` elements; rank 2 takes rank 0's first with a combining
// receive posted before it arrives, rank 1's second in place with the operand last while
// rank 0's second streams in early behind it, then rank 0's second (arrived early, whole
// or in part). Each result must be the bits of receiving, then reducing.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algorithms/link.h"
#include "core/clock.h"
#include "core/reduce.h"
#include "tests/algorithms/test_values.h"
#include "tests/support/rank_threads.h"

namespace tributary::testing {

inline void expect_combining_receives_match_receive_then_reduce(
    const std::vector<algorithms::Link*>& links, std::size_t count, Duration within) {
  ASSERT_EQ(links.size(), 3u);
  ASSERT_TRUE(links[2]->combines());
  using algorithms::Combine;
  using algorithms::Tag;
  const Bytes a = make_random_input(DType::kFloat64, 0, count, 1);
  const Bytes b = make_random_input(DType::kFloat64, 1, count, 2);
  const Bytes mine = make_random_input(DType::kFloat64, 2, count, 3);
  auto expect = [&](const Bytes& incoming, bool incoming_first) {
    Bytes out(mine.size());
    if (incoming_first) {
      reduce_to(out.data(), incoming.data(), mine.data(), count, DType::kFloat64, ReduceOp::kSum);
    } else {
      reduce_to(out.data(), mine.data(), incoming.data(), count, DType::kFloat64, ReduceOp::kSum);
    }
    return out;
  };
  auto soon = [within] { return Deadline::after(within); };
  Bytes posted_first(mine.size()), in_place = mine, early(mine.size());
  const std::vector<Status> results = run_ranks(3, [&](int r) -> Status {
    algorithms::Link& link = *links[static_cast<std::size_t>(r)];
    if (r < 2) {
      const Bytes& data = r == 0 ? a : b;
      for (std::uint32_t slot = 0; slot < 3; ++slot) {
        TRIB_RETURN_IF_ERROR(link.wait(link.send(2, Tag{1, slot, 0}, data), soon()));
      }
      return Status::ok();
    }
    // Posted before anything arrived.
    auto h = link.recv_combine(0, Tag{1, 0, 0}, posted_first,
                               Combine{mine.data(), DType::kFloat64, ReduceOp::kSum, true});
    TRIB_RETURN_IF_ERROR(link.wait(h, soon()));
    // In place, the operand last: rank 1's second message, while rank 0's second streams
    // in early (whole or in part) behind it.
    Bytes from_b(mine.size());
    TRIB_RETURN_IF_ERROR(link.wait(link.recv(1, Tag{1, 0, 0}, from_b), soon()));
    h = link.recv_combine(1, Tag{1, 1, 0}, in_place,
                          Combine{in_place.data(), DType::kFloat64, ReduceOp::kSum, false});
    TRIB_RETURN_IF_ERROR(link.wait(h, soon()));
    h = link.recv_combine(0, Tag{1, 1, 0}, early,
                          Combine{mine.data(), DType::kFloat64, ReduceOp::kSum, true});
    TRIB_RETURN_IF_ERROR(link.wait(h, soon()));
    // The last ones of both, plain, so the senders finish.
    Bytes rest(mine.size());
    TRIB_RETURN_IF_ERROR(link.wait(link.recv(0, Tag{1, 2, 0}, rest), soon()));
    return link.wait(link.recv(1, Tag{1, 2, 0}, rest), soon());
  });
  for (const Status& s : results) ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(posted_first, expect(a, true));
  EXPECT_EQ(in_place, expect(b, false));
  EXPECT_EQ(early, expect(a, true));
}

}  // namespace tributary::testing
