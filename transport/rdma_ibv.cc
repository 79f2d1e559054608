// The libibverbs implementation of rdma_verbs.h: a protection domain per device, and per
// link a completion queue with a completion channel and one RC queue pair per peer, each
// with its send and receive slots in memory registered for local access only.
//
// Compiled when CMake finds infiniband/verbs.h and libibverbs (TRIBUTARY_HAVE_RDMA=1).
// Never executed on the machines this was written on: they have no RDMA device and no
// kernel support (docs/transports.md says what was run).
#include <fcntl.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>

#include "transport/rdma_verbs.h"

namespace tributary::transport {
namespace {

Status verbs_error(StatusCode code, const std::string& what, int err) {
  return error(code, what + ": " + std::strerror(err));
}

std::string hex(const std::uint8_t* bytes, std::size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[bytes[i] >> 4]);
    out.push_back(kDigits[bytes[i] & 0xf]);
  }
  return out;
}

bool is_zero(const ibv_gid& gid) {
  return std::all_of(std::begin(gid.raw), std::end(gid.raw), [](std::uint8_t b) { return b == 0; });
}

// An opened device, its protection domain and the port it uses.
struct IbvContext {
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  std::string name;
  std::uint8_t port = 0;
  ibv_port_attr port_attr{};
  int gid_index = -1;  // -1: no GID (InfiniBand, addressed by LID)
  ibv_gid gid{};

  ~IbvContext() {
    if (pd != nullptr) ibv_dealloc_pd(pd);
    if (context != nullptr) ibv_close_device(context);
  }
};

// The GID to address a RoCE port by: RoCE v2 preferred, else the first non-zero one.
int choose_gid(ibv_context* context, std::uint8_t port, int table_len, ibv_gid* out) {
  int fallback = -1;
  for (int i = 0; i < table_len; ++i) {
    ibv_gid_entry entry{};
    if (ibv_query_gid_ex(context, port, static_cast<std::uint32_t>(i), &entry, 0) != 0) continue;
    if (is_zero(entry.gid)) continue;
    if (entry.gid_type == IBV_GID_TYPE_ROCE_V2) {
      *out = entry.gid;
      return i;
    }
    if (fallback < 0) {
      fallback = i;
      *out = entry.gid;
    }
  }
  return fallback;
}

// The first active port of `device`, or why there is none.
Result<std::unique_ptr<IbvContext>> open_active_port(ibv_device* device) {
  auto c = std::make_unique<IbvContext>();
  c->name = ibv_get_device_name(device);
  c->context = ibv_open_device(device);
  if (c->context == nullptr) {
    return verbs_error(StatusCode::kUnavailable, "ibv_open_device(" + c->name + ")", errno);
  }
  ibv_device_attr attr{};
  if (int err = ibv_query_device(c->context, &attr); err != 0) {
    return verbs_error(StatusCode::kUnavailable, "ibv_query_device(" + c->name + ")", err);
  }
  for (std::uint8_t port = 1; port <= attr.phys_port_cnt; ++port) {
    ibv_port_attr pa{};
    if (ibv_query_port(c->context, port, &pa) != 0 || pa.state != IBV_PORT_ACTIVE) continue;
    c->port = port;
    c->port_attr = pa;
    if (pa.link_layer == IBV_LINK_LAYER_ETHERNET) {
      c->gid_index = choose_gid(c->context, port, pa.gid_tbl_len, &c->gid);
      if (c->gid_index < 0) continue;  // RoCE without an address: unusable
    }
    c->pd = ibv_alloc_pd(c->context);
    if (c->pd == nullptr) {
      return verbs_error(StatusCode::kUnavailable, "ibv_alloc_pd(" + c->name + ")", errno);
    }
    return c;
  }
  return error(StatusCode::kUnavailable, "no active port on RDMA device " + c->name);
}

