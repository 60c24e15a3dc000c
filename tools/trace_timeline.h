/* trace_timeline.h — ringo-trace --timeline: reads a RINGO_TRACE Chrome-trace file (a JSON array whose
 * closing bracket may be missing) and draws one track per rank, one box per step and slice, with the
 * hand-offs between ranks: the one ring, or the two-level ring's three walks (host ring, across hosts,
 * host ring). Header-only, needs trace_svg.h. Run: ringo-trace --timeline t.json --png t.png;
 * tested by test/test_trace.cc and test/mpi/test_mpi_two_level.cc. */
#ifndef RINGO_TRACE_TIMELINE_H_
#define RINGO_TRACE_TIMELINE_H_

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_svg.h"

/* Which ring a step went around, from its name: the one ring, or a walk of the two-level ring. */
enum tl_walk { TL_RING, TL_HOST_RS, TL_ACROSS, TL_HOST_AG };

/* The fields of one trace event that the timeline uses; the rest is skipped. */
struct tl_event {
  int pid;
  char ph;
  double ts, dur; /* microseconds */
  char name[48], cat[24], prim[24];
  long seq, chunk, slice, from, to;
  double bytes;
  long step_arg; /* args.step: the step of its walk's schedule (-1: not in the file) */
  long part;     /* args.part: which of a two-level reduce-scatter's or all-gather's host walks (0: the only one) */
  int step;      /* that step; files without args.step: from the name (see tl_steps_from_names) */
  int walk;      /* enum tl_walk */
};

/* ---------------------------------------------------------------- a small JSON reader */

struct json {
  const char* p;
  const char* end; /* the text is NUL-terminated at end, so strtod cannot run past it */
  int err;
};

static int js_peek(struct json* j) {
  while (j->p < j->end && isspace((unsigned char)*j->p)) j->p++;
  return j->p < j->end ? (unsigned char)*j->p : -1;
}

static int js_eat(struct json* j, char c) {
  if (js_peek(j) != c) return 0;
  j->p++;
  return 1;
}

static void js_expect(struct json* j, char c) {
  if (!js_eat(j, c)) j->err = 1;
}

/* A string into buf (NULL: skip it); escapes are kept as the escaped character, \uXXXX as '?'. */
static void js_string(struct json* j, char* buf, size_t cap) {
  size_t n = 0;
  if (!js_eat(j, '"')) {
    j->err = 1;
    return;
  }
  while (j->p < j->end && *j->p != '"') {
    char c = *j->p++;
    if (c == '\\' && j->p < j->end) {
      c = *j->p++;
      if (c == 'u') {
        j->p = j->end - j->p >= 4 ? j->p + 4 : j->end;
        c = '?';
      } else if (c == 'n') {
        c = '\n';
      } else if (c == 't') {
        c = '\t';
      }
    }
    if (buf && n + 1 < cap) buf[n++] = c;
  }
  if (buf && cap) buf[n] = '\0';
  if (j->p >= j->end) j->err = 1;
  else j->p++;
}

static double js_number(struct json* j) {
  js_peek(j);
  char* e = NULL;
  const double v = strtod(j->p, &e);
  if (e == j->p) j->err = 1;
  else j->p = e;
  return v;
}

static void js_skip(struct json* j, int depth) {
  const int c = js_peek(j);
  if (depth > 64) {
    j->err = 1;
  } else if (c == '"') {
    js_string(j, NULL, 0);
  } else if (c == '{' || c == '[') {
    const char close = c == '{' ? '}' : ']';
    j->p++;
    if (js_eat(j, close)) return;
    do {
      if (c == '{') {
        js_string(j, NULL, 0);
        js_expect(j, ':');
      }
      js_skip(j, depth + 1);
    } while (!j->err && js_eat(j, ','));
    js_expect(j, close);
  } else if (c >= 0 && isalpha(c)) {
    static const char* const words[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++)
      if ((size_t)(j->end - j->p) >= strlen(words[i]) && strncmp(j->p, words[i], strlen(words[i])) == 0) {
        j->p += strlen(words[i]);
        return;
      }
    j->err = 1;
  } else {
    js_number(j);
  }
}

/* A number field as a long; -1 (no rank, no peer, before any collective) for what a long cannot hold
 * (NaN, inf, 1e300), whose conversion C leaves undefined. */
static long tl_long(double v) { return v > -1e15 && v < 1e15 ? (long)v : -1; }

