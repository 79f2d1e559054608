// A Link over a MemoryFabric rank that kills its own rank on the (allowed + 1)-th send:
// a process dying in the middle of a collective, after some of its messages went out.
#pragma once

#include <span>

#include "algorithms/memory_link.h"

namespace tributary::testing {

class DyingLink final : public algorithms::Link {
 public:
  DyingLink(algorithms::MemoryFabric& fabric, int rank, int allowed_sends)
      : fabric_(fabric), inner_(fabric.link(rank)), allowed_(allowed_sends) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  Handle send(int peer, algorithms::Tag tag, std::span<const std::byte> data) override {
    if (sent_++ == allowed_) fabric_.kill(inner_.rank());
    return inner_.send(peer, tag, data);
  }
  Handle recv(int peer, algorithms::Tag tag, std::span<std::byte> data) override {
    return inner_.recv(peer, tag, data);
  }
  Status wait(Handle h, Deadline d) override { return inner_.wait(h, d); }
  void abort(const Status& reason) override { inner_.abort(reason); }

 private:
  algorithms::MemoryFabric& fabric_;
  algorithms::Link& inner_;
  int allowed_;
  int sent_ = 0;
};

}  // namespace tributary::testing
