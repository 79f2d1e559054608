// A Link that passes every operation to another Link: the base of the test links that
// watch or break one operation (a death on the k-th send, an action on the k-th wait) and
// of a borrowed link a Worker may own while the fabric keeps the real one.
#pragma once

#include <span>

#include "algorithms/link.h"

namespace tributary::testing {

class ForwardingLink : public algorithms::Link {
 public:
  explicit ForwardingLink(algorithms::Link& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  Handle send(int peer, algorithms::Tag tag, std::span<const std::byte> data) override {
    return inner_.send(peer, tag, data);
  }
  Handle recv(int peer, algorithms::Tag tag, std::span<std::byte> data) override {
    return inner_.recv(peer, tag, data);
  }
  Status wait(Handle handle, Deadline deadline) override { return inner_.wait(handle, deadline); }
  void abort(const Status& reason) override { inner_.abort(reason); }

 protected:
  algorithms::Link& inner_;
};

}  // namespace tributary::testing
