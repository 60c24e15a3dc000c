/* core.c — logging, the per-thread last-error message, type names, the clock, polite yielding.
 * Depends on nothing else in ringo. Tested through test/test_api.cc (error strings and messages), test/test_env.cc (RINGO_DEBUG)
 * and test/test_shm.cc (yielding beside a busy loop). */
#include "core/core.h"

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define RINGO_MSG_BYTES 1024

static int log_level = RINGO_LEVEL_WARN;
static unsigned log_subsys = RINGO_LOG_ALL;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static _Thread_local char thread_error[RINGO_MSG_BYTES];

static void log_line(int level, const char* file, int line, const char* fmt, va_list ap) {
  static const char* const tags[] = {"NONE", "WARN", "INFO", "TRACE"};
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  char msg[RINGO_MSG_BYTES];
  vsnprintf(msg, sizeof msg, fmt, ap);
  const char* base = strrchr(file, '/');
  /* One fprintf per line so lines of concurrent ranks do not interleave mid-line. */
  fprintf(stderr, "%s:%d ringo %s %s:%d %s\n", host, (int)getpid(), tags[level], base ? base + 1 : file,
          line, msg);
}

/* A warning from inside log_init, which ringo_log cannot give (it would wait for log_init's once). */
static void __attribute__((format(printf, 1, 2))) log_init_warn(const char* fmt, ...) {
  if (log_level < RINGO_LEVEL_WARN) return;
  va_list ap;
  va_start(ap, fmt);
  log_line(RINGO_LEVEL_WARN, __FILE__, __LINE__, fmt, ap);
  va_end(ap);
}

/* RINGO_DEBUG_SUBSYS: the named subsystems (ALL where none is known); a name it does not know is
 * warned about, never silently dropped. */
static unsigned parse_subsys(const char* s) {
  static const struct { const char* name; unsigned bit; } names[] = {
      {"INIT", RINGO_LOG_INIT}, {"BOOT", RINGO_LOG_BOOT}, {"SHM", RINGO_LOG_SHM},
      {"COLL", RINGO_LOG_COLL}, {"ENV", RINGO_LOG_ENV},   {"NET", RINGO_LOG_NET},
      {"ALL", RINGO_LOG_ALL}};
  unsigned mask = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  for (char* save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    size_t i = 0;
    while (i < sizeof names / sizeof names[0] && strcasecmp(tok, names[i].name) != 0) i++;
    if (i < sizeof names / sizeof names[0]) mask |= names[i].bit;
    else log_init_warn("RINGO_DEBUG_SUBSYS: \"%s\" is not INIT, BOOT, SHM, COLL, ENV, NET or ALL; ignored", tok);
  }
  return mask ? mask : RINGO_LOG_ALL;
}

static void log_init(void) {
  static const char* const levels[] = {"NONE", "WARN", "INFO", "TRACE"}; /* RINGO_LEVEL_* order */
  const char* level = getenv("RINGO_DEBUG");
  if (level) {
    int found = -1;
    for (int i = 0; i < 4 && found < 0; i++)
      if (strcasecmp(level, levels[i]) == 0) found = i;
    if (found >= 0) log_level = found;
    else log_init_warn("RINGO_DEBUG=\"%s\" is not NONE, WARN, INFO or TRACE; WARN is used", level);
  }
  const char* subsys = getenv("RINGO_DEBUG_SUBSYS");
  if (subsys) log_subsys = parse_subsys(subsys);
}

int ringo_log_enabled(int level, unsigned subsys) {
  pthread_once(&log_once, log_init);
  return level <= log_level && (subsys & log_subsys) != 0;
}

void ringo_log(int level, unsigned subsys, const char* file, int line, const char* fmt, ...) {
  if (!ringo_log_enabled(level, subsys)) return;
  va_list ap;
  va_start(ap, fmt);
  log_line(level, file, line, fmt, ap);
  va_end(ap);
}

