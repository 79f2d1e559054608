// A Link over a MemoryFabric rank that kills its own rank on the (allowed + 1)-th send:
// a process dying in the middle of a collective, after some of its messages went out.
#pragma once

#include <span>

#include "algorithms/memory_link.h"
#include "tests/support/forwarding_link.h"

namespace tributary::testing {

class DyingLink final : public ForwardingLink {
 public:
  DyingLink(algorithms::MemoryFabric& fabric, int rank, int allowed_sends)
      : ForwardingLink(fabric.link(rank)), fabric_(fabric), allowed_(allowed_sends) {}
  Handle send(int peer, algorithms::Tag tag, std::span<const std::byte> data) override {
    if (sent_++ == allowed_) fabric_.kill(inner_.rank());
    return inner_.send(peer, tag, data);
  }

 private:
  algorithms::MemoryFabric& fabric_;
  int allowed_;
  int sent_ = 0;
};

}  // namespace tributary::testing
