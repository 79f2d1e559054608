// Open MPI MPI_Allreduce (float32, sum) measured the nccl-tests way, as a
// baseline for Tributary. Out-of-place (sendbuf -> recvbuf), like nccl-tests'
// default. The transport is whatever mpirun selects; bench/compare.sh forces
// pml ob1 + btl tcp,self on loopback so the shared-memory path is not used.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <vector>

#include "bench_common.h"

namespace {

using tributary::bench::SweepOptions;

void RunSize(std::size_t bytes, const SweepOptions& o, int rank, int nranks) {
  const std::size_t count = bytes / sizeof(float);
  const int icount = static_cast<int>(count);
  std::vector<float> send(count), recv(count);
  tributary::bench::FillPattern(send, rank);

  for (int i = 0; i < o.warmup; ++i)
    MPI_Allreduce(send.data(), recv.data(), icount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < o.iters; ++i)
    MPI_Allreduce(send.data(), recv.data(), icount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  const auto t1 = std::chrono::steady_clock::now();
  const double mine = std::chrono::duration<double>(t1 - t0).count() / o.iters;
  double slowest = 0.0;
  MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

  // Check pass: fresh output, one call, every element compared.
  std::fill(recv.begin(), recv.end(), std::numeric_limits<float>::quiet_NaN());
  MPI_Allreduce(send.data(), recv.data(), icount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  const long long my_wrong = tributary::bench::CountWrong(recv, nranks);
  long long wrong = 0;
  MPI_Reduce(&my_wrong, &wrong, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);

  if (rank == 0) tributary::bench::PrintRow(bytes, nranks, "default", slowest, wrong);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  const SweepOptions o = tributary::bench::ParseArgs(argc, argv);
  if (static_cast<std::size_t>(std::numeric_limits<int>::max()) < o.max_bytes / sizeof(float)) {
    if (rank == 0) std::fprintf(stderr, "max size too large for an int count\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }

  if (rank == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    std::string first_line(version, std::find(version, version + len, ','));
    std::printf("# openmpi allreduce np=%d iters=%d warmup=%d out-of-place (%s)\n", nranks, o.iters,
                o.warmup, first_line.c_str());
    tributary::bench::PrintColumnHeader();
  }
  for (std::size_t bytes : tributary::bench::SweepSizes(o)) RunSize(bytes, o, rank, nranks);
  MPI_Finalize();
  return 0;
}