/* One value of an event (in_args: inside its "args" object); values of other shapes are skipped. */
static void js_field(struct json* j, const char* key, struct tl_event* e, int in_args) {
  const int c = js_peek(j);
  char ph[8];
  if (c == '"' && !in_args && strcmp(key, "name") == 0) js_string(j, e->name, sizeof e->name);
  else if (c == '"' && !in_args && strcmp(key, "cat") == 0) js_string(j, e->cat, sizeof e->cat);
  else if (c == '"' && in_args && strcmp(key, "prim") == 0) js_string(j, e->prim, sizeof e->prim);
  else if (c == '"' && !in_args && strcmp(key, "ph") == 0) js_string(j, ph, sizeof ph), e->ph = ph[0];
  else if (c == '{' && !in_args && strcmp(key, "args") == 0) {
    j->p++;
    if (js_eat(j, '}')) return;
    do {
      char k[32];
      js_string(j, k, sizeof k);
      js_expect(j, ':');
      if (!j->err) js_field(j, k, e, 1);
    } while (!j->err && js_eat(j, ','));
    js_expect(j, '}');
  } else if (c == '-' || (c >= '0' && c <= '9')) {
    const double v = js_number(j);
    if (!in_args && strcmp(key, "pid") == 0) e->pid = tl_long(v) <= INT_MAX ? (int)tl_long(v) : -1;
    else if (!in_args && strcmp(key, "ts") == 0) e->ts = v;
    else if (!in_args && strcmp(key, "dur") == 0) e->dur = v;
    else if (in_args && strcmp(key, "seq") == 0) e->seq = tl_long(v);
    else if (in_args && strcmp(key, "chunk") == 0) e->chunk = tl_long(v);
    else if (in_args && strcmp(key, "slice") == 0) e->slice = tl_long(v);
    else if (in_args && strcmp(key, "bytes") == 0) e->bytes = v;
    else if (in_args && strcmp(key, "from") == 0) e->from = tl_long(v);
    else if (in_args && strcmp(key, "to") == 0) e->to = tl_long(v);
    else if (in_args && strcmp(key, "step") == 0) e->step_arg = tl_long(v);
    else if (in_args && strcmp(key, "part") == 0) e->part = tl_long(v);
  } else {
    js_skip(j, 1);
  }
}

static void js_event(struct json* j, struct tl_event* e) {
  memset(e, 0, sizeof *e);
  e->from = e->to = e->step_arg = -1;
  js_expect(j, '{');
  if (j->err || js_eat(j, '}')) return;
  do {
    char key[32];
    js_string(j, key, sizeof key);
    js_expect(j, ':');
    if (!j->err) js_field(j, key, e, 0);
  } while (!j->err && js_eat(j, ','));
  js_expect(j, '}');
}

/* Every event of a trace file: a JSON array of objects whose "]" (and a trailing comma) may be
 * missing, as Chrome's format allows. Returns the count, or -1 with a message on stderr. */
static long tl_read(const char* path, struct tl_event** out) {
  FILE* f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "ringo-trace: cannot open %s: %s\n", path, strerror(errno));
    return -1;
  }
  size_t cap = 1 << 16, len = 0, got;
  char* text = malloc(cap + 1);
  while (text && (got = fread(text + len, 1, cap - len, f)) > 0) {
    if ((len += got) < cap) continue;
    char* grown = realloc(text, (cap *= 2) + 1);
    if (!grown) free(text);
    text = grown;
  }
  fclose(f);
  if (!text) {
    fprintf(stderr, "ringo-trace: out of memory reading %s\n", path);
    return -1;
  }
  text[len] = '\0';
  struct json j = {text, text + len, 0};
  long n = 0, ecap = 0;
  struct tl_event* ev = NULL;
  js_expect(&j, '[');
  int oom = 0;
  while (!j.err && !oom && js_peek(&j) != -1 && js_peek(&j) != ']') {
    if (n == ecap) {
      struct tl_event* grown = realloc(ev, (size_t)(ecap = ecap ? 2 * ecap : 1024) * sizeof *ev);
      if (!(oom = !grown)) ev = grown;
      else break;
    }
    js_event(&j, &ev[n++]);
    if (!js_eat(&j, ',') && js_peek(&j) != ']' && js_peek(&j) != -1) j.err = 1;
  }
  if (j.err)
    fprintf(stderr, "ringo-trace: %s is not a RINGO_TRACE file (JSON error near byte %ld)\n", path,
            (long)(j.p - text));
  if (oom) fprintf(stderr, "ringo-trace: out of memory reading %s\n", path);
  free(text);
  if (j.err || oom) {
    free(ev);
    return -1;
  }
  *out = ev;
  return n;
}

