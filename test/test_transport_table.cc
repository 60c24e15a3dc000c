// test_transport_table.cc — the one table of transports (src/transport/table.c): each transport's
// can-connect answer, the pick in table order, RINGO_TRANSPORT by name, and the error a bad name
// gives through a real communicator. Run: make test.
#include <gtest/gtest.h>

#include <string>

#include "harness.h"
#include "ringo.h"
#include "transport/transport.h"

namespace {

TEST(TransportTable, SharedMemoryOnOneHostNetworkAcrossHosts) {
  const ringo_link_ends one_host = {1, 0, 0};
  EXPECT_EQ(ringo_transport_pick(&one_host), &ringo_transport_shm);
  const ringo_link_ends one_host_with_mpi = {1, 1, 0};
  EXPECT_EQ(ringo_transport_pick(&one_host_with_mpi), &ringo_transport_shm) << "shm is asked first";
  const ringo_link_ends across_without_mpi = {0, 0, 0};
  EXPECT_EQ(ringo_transport_pick(&across_without_mpi), nullptr) << "nothing joins other hosts without MPI";
#ifdef RINGO_HAVE_MPI
  const ringo_link_ends across = {0, 1, 0};
  EXPECT_EQ(ringo_transport_pick(&across), &ringo_transport_mpi);
#endif
}

TEST(TransportTable, EachTransportAnswersCanConnect) {
  const ringo_link_ends forced_across = {0, 0, 1};
  EXPECT_TRUE(ringo_transport_shm.can_connect(&forced_across)) << "forced shm joins fake hosts of one machine";
#ifdef RINGO_HAVE_MPI
  const ringo_link_ends no_net = {1, 0, 1};
  EXPECT_FALSE(ringo_transport_mpi.can_connect(&no_net)) << "MPI needs a communicator made over MPI";
#endif
}

TEST(TransportTable, ByNameFindsEveryTransportAndListsThem) {
  char names[64];
  EXPECT_EQ(ringo_transport_by_name("shm", names, sizeof names), &ringo_transport_shm);
#ifdef RINGO_HAVE_MPI
  EXPECT_EQ(ringo_transport_by_name("mpi", names, sizeof names), &ringo_transport_mpi);
  EXPECT_STREQ(names, "shm mpi");
#else
  EXPECT_STREQ(names, "shm");
#endif
  EXPECT_EQ(ringo_transport_by_name("tcp", nullptr, 0), nullptr);
}

TEST(TransportTable, AnUnknownRingoTransportFailsInitWithTheKnownNames) {
  ringo_test::Options opts;
  opts.ringo_timeout_s = 5.0;
  opts.env = {{"RINGO_TRANSPORT", "carrier-pigeon"}};
  ringo_test::RunProcesses(2, [](int index, const ringoUniqueId& id, ringo_test::Shared&) {
    ringoComm_t comm = nullptr;
    EXPECT_EQ(ringoCommInitRank(&comm, 2, id, index), ringoInvalidArgument);
    EXPECT_EQ(comm, nullptr);
    const std::string msg = ringoGetLastError(nullptr);
    EXPECT_NE(msg.find("RINGO_TRANSPORT=carrier-pigeon: expected one of: shm"), std::string::npos) << msg;
  }, opts);
}

}  // namespace
