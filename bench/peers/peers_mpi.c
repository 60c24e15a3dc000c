/* peers_mpi.c — the MPI peers' harness: MPI_Allreduce of float32 sum, out of place, timed by ringo-bench's
 * rules (peers_bench.h). Built three times by bench-peers.sh, against Open MPI, MPICH and Intel MPI.
 * Run: bench/peers/bench-peers.sh --quick (or mpirun -np 2 build/peers/bin/peers-ompi -L ompi -C default). */
#include "peers_bench.h"

static int mpi_allreduce(void* ctx, const float* s, float* r, size_t count) {
  (void)ctx;
  return MPI_Allreduce(s, r, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const struct peers_opts o = peers_parse(argc, argv);
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = "";
  int len = 0;
  MPI_Get_library_version(version, &len);
  version[strcspn(version, ",\n")] = '\0';
  const uint64_t wrong = peers_run(&o, version, mpi_allreduce, NULL);
  MPI_Finalize();
  return wrong != 0;
}
