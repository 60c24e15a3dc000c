/* peers_ccl.cc — the oneCCL peer's harness: ccl::allreduce of float32 sum, out of place, on a host
 * communicator, timed by ringo-bench's rules (peers_bench.h). oneCCL's CPU API is C++; Intel MPI
 * bootstraps it (its KVS address is broadcast) and gives the quiet barrier. Run: bench-peers.sh --quick. */
#include <oneapi/ccl.hpp>

#include "peers_bench.h"

namespace {
struct ccl_side {
  ccl::communicator* comm;
};

int ccl_allreduce(void* ctx, const float* s, float* r, size_t count) {
  ccl_side* c = static_cast<ccl_side*>(ctx);
  try {
    ccl::allreduce(s, r, count, ccl::reduction::sum, *c->comm).wait();
  } catch (const std::exception& e) {
    fprintf(stderr, "peers-ccl: %s\n", e.what());
    return 1;
  }
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  // oneCCL's MPI transport runs on MPI from its own worker threads, hence MULTIPLE.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const struct peers_opts o = peers_parse(argc, argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  ccl::init();
  ccl::shared_ptr_class<ccl::kvs> kvs;
  ccl::kvs::address_type addr;
  if (rank == 0) {
    kvs = ccl::create_main_kvs();
    addr = kvs->get_address();
  }
  MPI_Bcast(addr.data(), (int)addr.size(), MPI_BYTE, 0, MPI_COMM_WORLD);
  if (rank != 0) kvs = ccl::create_kvs(addr);
  ccl::communicator comm = ccl::create_communicator(n, rank, kvs);
  ccl_side side = {&comm};
  const ccl::library_version v = ccl::get_library_version();
  char version[160];
  snprintf(version, sizeof version, "oneCCL %s (%s), CCL_ATL_TRANSPORT=%s CCL_ALLREDUCE=%s", v.full,
           v.build_date, getenv("CCL_ATL_TRANSPORT") ? getenv("CCL_ATL_TRANSPORT") : "(default)",
           getenv("CCL_ALLREDUCE") ? getenv("CCL_ALLREDUCE") : "(default)");
  const uint64_t wrong = peers_run(&o, version, ccl_allreduce, &side);
  MPI_Finalize();
  return wrong != 0;
}
