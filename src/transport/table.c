/* table.c — ONE TABLE of transports: each is asked in turn whether it can connect two ranks, and
 * RINGO_TRANSPORT picks one by name. A new transport is one file plus one line here.
 * Tested by test/test_transport_table.cc. */
#include <stdio.h>
#include <string.h>

#include "transport/transport.h"

static const struct ringo_transport* const transports[] = {
    &ringo_transport_shm,
#ifdef RINGO_HAVE_MPI
    &ringo_transport_mpi,
#endif
};
#define NUM_TRANSPORTS (sizeof transports / sizeof transports[0])

const struct ringo_transport* ringo_transport_pick(const struct ringo_link_ends* ends) {
  for (size_t i = 0; i < NUM_TRANSPORTS; i++)
    if (transports[i]->can_connect(ends)) return transports[i];
  return NULL;
}

const struct ringo_transport* ringo_transport_by_name(const char* name, char* names, size_t cap) {
  size_t used = 0;
  for (size_t i = 0; names && i < NUM_TRANSPORTS && used < cap; i++)
    used += (size_t)snprintf(names + used, cap - used, "%s%s", i ? " " : "", transports[i]->name);
  for (size_t i = 0; i < NUM_TRANSPORTS; i++)
    if (strcmp(transports[i]->name, name) == 0) return transports[i];
  return NULL;
}