/* ---------------------------------------------------------------- the picture */

struct tl_view {
  struct tl_event* ev; /* the X events chosen, by rank then time */
  long n;
  int ranks;           /* highest pid + 1 */
  int sliced;          /* some chunk moved as several slices: label them */
  int two_level;       /* some steps are the two-level ring's walks */
  long seq_lo, seq_hi; /* the collectives shown */
  double t0, t1;       /* microseconds */
  double left, width, top, track_h, gap;
};

/* The phase a step's name says (after "host " or "across hosts "): reduce-scatter or all-gather. */
static const char* tl_phase(const struct tl_event* e) {
  static const char* const prefix[] = {"", "host ", "across hosts ", "host "};
  return e->name + strlen(prefix[e->walk]);
}
static int tl_is_rs(const struct tl_event* e) { return strncmp(tl_phase(e), "reduce-scatter", 14) == 0; }
static int tl_is_ag(const struct tl_event* e) { return strncmp(tl_phase(e), "all-gather", 10) == 0; }
/* The colour and label of a box: the halves of an all-reduce as above, and the one ring's own
 * reduce-scatter and all-gather ("reduce_scatter step s", named after the collective), which are
 * one half each (their step numbers need no offset, so tl_steps keeps to the two above). */
static int tl_rs_box(const struct tl_event* e) { return tl_is_rs(e) || strncmp(e->name, "reduce_scatter ", 15) == 0; }
static int tl_ag_box(const struct tl_event* e) { return tl_is_ag(e) || strncmp(e->name, "all_gather ", 11) == 0; }

static int tl_walk_of(const char* name) {
  if (strncmp(name, "across hosts ", 13) == 0) return TL_ACROSS;
  if (strncmp(name, "host reduce-scatter", 19) == 0) return TL_HOST_RS;
  if (strncmp(name, "host all-gather", 15) == 0) return TL_HOST_AG;
  return TL_RING;
}

/* Box colours: the host ring's halves (and the one ring's) blue and orange, across hosts green. */
static const char* tl_fill(const struct tl_event* e) {
  if (e->walk == TL_ACROSS) return tl_is_rs(e) ? "#59a14f" : "#8cd17d";
  return tl_rs_box(e) ? "#4e79a7" : tl_ag_box(e) ? "#f28e2b" : "#9c9c9c";
}

static double tl_x(const struct tl_view* v, double t) { return v->left + (t - v->t0) / (v->t1 - v->t0) * v->width; }
static double tl_y(const struct tl_view* v, int rank) { return v->top + rank * (v->track_h + v->gap); }

