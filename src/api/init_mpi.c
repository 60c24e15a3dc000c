/* init_mpi.c — ringoCommInitMPI: the rendezvous over MPI collectives, MPI links between hosts.
 * Built only with MPI (RINGO_HAVE_MPI). Tested by test/mpi/test_mpi_ring.cc under mpirun. */
#ifdef RINGO_HAVE_MPI
#include <mpi.h>

#include "api/lifecycle.h"
#include "ringo_mpi.h"

struct mpi_rendezvous { MPI_Comm comm; };

static ringoResult_t mpi_allgather(void* ctx, const void* mine, size_t bytes, void* all) {
  const struct mpi_rendezvous* rv = ctx;
  int err = MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, rv->comm);
  if (err != MPI_SUCCESS) return ringo_fail(ringoRemoteError, "ringoCommInitMPI: MPI_Allgather failed (MPI error %d)", err);
  return ringoSuccess;
}

static ringoResult_t mpi_barrier(void* ctx) {
  const struct mpi_rendezvous* rv = ctx;
  int err = MPI_Barrier(rv->comm);
  if (err != MPI_SUCCESS) return ringo_fail(ringoRemoteError, "ringoCommInitMPI: MPI_Barrier failed (MPI error %d)", err);
  return ringoSuccess;
}

static ringoResult_t check_mpi_ready(void) {
  int initialized = 0, finalized = 0, provided = MPI_THREAD_SINGLE;
  MPI_Initialized(&initialized);
  if (!initialized)
    return ringo_fail(ringoInvalidUsage, "ringoCommInitMPI: MPI is not initialised; call "
                      "MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided) first");
  MPI_Finalized(&finalized);
  if (finalized) return ringo_fail(ringoInvalidUsage, "ringoCommInitMPI: MPI was already finalized");
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_SERIALIZED)
    return ringo_fail(ringoInvalidUsage, "ringoCommInitMPI: MPI runs at thread level %d, ringo needs "
                      "MPI_THREAD_SERIALIZED (%d) or more: initialise with MPI_Init_thread(&argc, &argv, "
                      "MPI_THREAD_SERIALIZED, &provided) instead of MPI_Init", provided, MPI_THREAD_SERIALIZED);
  return ringoSuccess;
}

ringoResult_t ringoCommInitMPI(ringoComm_t* out, MPI_Comm mpicomm) {
  ringo_thread_clear_error();
  if (!out) return ringo_fail(ringoInvalidArgument, "ringoCommInitMPI: comm is NULL");
  *out = NULL;
  RINGO_CHECK(check_mpi_ready());
  if (mpicomm == MPI_COMM_NULL) return ringo_fail(ringoInvalidArgument, "ringoCommInitMPI: mpicomm is MPI_COMM_NULL");
  int nranks = 0, rank = 0;
  if (MPI_Comm_size(mpicomm, &nranks) != MPI_SUCCESS || MPI_Comm_rank(mpicomm, &rank) != MPI_SUCCESS)
    return ringo_fail(ringoInvalidArgument, "ringoCommInitMPI: mpicomm is not a valid communicator");
  void* tctx = NULL;
  RINGO_CHECK(ringo_mpi_ctx_create(&mpicomm, &tctx));
  /* The rendezvous uses the duplicate too, so none of it can match the user's own messages. */
  struct mpi_rendezvous mrv = {*(MPI_Comm*)tctx};
  const struct ringo_rendezvous rv = {&mrv, mpi_allgather, mpi_barrier};
  return ringo_lifecycle_create(out, nranks, rank, &rv, tctx, ringo_mpi_ctx_free);
}
#endif /* RINGO_HAVE_MPI */