// Registered memory: `count` slots of `bytes`.
struct Slots {
  std::byte* mem = nullptr;
  std::size_t bytes = 0;
  std::uint32_t count = 0;
  ibv_mr* mr = nullptr;

  ~Slots() {
    if (mr != nullptr) ibv_dereg_mr(mr);
    std::free(mem);
  }
  Status allocate(ibv_pd* pd, std::uint32_t n, std::size_t slot_bytes) {
    count = n;
    bytes = slot_bytes;
    const std::size_t total = (n * slot_bytes + 4095) / 4096 * 4096;
    mem = static_cast<std::byte*>(std::aligned_alloc(4096, total));
    if (mem == nullptr) return error(StatusCode::kUnavailable, "out of memory for rdma slots");
    std::memset(mem, 0, total);
    mr = ibv_reg_mr(pd, mem, total, IBV_ACCESS_LOCAL_WRITE);
    if (mr == nullptr) return verbs_error(StatusCode::kUnavailable, "ibv_reg_mr", errno);
    return Status();
  }
  std::byte* at(std::uint32_t slot) const { return mem + static_cast<std::size_t>(slot) * bytes; }
};

struct IbvQueuePair {
  ibv_qp* qp = nullptr;
  std::uint32_t psn = 0;
  Slots send;
  Slots recv;

  ~IbvQueuePair() {
    if (qp != nullptr) ibv_destroy_qp(qp);
  }
};

class IbvGroup final : public VerbsGroup {
 public:
  explicit IbvGroup(std::shared_ptr<IbvContext> device) : device_(std::move(device)) {}
  ~IbvGroup() override {
    qps_.clear();  // queue pairs before the queue they complete into
    if (cq_ != nullptr) {
      clear_wakeups();
      ibv_ack_cq_events(cq_, unacked_);
      ibv_destroy_cq(cq_);
    }
    if (channel_ != nullptr) ibv_destroy_comp_channel(channel_);
  }

