/* ringo_mpi.h — create a ringo communicator over the ranks of an MPI communicator.
 * Needs a libringo built with MPI (make prints "mpi: yes"). Tested by test/mpi/test_mpi_ring.cc. */
#ifndef RINGO_MPI_H_
#define RINGO_MPI_H_

/* ringo needs only MPI's C API; skip the deprecated C++ bindings, which do not build cleanly
 * under -Wextra -Werror. */
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include "ringo.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Collective over mpicomm: every rank of mpicomm calls it, and becomes the ringo rank equal to
 * its MPI rank. Ranks on one host (RINGO_HOSTNAME or gethostname) sit next to each other in the
 * ring and talk through shared memory; links between hosts use MPI point-to-point on a private
 * duplicate of mpicomm. The rendezvous runs over MPI itself (no TCP port).
 * MPI must be initialised with at least MPI_THREAD_SERIALIZED (ringo calls MPI from the thread
 * that runs a collective; ringoGroupEnd runs each communicator on its own thread).
 * @return ringoSuccess; ringoInvalidArgument (NULL comm); ringoInvalidUsage (MPI not initialised,
 *         already finalized, or too low a thread level — the message says what to call);
 *         ringoSystemError; ringoRemoteError; ringoTimeout. */
RINGO_API ringoResult_t ringoCommInitMPI(ringoComm_t* comm, MPI_Comm mpicomm);

#ifdef __cplusplus
}
#endif
#endif /* RINGO_MPI_H_ */
