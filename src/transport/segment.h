/* segment.h — named shared-memory segments (segment.c): the utility the shm transport, the mailbox
 * and the one-shot board share. Tested by test/test_shm.cc and test/test_p2p.cc. */
#ifndef RINGO_SEGMENT_H_
#define RINGO_SEGMENT_H_

#include <stddef.h>

#include "ringo.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RINGO_SEGMENT_NAME_BYTES 64
#define RINGO_SEGMENT_PREFIX "/ringo-" /* then the creator's pid, its pid namespace, 16 random hex digits */

/* Creates a fresh 0600 object of total bytes (reserved, so a full /dev/shm fails here) under an
 * unguessable name written to name; *fd_out is open on it. */
ringoResult_t ringo_segment_create_named(char name[RINGO_SEGMENT_NAME_BYTES], size_t total, int* fd_out);
/* The same, mapped at *base (the descriptor closed). */
ringoResult_t ringo_segment_create(size_t total, char name[RINGO_SEGMENT_NAME_BYTES], void** base);
/* Maps the segment another rank of this user created under name; it must be exactly total bytes. */
ringoResult_t ringo_segment_attach(const char* name, size_t total, void** base);
/* 1 when name is one ringo_segment_create_named could have made: no path tricks, bounded length. */
int ringo_segment_valid_name(const char* name);
/* Removes the names that ringo processes of this user and pid namespace left when they were killed
 * (their pid has exited); see segment.c. */
void ringo_segment_sweep_stale(void);
/* The object on fd must be ours, private and exactly total bytes. */
ringoResult_t ringo_segment_check_object(const char* name, int fd, size_t total);

#ifdef __cplusplus
}
#endif
#endif /* RINGO_SEGMENT_H_ */