  Status open(const std::vector<int>& peers, const RdmaSlots& slots) {
    channel_ = ibv_create_comp_channel(device_->context);
    if (channel_ == nullptr)
      return verbs_error(StatusCode::kUnavailable, "ibv_create_comp_channel", errno);
    const int flags = ::fcntl(channel_->fd, F_GETFL);
    if (flags < 0 || ::fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
      return verbs_error(StatusCode::kInternal, "completion channel: O_NONBLOCK", errno);
    }
    const auto cqe = static_cast<int>(peers.size() * (slots.send_slots + slots.recv_slots) + 16);
    cq_ = ibv_create_cq(device_->context, cqe, nullptr, channel_, 0);
    if (cq_ == nullptr) return verbs_error(StatusCode::kUnavailable, "ibv_create_cq", errno);
    std::random_device random;
    for (int peer : peers) {
      auto q = std::make_unique<IbvQueuePair>();
      TRIB_RETURN_IF_ERROR(q->send.allocate(device_->pd, slots.send_slots, slots.slot_bytes));
      TRIB_RETURN_IF_ERROR(q->recv.allocate(device_->pd, slots.recv_slots, slots.slot_bytes));
      ibv_qp_init_attr init{};
      init.send_cq = cq_;
      init.recv_cq = cq_;
      init.qp_type = IBV_QPT_RC;
      init.cap.max_send_wr = slots.send_slots;
      init.cap.max_recv_wr = slots.recv_slots;
      init.cap.max_send_sge = 1;
      init.cap.max_recv_sge = 1;
      q->qp = ibv_create_qp(device_->pd, &init);
      if (q->qp == nullptr) return verbs_error(StatusCode::kUnavailable, "ibv_create_qp", errno);
      ibv_qp_attr attr{};
      attr.qp_state = IBV_QPS_INIT;
      attr.pkey_index = 0;
      attr.port_num = device_->port;
      attr.qp_access_flags = 0;  // sends and receives only: no remote access to anything
      if (int err = ibv_modify_qp(
              q->qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
          err != 0) {
        return verbs_error(StatusCode::kUnavailable, "queue pair to INIT", err);
      }
      q->psn = random() & 0xffffff;
      qps_[peer] = std::move(q);
    }
    return Status();
  }

  QpAddress local_address(int peer) const override {
    const IbvQueuePair& q = *qps_.at(peer);
    QpAddress a;
    a.qpn = q.qp->qp_num;
    a.psn = q.psn;
    a.lid = device_->port_attr.lid;
    a.mtu = static_cast<std::uint8_t>(device_->port_attr.active_mtu);
    if (device_->gid_index >= 0) std::memcpy(a.gid.data(), device_->gid.raw, 16);
    return a;
  }

  Status connect(int peer, const QpAddress& remote) override {
    IbvQueuePair& q = *qps_.at(peer);
    ibv_qp_attr rtr{};
    rtr.qp_state = IBV_QPS_RTR;
    rtr.path_mtu = static_cast<ibv_mtu>(
        std::min<int>(device_->port_attr.active_mtu, std::max<int>(remote.mtu, IBV_MTU_256)));
    rtr.dest_qp_num = remote.qpn;
    rtr.rq_psn = remote.psn;
    rtr.max_dest_rd_atomic = 1;
    rtr.min_rnr_timer = 12;  // 0.64 ms
    rtr.ah_attr.dlid = remote.lid;
    rtr.ah_attr.sl = 0;
    rtr.ah_attr.src_path_bits = 0;
    rtr.ah_attr.port_num = device_->port;
    const bool global =
        std::any_of(remote.gid.begin(), remote.gid.end(), [](std::uint8_t b) { return b != 0; });
    if (global && device_->gid_index >= 0) {
      rtr.ah_attr.is_global = 1;
      std::memcpy(rtr.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
      rtr.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(device_->gid_index);
      rtr.ah_attr.grh.hop_limit = 64;
    }
    if (int err =
            ibv_modify_qp(q.qp, &rtr,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
        err != 0) {
      return verbs_error(StatusCode::kUnavailable, "queue pair to RTR", err);
    }
    ibv_qp_attr rts{};
    rts.qp_state = IBV_QPS_RTS;
    rts.timeout = 14;   // 4.096 us x 2^14 = 67 ms per attempt
    rts.retry_cnt = 7;  // then the send fails: the peer is gone
    rts.rnr_retry = 7;  // the credits keep receives posted; 7 is "retry without limit"
    rts.sq_psn = q.psn;
    rts.max_rd_atomic = 1;
    if (int err = ibv_modify_qp(q.qp, &rts,
                                IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                    IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
        err != 0) {
      return verbs_error(StatusCode::kUnavailable, "queue pair to RTS", err);
    }
    return Status();
  }

  std::span<std::byte> send_slot(int peer, std::uint32_t slot) override {
    const IbvQueuePair& q = *qps_.at(peer);
    return {q.send.at(slot), q.send.bytes};
  }
  std::span<const std::byte> recv_slot(int peer, std::uint32_t slot) const override {
    const IbvQueuePair& q = *qps_.at(peer);
    return {q.recv.at(slot), q.recv.bytes};
  }

  Status post_send(int peer, std::uint32_t slot, std::uint32_t bytes,
                   std::uint64_t wr_id) override {
    IbvQueuePair& q = *qps_.at(peer);
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(q.send.at(slot)), bytes, q.send.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    if (int err = ibv_post_send(q.qp, &wr, &bad); err != 0) {
      return verbs_error(StatusCode::kPeerLost, "ibv_post_send", err);
    }
    return Status();
  }

  Status post_recv(int peer, std::uint32_t slot, std::uint64_t wr_id) override {
    IbvQueuePair& q = *qps_.at(peer);
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(q.recv.at(slot)),
                static_cast<std::uint32_t>(q.recv.bytes), q.recv.mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    if (int err = ibv_post_recv(q.qp, &wr, &bad); err != 0) {
      return verbs_error(StatusCode::kPeerLost, "ibv_post_recv", err);
    }
    return Status();
  }

  std::size_t poll(std::span<VerbsCompletion> out) override {
    ibv_wc wc[32];
    const int want = static_cast<int>(std::min<std::size_t>(out.size(), std::size(wc)));
    const int n = ibv_poll_cq(cq_, want, wc);
    if (n <= 0) return 0;  // < 0: the queue broke; the connections will tell
    for (int i = 0; i < n; ++i) {
      VerbsCompletion& c = out[static_cast<std::size_t>(i)];
      c.wr_id = wc[i].wr_id;
      c.byte_len = wc[i].byte_len;
      c.status = wc[i].status == IBV_WC_SUCCESS
                     ? Status()
                     : error(StatusCode::kPeerLost, std::string(ibv_wc_status_str(wc[i].status)) +
                                                        " (vendor error " +
                                                        std::to_string(wc[i].vendor_err) + ")");
    }
    return static_cast<std::size_t>(n);
  }

  Status arm() override {
    if (int err = ibv_req_notify_cq(cq_, 0); err != 0) {
      return verbs_error(StatusCode::kInternal, "ibv_req_notify_cq", err);
    }
    return Status();
  }
  int wake_fd() const override { return channel_->fd; }
  void clear_wakeups() override {
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    while (ibv_get_cq_event(channel_, &cq, &context) == 0) ++unacked_;
    if (unacked_ > 0) {
      ibv_ack_cq_events(cq_, unacked_);
      unacked_ = 0;
    }
  }

 private:
  std::shared_ptr<IbvContext> device_;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  unsigned unacked_ = 0;
  std::map<int, std::unique_ptr<IbvQueuePair>> qps_;
};

class IbvDevice final : public VerbsDevice {
 public:
  explicit IbvDevice(std::shared_ptr<IbvContext> c) : c_(std::move(c)) {}
  std::string advert() const override {
    const std::string address =
        c_->gid_index >= 0 ? hex(c_->gid.raw, 16) : "lid" + std::to_string(c_->port_attr.lid);
    return c_->name + "/" + std::to_string(c_->port) + "/" + address;
  }
  Result<std::unique_ptr<VerbsGroup>> open_group(const std::vector<int>& peers,
                                                 const RdmaSlots& slots) override {
    auto group = std::make_unique<IbvGroup>(c_);
    TRIB_RETURN_IF_ERROR(group->open(peers, slots));
    return std::unique_ptr<VerbsGroup>(std::move(group));
  }

 private:
  std::shared_ptr<IbvContext> c_;
};

}  // namespace

bool rdma_verbs_built() { return true; }

Result<std::shared_ptr<VerbsDevice>> open_rdma_device(const std::string& device) {
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr) {
    const int err = errno;
    return error(
        StatusCode::kUnavailable,
        std::string("no RDMA device: ibv_get_device_list failed: ") + std::strerror(err) +
            (err == ENOSYS ? " (the kernel offers no verbs: no /sys/class/infiniband_verbs)" : ""));
  }
  Status why = error(StatusCode::kUnavailable, "no RDMA device: ibv_get_device_list found none");
  if (!device.empty()) {
    why = error(StatusCode::kUnavailable, "no RDMA device named " + device);
  }
  std::shared_ptr<VerbsDevice> found;
  for (int i = 0; i < count && found == nullptr; ++i) {
    if (!device.empty() && device != ibv_get_device_name(list[i])) continue;
    Result<std::unique_ptr<IbvContext>> c = open_active_port(list[i]);
    if (c.is_ok()) {
      found = std::make_shared<IbvDevice>(std::shared_ptr<IbvContext>(std::move(*c)));
    } else {
      why = c.status();
    }
  }
  ibv_free_device_list(list);
  if (found == nullptr) return why;
  return found;
}

}  // namespace tributary::transport