ringoResult_t ringo_fail(ringoResult_t res, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(thread_error, sizeof thread_error, fmt, ap);
  va_end(ap);
  RINGO_WARN("%s: %s", ringoGetErrorString(res), thread_error);
  return res;
}

ringoResult_t ringo_annotate(ringoResult_t res, const char* fmt, ...) {
  char msg[RINGO_MSG_BYTES];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  memcpy(thread_error, msg, sizeof msg);
  RINGO_INFO(RINGO_LOG_ALL, "-> %s", thread_error);
  return res;
}

ringoResult_t ringo_say_where(ringoResult_t res, const char* fmt, ...) {
  if (strstr(thread_error, " [in ringo") != NULL) return res;
  char where[RINGO_MSG_BYTES];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(where, sizeof where, fmt, ap);
  va_end(ap);
  char what[RINGO_MSG_BYTES];
  memcpy(what, thread_error, sizeof what);
  return ringo_annotate(res, "%s [in %s]", what, where);
}

const char* ringo_thread_last_error(void) { return thread_error; }
void ringo_thread_clear_error(void) { thread_error[0] = '\0'; }

double ringo_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Per thread: a waiting thread is one rank's engine, and it is its core that is contended. */
static _Thread_local double yield_blocked_until, last_slow_yield = -1.0;

int ringo_yield(int watch) {
  const double start = ringo_now();
  if (watch && start < yield_blocked_until) return 0;
  sched_yield();
  const double end = ringo_now();
  if (watch && end - start > RINGO_YIELD_SLOW_S) {
    /* One slow yield happens now and then (another process woke up); two close together mean
     * a stranger holds this core (docs/performance.md). */
    if (end - last_slow_yield < RINGO_YIELD_SLOW_WINDOW_S) yield_blocked_until = end + RINGO_YIELD_BACKOFF_S;
    last_slow_yield = end;
  }
  return 1;
}

/* One table for the datatypes so sizes and names cannot drift apart. */
static const struct { size_t size; const char* name; } type_table[RINGO_NUM_TYPES] = {
    [ringoInt8] = {1, "int8"},       [ringoUint8] = {1, "uint8"},     [ringoInt32] = {4, "int32"},
    [ringoUint32] = {4, "uint32"},   [ringoInt64] = {8, "int64"},     [ringoUint64] = {8, "uint64"},
    [ringoFloat16] = {2, "float16"}, [ringoFloat32] = {4, "float32"}, [ringoFloat64] = {8, "float64"},
    [ringoBfloat16] = {2, "bfloat16"}};

size_t ringo_type_size(ringoDataType_t type) {
  return ((unsigned)type < RINGO_NUM_TYPES) ? type_table[type].size : 0;
}
const char* ringo_type_name(ringoDataType_t type) {
  return ((unsigned)type < RINGO_NUM_TYPES) ? type_table[type].name : "invalid";
}
const char* ringo_op_name(ringoRedOp_t op) {
  static const char* const names[RINGO_NUM_OPS] = {"sum", "prod", "max", "min", "avg"};
  return ((unsigned)op < RINGO_NUM_OPS) ? names[op] : "invalid";
}

/* The strings of ringo.h's one result list (RINGO_RESULT_LIST), indexed by code. */
#define RINGO_RESULT_STRING(code, value, text) [value] = text,
static const char* const result_strings[] = {RINGO_RESULT_LIST(RINGO_RESULT_STRING)};
#define RINGO_RESULT_COUNT(code, value, text) +1
_Static_assert(sizeof result_strings / sizeof result_strings[0] == 0 RINGO_RESULT_LIST(RINGO_RESULT_COUNT),
               "result codes have a gap");

const char* ringoGetErrorString(ringoResult_t result) {
  if ((unsigned)result < sizeof result_strings / sizeof result_strings[0]) return result_strings[result];
  return "unknown result code";
}