static int tl_cmp(const void* a, const void* b) {
  const struct tl_event *x = a, *y = b;
  if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
  return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* "rs1 c3": the step as the seed names it, and the chunk ("rs1 c3.2": its slice 2); the two-level
 * ring's walks get h (host ring) or x (across hosts) in front: "hrs0 c1", "xag1 c0". */
static void tl_label(const struct tl_view* v, const struct tl_event* e, char* buf, size_t cap) {
  const char* digits = strrchr(e->name, ' ');
  const int n = snprintf(buf, cap, "%s%s%s c%ld", e->walk == TL_ACROSS ? "x" : e->walk != TL_RING ? "h" : "",
                         tl_rs_box(e) ? "rs" : tl_ag_box(e) ? "ag" : "s", digits ? digits + 1 : "", e->chunk);
  if (v->sliced && n > 0 && (size_t)n < cap) snprintf(buf + n, cap - (size_t)n, ".%ld", e->slice);
}

/* The box that received what e sent: the next rank of its ring, one step later in the same walk
 * (and the same of a two-level collective's several host walks), same collective, chunk and slice. */
static const struct tl_event* tl_receiver(const struct tl_view* v, const struct tl_event* e) {
  for (long i = 0; i < v->n; i++) {
    const struct tl_event* r = &v->ev[i];
    if (r->pid == e->to && r->from == e->pid && r->seq == e->seq && r->walk == e->walk && r->part == e->part &&
        r->step == e->step + 1 &&
        r->chunk == e->chunk && r->slice == e->slice && strcmp(r->cat, e->cat) == 0)
      return r;
  }
  return NULL;
}

static void tl_axis(FILE* f, const struct tl_view* v) {
  const double span = v->t1 - v->t0, raw = span / 8, mag = pow(10, floor(log10(raw)));
  const double step = raw / mag < 2 ? 2 * mag : raw / mag < 5 ? 5 * mag : 10 * mag;
  /* About 8 ticks. Counted, not stepped to the span: a step of 0, inf or NaN (a span of 0 or inf, which
   * tl_times_ok keeps out) or one too small to move t would otherwise never reach the end. */
  const int ticks = step > 0 && isfinite(step) && isfinite(span) ? (int)fmin(span * 1.0001 / step, 20) : 0;
  const double bottom = tl_y(v, v->ranks) - v->gap + 6;
  svg_line(f, v->left, bottom, v->left + v->width, bottom, "#444444", 1, 1, -1);
  for (int k = 0; k <= ticks; k++) {
    const double t = k * step, x = tl_x(v, v->t0 + t);
    svg_line(f, x, v->top - 4, x, bottom + 4, "#e4e4e4", 1, 1, -1);
    svg_text(f, x, bottom + 18, 11, "middle", "normal", "#444444", "%g", t);
  }
  svg_text(f, v->left + v->width / 2, bottom + 36, 12, "middle", "normal", "#222222",
           "time since the first step (\xc2\xb5s)");
}

static void tl_boxes(FILE* f, const struct tl_view* v) {
  for (long i = 0; i < v->n; i++) {
    const struct tl_event* e = &v->ev[i];
    const double x = tl_x(v, e->ts), w = fmax(tl_x(v, e->ts + e->dur) - x, 1.0), y = tl_y(v, e->pid);
    char title[160], label[32];
    const char* fill = tl_fill(e);
    snprintf(title, sizeof title, "rank %d, collective %ld: %s (%s), chunk %ld slice %ld, %.0f B, %.2f us", e->pid,
             e->seq, e->name, e->prim, e->chunk, e->slice, e->bytes, e->dur);
    svg_rect(f, x, y, w, v->track_h, fill, "#ffffff", 0.6, title);
    tl_label(v, e, label, sizeof label);
    if (w >= 7.0 * (double)strlen(label)) svg_text(f, x + w / 2, y + v->track_h / 2 + 4, 11, "middle", "normal", "#ffffff", "%s", label);
  }
}

/* Grey lines: a slice leaves the sender when its box ends and is taken by the receiver's next box. */
static void tl_handoffs(FILE* f, const struct tl_view* v) {
  if (v->n > 400) return; /* too many lines to see anything, and the search is quadratic */
  for (long i = 0; i < v->n; i++) {
    const struct tl_event* e = &v->ev[i];
    const struct tl_event* r = e->to >= 0 ? tl_receiver(v, e) : NULL;
    if (!r) continue;
    const double x1 = tl_x(v, e->ts + e->dur), x2 = tl_x(v, fmax(e->ts + e->dur, r->ts));
    const int down = r->pid > e->pid;
    const double y1 = tl_y(v, e->pid) + (down ? v->track_h : 0), y2 = tl_y(v, r->pid) + (down ? 0 : v->track_h);
    svg_line(f, x1, y1, x2, y2, "#888888", 1, 0.7, 2);
  }
}

static int tl_draw(const struct tl_view* v, const char* file, const char* svg_path) {
  FILE* f = fopen(svg_path, "w");
  if (!f) {
    fprintf(stderr, "ringo-trace: cannot write %s: %s\n", svg_path, strerror(errno));
    return -1;
  }
  const double height = tl_y(v, v->ranks) + 90;
  const char* base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
  svg_open(f, v->left + v->width + (v->two_level ? 190 : 30), height);
  char which[64];
  if (v->seq_lo == v->seq_hi) snprintf(which, sizeof which, "collective %ld", v->seq_lo);
  else snprintf(which, sizeof which, "collectives %ld..%ld", v->seq_lo, v->seq_hi);
  svg_text(f, 12, 24, 16, "start", "bold", "#222222", "RINGO_TRACE timeline of %s: %d ranks, %s%s", base, v->ranks,
           which, v->two_level ? ", two-level ring (h: host ring, x: across hosts)" : "");
  tl_axis(f, v);
  for (int r = 0; r < v->ranks; r++)
    svg_text(f, v->left - 10, tl_y(v, r) + v->track_h / 2 + 4, 12, "end", "bold", "#222222", "rank %d", r);
  tl_boxes(f, v);
  tl_handoffs(f, v);
  const double ly = height - 14;
  svg_rect(f, 12, ly - 11, 14, 14, "#4e79a7", "#ffffff", 1, NULL);
  svg_text(f, 30, ly, 11, "start", "normal", "#222222", "reduce-scatter step (rs s c: step s, chunk c[.slice])");
  svg_rect(f, 342, ly - 11, 14, 14, "#f28e2b", "#ffffff", 1, NULL);
  svg_text(f, 360, ly, 11, "start", "normal", "#222222", "all-gather step");
  double x = 470;
  if (v->two_level) {
    svg_rect(f, x, ly - 11, 14, 14, "#59a14f", "#ffffff", 1, NULL);
    svg_rect(f, x + 16, ly - 11, 14, 14, "#8cd17d", "#ffffff", 1, NULL);
    svg_text(f, x + 36, ly, 11, "start", "normal", "#222222", "across hosts (rs, ag)");
    x += 160;
  }
  svg_line(f, x, ly - 4, x + 30, ly - 4, "#888888", 1, 0.7, 2);
  svg_text(f, x + 36, ly, 11, "start", "normal", "#222222",
           "a slice handed to the next rank; a box lasts from the step's start to its last byte, waiting included");
  svg_close(f);
  return fclose(f) == 0 ? 0 : -1;
}

static void tl_summary(const struct tl_view* v, const char* file) {
  char which[64];
  if (v->seq_lo == v->seq_hi) snprintf(which, sizeof which, "collective %ld", v->seq_lo);
  else snprintf(which, sizeof which, "collectives %ld..%ld", v->seq_lo, v->seq_hi);
  printf("%s: %d ranks, %ld step events of %s%s, %.1f us from the first step to the last\n", file, v->ranks, v->n,
         which, v->two_level ? " (two-level ring: h = host ring, x = across hosts)" : "", v->t1 - v->t0);
  printf("  rank  events  bytes sent  bytes recv  busy (us)  steps in order (rs/ag step, chunk)\n");
  for (int r = 0; r < v->ranks; r++) {
    long k = 0, shown = 0;
    double sent = 0, recv = 0, busy = 0;
    char order[256] = "";
    for (long i = 0; i < v->n; i++) {
      const struct tl_event* e = &v->ev[i];
      if (e->pid != r) continue;
      k++;
      sent += e->to >= 0 ? e->bytes : 0;
      recv += e->from >= 0 ? e->bytes : 0;
      busy += e->dur;
      char label[32];
      tl_label(v, e, label, sizeof label);
      if (shown++ < 9) snprintf(order + strlen(order), sizeof order - strlen(order), "%s%s", shown > 1 ? ", " : "", label);
    }
    printf("  %4d  %6ld  %10.0f  %10.0f  %9.1f  %s%s\n", r, k, sent, recv, busy, order, shown > 9 ? ", ..." : "");
  }
}

/* Each event's step in its walk's schedule: args.step where the file has it; else (files written
 * before it) from the name. "all-gather step s" follows the reduce-scatter half's steps: N-1 of them
 * on the one ring; across hosts H-1, one more than the highest "across hosts reduce-scatter step"
 * named. The host ring's halves count their own steps, as named. */
static void tl_steps(struct tl_view* v) {
  int across_rs = 0;
  for (long i = 0; i < v->n; i++) {
    const struct tl_event* e = &v->ev[i];
    const char* sp = strrchr(e->name, ' ');
    if (e->walk == TL_ACROSS && tl_is_rs(e) && sp && atoi(sp + 1) + 1 > across_rs) across_rs = atoi(sp + 1) + 1;
  }
  for (long i = 0; i < v->n; i++) {
    struct tl_event* e = &v->ev[i];
    const char* sp = strrchr(e->name, ' ');
    const int offset = !tl_is_ag(e) || e->walk == TL_HOST_AG ? 0 : e->walk == TL_ACROSS ? across_rs : v->ranks - 1;
    e->step = e->step_arg >= 0 && e->step_arg < 1L << 20 ? (int)e->step_arg : (sp ? atoi(sp + 1) : 0) + offset;
  }
}

/* The largest |ts| and dur drawn, in us (127 years): below 2^52, where a double still tells times 1 us
 * apart, so a file's span is never 0 after rounding, nor inf. */
#define TL_MAX_US 4e15

/* A step event's times are drawable: finite, dur >= 0, both within TL_MAX_US (NaN fails every test). */
static int tl_times_ok(const struct tl_event* e) {
  return fabs(e->ts) <= TL_MAX_US && e->dur >= 0 && e->dur <= TL_MAX_US;
}

/* Why the file is refused: which event (1 for the array's first), and the times it has. */
static void tl_bad_times(const char* file, long i, const struct tl_event* e) {
  fprintf(stderr, "ringo-trace: %s: event %ld (\"%s\" of rank %d, collective %ld) has ts %g us, dur %g us: ", file,
          i + 1, e->name, e->pid, e->seq, e->ts, e->dur);
  fprintf(stderr, "times must be finite, dur >= 0 and both within %g us\n", TL_MAX_US);
}

static int timeline_main(const char* file, long seq_lo, long seq_hi, const char* svg, const char* png, double zoom,
                         int quiet) {
  struct tl_event* all = NULL;
  const long total = tl_read(file, &all);
  if (total < 0) return 1;
  struct tl_view v = {.ev = all, .n = 0, .left = 80, .width = 1100, .top = 50, .track_h = 36, .gap = 16};
  long oneshot = 0; /* one-shot and two-phase collectives: one event each, no ring step to draw */
  for (long i = 0; i < total; i++) {
    if (all[i].ph != 'X' || all[i].seq < seq_lo || (seq_hi >= 0 && all[i].seq > seq_hi) || all[i].pid < 0 ||
        all[i].pid >= 4096)
      continue;
    if (!tl_times_ok(&all[i])) {
      tl_bad_times(file, i, &all[i]);
      free(all);
      return 1;
    }
    if (strcmp(all[i].prim, "one-shot") == 0 || strcmp(all[i].prim, "two-phase") == 0) oneshot++;
    else all[v.n++] = all[i];
  }
  if (oneshot && !quiet)
    printf("%s: %ld one-shot or two-phase collective events (collectives of one host through its board, no ring "
           "steps) not drawn; "
           "RINGO_ALGO=ring runs them on the ring\n", file, oneshot);
  if (v.n == 0) {
    fprintf(stderr, "ringo-trace: no step events in %s%s\n", file, seq_hi >= 0 || seq_lo ? " for those --seq" : "");
    free(all);
    return 1;
  }
  qsort(v.ev, (size_t)v.n, sizeof *v.ev, tl_cmp);
  v.t0 = v.ev[0].ts, v.t1 = v.ev[0].ts + v.ev[0].dur;
  v.seq_lo = v.seq_hi = v.ev[0].seq;
  for (long i = 0; i < v.n; i++) {
    v.t0 = fmin(v.t0, v.ev[i].ts);
    v.t1 = fmax(v.t1, v.ev[i].ts + v.ev[i].dur);
    v.ranks = v.ev[i].pid + 1 > v.ranks ? v.ev[i].pid + 1 : v.ranks;
    v.sliced |= v.ev[i].slice > 0;
    v.seq_lo = v.ev[i].seq < v.seq_lo ? v.ev[i].seq : v.seq_lo;
    v.seq_hi = v.ev[i].seq > v.seq_hi ? v.ev[i].seq : v.seq_hi;
  }
  if (v.t1 <= v.t0) v.t1 = v.t0 + 1;
  for (long i = 0; i < v.n; i++) {
    v.ev[i].walk = tl_walk_of(v.ev[i].name);
    v.two_level |= v.ev[i].walk != TL_RING;
  }
  tl_steps(&v);
  if (!quiet) tl_summary(&v, file);
  int rc = 0;
  if (svg || png) {
    char path[1024];
    if (svg) snprintf(path, sizeof path, "%s", svg);
    else snprintf(path, sizeof path, "%.*s.svg", (int)(strrchr(png, '.') ? strrchr(png, '.') - png : (long)strlen(png)), png);
    rc = tl_draw(&v, file, path) != 0 || (png && svg_to_png(path, png, zoom) != 0);
    if (!rc && !quiet) printf("drew %s%s%s\n", path, png ? " and " : "", png ? png : "");
  }
  free(all);
  return rc;
}

#endif /* RINGO_TRACE_TIMELINE_H_ */
