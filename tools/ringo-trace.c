/* ringo-trace.c — a ring all-reduce step by step, from src/schedule.c itself: who sends which chunk to whom,
 * the partial sums each rank holds after every step, the final ownership; --svg/--png draws it, --timeline
 * draws a RINGO_TRACE file. Needs src/include/schedule.h (teaching tool: -Isrc/include). Run: ringo-trace -n 4 */
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/schedule.h"
#include "tool_args.h"
#include "trace_svg.h"
#include "trace_timeline.h"

#define MAX_N 32
/* --zoom's range: rsvg-convert draws a PNG that many times the SVG's size (about 1200 pixels wide). */
#define MIN_ZOOM 0.05
#define MAX_ZOOM 16.0

/* What one rank has for one chunk: the ranks whose values it sums, in the ring order they were
 * added, starting from `start` (the rank the chunk left first). Empty mask: nothing. */
struct cell {
  uint64_t mask;
  int start;
};

/* One chunk on the wire during one step, and what the receiver made of it. */
struct msg {
  int valid, from, to, chunk;
  struct cell sent, after; /* the value sent; the receiver's value for that chunk afterwards */
  int reduced;             /* the receiver added its own value (reduce-scatter) or just kept it */
};

/* The state after a step (or at the start), kept for drawing. */
struct snapshot {
  int step; /* display step, -1: the start */
  struct cell hold[MAX_N][MAX_N];
  struct msg msgs[MAX_N];
};

struct ring {
  int n;
  size_t count; /* elements, 0: not given */
  int nsteps;   /* fused steps of ringo_schedule: 2N-1 */
  struct ringo_step steps[MAX_N][RINGO_MAX_STEPS(MAX_N)];
  struct cell hold[MAX_N][MAX_N]; /* hold[p][c]: what rank p has for chunk c */
  struct msg msgs[MAX_N];         /* msgs[p]: what p sends during the current step */
  struct snapshot* snaps;         /* 2N-1: the start, then after every step */
};

static int prim_reduces(enum ringo_prim p) {
  return p == RINGO_PRIM_RECV_REDUCE_SEND || p == RINGO_PRIM_RECV_REDUCE_COPY_SEND || p == RINGO_PRIM_RECV_REDUCE_COPY;
}
static const char* prim_code(enum ringo_prim p) {
  static const char* const codes[] = {"S", "RRS", "RRCS", "RRC", "CS", "RCS", "R"};
  return codes[p];
}

static int popcount64(uint64_t m) { return __builtin_popcountll(m); }

/* "r2+r3+r0": the ranks in the order their values were added; long sums are shortened. */
static void cell_str(const struct ring* r, struct cell c, char* buf, size_t cap) {
  const int k = popcount64(c.mask);
  size_t used = 0;
  buf[0] = '\0';
  if (k == 0) {
    snprintf(buf, cap, "-");
    return;
  }
  if (k > 4) {
    snprintf(buf, cap, "r%d+...+r%d (%d)", c.start, ringo_mod(c.start + k - 1, r->n), k);
    return;
  }
  for (int i = 0; i < k && used < cap; i++)
    used += (size_t)snprintf(buf + used, cap - used, "%sr%d", i ? "+" : "", ringo_mod(c.start + i, r->n));
}

static const char* phase_name(const struct ring* r, int s, char* buf, size_t cap) {
  if (s < 0) snprintf(buf, cap, "start");
  else if (s < r->n - 1) snprintf(buf, cap, "reduce-scatter step %d", s);
  else snprintf(buf, cap, "all-gather step %d", s - (r->n - 1));
  return buf;
}

/* ---------------------------------------------------------------- the symbolic run */

static void ring_init(struct ring* r, int n, size_t count) {
  memset(r, 0, sizeof *r);
  r->n = n;
  r->count = count;
  for (int p = 0; p < n; p++) {
    r->nsteps = ringo_schedule(RINGO_COLL_ALLREDUCE, n, p, 0, r->steps[p]);
    for (int c = 0; c < n; c++) r->hold[p][c] = (struct cell){(uint64_t)1 << p, p};
  }
}

/* The sending half of fused step t: every position that sends at t puts its chunk on the wire. */
static void send_half(struct ring* r, int t) {
  for (int p = 0; p < r->n; p++) {
    const struct ringo_step st = r->steps[p][t];
    r->msgs[p] = (struct msg){0};
    if (!ringo_prim_sends(st.prim)) continue;
    r->msgs[p] = (struct msg){.valid = 1, .from = p, .to = ringo_mod(p + 1, r->n), .chunk = st.chunk,
                              .sent = r->hold[p][st.chunk]};
  }
}

/* The receiving half of fused step t: position p takes what p-1 sent at step t-1 and reduces or
 * keeps it. Returns 0 with a message when the schedule contradicts itself. */
static int recv_half(struct ring* r, int t) {
  for (int p = 0; p < r->n; p++) {
    const struct ringo_step st = r->steps[p][t];
    struct msg* m = &r->msgs[ringo_mod(p - 1, r->n)];
    if (ringo_prim_receives(st.prim) != m->valid || (m->valid && m->chunk != st.chunk)) {
      fprintf(stderr, "ringo-trace: schedule mismatch at step %d: r%d expects chunk %d, r%d sent %d\n", t, p,
              st.chunk, m->from, m->valid ? m->chunk : -1);
      return 0;
    }
    if (!m->valid) continue;
    struct cell v = m->sent;
    if (prim_reduces(st.prim)) {
      if (v.mask & ((uint64_t)1 << p)) {
        fprintf(stderr, "ringo-trace: r%d would add its value to chunk %d twice\n", p, st.chunk);
        return 0;
      }
      v.mask |= (uint64_t)1 << p;
    }
    m->reduced = prim_reduces(st.prim);
    m->after = v;
    r->hold[p][st.chunk] = v;
  }
  return 1;
}

static void snap(struct ring* r, int idx, int step) {
  struct snapshot* s = &r->snaps[idx];
  s->step = step;
  memcpy(s->hold, r->hold, sizeof s->hold);
  memcpy(s->msgs, r->msgs, sizeof s->msgs);
}

/* Runs the whole all-reduce: display step s is the send of fused step s and the receive of fused
 * step s+1 (ringo fuses them; the seed counts them as one step). */
static int ring_run(struct ring* r) {
  snap(r, 0, -1);
  for (int s = 0; s + 1 < r->nsteps; s++) {
    send_half(r, s);
    if (!recv_half(r, s + 1)) return 0;
    snap(r, s + 1, s);
  }
  return 1;
}

/* ---------------------------------------------------------------- text */

static size_t chunk_len(const struct ring* r, int c) {
  size_t off, len;
  ringo_chunk_range(r->count, r->n, c, &off, &len);
  return len;
}

static void print_intro(const struct ring* r) {
  printf("Ring all-reduce of %d ranks, replayed from src/schedule.c (ringo_schedule, RINGO_COLL_ALLREDUCE).\n", r->n);
  printf("ring:  ");
  for (int p = 0; p < r->n; p++) printf("r%d -> ", p);
  printf("r0   (each rank sends only to the next and receives only from the previous)\n");
  printf("Every rank's vector is cut into %d chunks; \"r2\" means rank 2's own values of that chunk and\n"
         "\"r1+r2\" their sum.", r->n);
  if (r->count) {
    printf(" count = %zu elements:\n", r->count);
    for (int c = 0; c < r->n; c++) {
      size_t off, len;
      ringo_chunk_range(r->count, r->n, c, &off, &len);
      printf("  chunk %d = elements [%zu, %zu)%s\n", c, off, off + len, len ? "" : "  (empty: nothing moves)");
    }
  } else {
    printf("\n");
  }
}

static void print_schedule(const struct ring* r) {
  printf("\nWhat ringo_schedule() gives each rank (PRIM:chunk per fused step t; each send is fused with the\n"
         "receive of the step before, so 2N-2 = %d sends take 2N-1 = %d steps):\n  rank", 2 * r->n - 2, r->nsteps);
  for (int t = 0; t < r->nsteps; t++) printf("  t=%-*d", t + 1 < r->nsteps ? 4 : 0, t);
  printf("\n");
  for (int p = 0; p < r->n; p++) {
    printf("  r%-3d", p);
    for (int t = 0; t < r->nsteps; t++) {
      char code[16];
      snprintf(code, sizeof code, "%s:%d", prim_code(r->steps[p][t].prim), r->steps[p][t].chunk);
      printf("  %-*s", t + 1 < r->nsteps ? 6 : 0, code);
    }
    printf("\n");
  }
  printf("  S send, RRS recv-reduce-send, RRCS recv-reduce-copy-send (the sum is final: keep it and pass it on),\n"
         "  RCS recv-copy-send, R recv (keep it)\n");
}

static void print_holdings(const struct ring* r, const struct snapshot* s) {
  char buf[64];
  int width = 8;
  for (int p = 0; p < r->n; p++)
    for (int c = 0; c < r->n; c++) {
      cell_str(r, s->hold[p][c], buf, sizeof buf);
      if ((int)strlen(buf) + 3 > width) width = (int)strlen(buf) + 3;
    }
  printf("  holds:");
  for (int c = 0; c < r->n; c++) printf(" chunk %-*d", c + 1 < r->n ? width - 6 : 0, c);
  printf("\n");
  for (int p = 0; p < r->n; p++) {
    printf("    r%-3d", p);
    for (int c = 0; c < r->n; c++) {
      char shown[80];
      const int changed = s->step >= 0 && s->msgs[ringo_mod(p - 1, r->n)].valid &&
                          s->msgs[ringo_mod(p - 1, r->n)].chunk == c;
      cell_str(r, s->hold[p][c], buf, sizeof buf);
      snprintf(shown, sizeof shown, changed ? "[%s]" : " %s", buf);
      printf(" %-*s", c + 1 < r->n ? width : 0, shown);
    }
    printf("\n");
  }
}

static void print_step(const struct ring* r, const struct snapshot* s) {
  char name[48], sent[64], after[64];
  phase_name(r, s->step, name, sizeof name);
  const int rs = s->step < r->n - 1;
  printf("\n%s: every rank sends one chunk to the next, %s\n", name,
         rs ? "which adds its own value of that chunk" : "which keeps it (it is final)");
  for (int p = 0; p < r->n; p++) {
    const struct msg* m = &s->msgs[p];
    if (!m->valid) continue;
    cell_str(r, m->sent, sent, sizeof sent);
    cell_str(r, m->after, after, sizeof after);
    printf("  r%d -> r%d  chunk %d = %-14s r%d %s chunk %d = %s", m->from, m->to, m->chunk, sent, m->to,
           m->reduced ? "adds:" : "keeps:", m->chunk, after);
    if (r->count) printf("   (%zu elements%s)", chunk_len(r, m->chunk), chunk_len(r, m->chunk) ? "" : ", skipped");
    printf("\n");
  }
  print_holdings(r, s);
}

/* After reduce-scatter rank p owns chunk p+1; after all-gather everyone has every chunk. Checks
 * it, so the tool also fails loudly if the schedule ever broke. */
static int print_ownership(const struct ring* r, const struct snapshot* s, int final) {
  const uint64_t all = r->n == 64 ? ~(uint64_t)0 : (((uint64_t)1 << r->n) - 1);
  char buf[64];
  int ok = 1;
  if (!final) {
    printf("\nAfter reduce-scatter (%d steps) each rank owns one chunk summed over all %d ranks:\n", r->n - 1, r->n);
    for (int p = 0; p < r->n; p++) {
      const int c = ringo_mod(p + 1, r->n);
      cell_str(r, s->hold[p][c], buf, sizeof buf);
      printf("  r%d owns chunk %d = %s\n", p, c, buf);
      ok &= s->hold[p][c].mask == all;
    }
    return ok;
  }
  printf("\nFinal ownership after all-gather (%d more step%s): every rank holds every chunk, complete:\n", r->n - 1,
         r->n == 2 ? "" : "s");
  for (int c = 0; c < r->n; c++) {
    int everywhere = 1;
    for (int p = 0; p < r->n; p++) everywhere &= s->hold[p][c].mask == all && s->hold[p][c].start == s->hold[0][c].start;
    cell_str(r, s->hold[0][c], buf, sizeof buf);
    printf("  chunk %d = %s on r0..r%d%s; added up on the way to r%d, then copied\n", c, buf, r->n - 1,
           everywhere ? "" : "  ** NOT on every rank **", ringo_mod(c - 1, r->n));
    ok &= everywhere;
  }
  return ok;
}

static void print_totals(const struct ring* r) {
  printf("\nEach rank sent %d chunks of 1/%d of the vector: 2(N-1)/N = %.4g times its size D", 2 * (r->n - 1), r->n,
         2.0 * (r->n - 1) / r->n);
  if (!r->count) {
    printf(".\n");
    return;
  }
  printf(" = %.1f elements:\n", 2.0 * (r->n - 1) / r->n * (double)r->count);
  for (int p = 0; p < r->n; p++) {
    size_t sent = 0;
    for (int t = 0; t < r->nsteps; t++)
      if (ringo_prim_sends(r->steps[p][t].prim)) sent += chunk_len(r, r->steps[p][t].chunk);
    printf("  r%d sent %zu elements\n", p, sent);
  }
  if (r->count % (size_t)r->n) printf("  (the law is exact when N divides the count; here the chunks differ by one)\n");
}

/* ---------------------------------------------------------------- the drawing: one panel per step */

struct layout {
  double cell, node_w, node_h, radius, panel_w, panel_h;
  int cols, rows;
};

static struct layout ring_layout(int n, int panels) {
  struct layout L;
  L.cell = n <= 8 ? 18 : 11;
  L.node_w = n * L.cell + 10 < 44 ? 44 : n * L.cell + 10;
  L.node_h = 20 + L.cell + 8;
  const double chord = n == 2 ? L.node_h + 70 : L.node_w + 34;
  L.radius = chord / (2 * sin(M_PI / n));
  if (L.radius < 70) L.radius = 70;
  L.panel_w = fmax(2 * L.radius + L.node_w + 30, 300); /* room for the captions */
  L.panel_h = 2 * L.radius + L.node_h + 70;
  L.cols = panels < 4 ? panels : (n <= 4 ? 4 : 3);
  L.rows = (panels + L.cols - 1) / L.cols;
  return L;
}

/* Colour of a chunk summing k of n ranks: light to dark blue as the sum grows, green when complete. */
static void sum_colour(int k, int n, char* buf, size_t cap) {
  if (k >= n) {
    snprintf(buf, cap, "#2e8b57");
    return;
  }
  const double f = n > 2 ? (double)(k - 1) / (n - 2) : 0; /* 0 .. 1 */
  const int r0 = 0xd6, g0 = 0xe6, b0 = 0xf5, r1 = 0x1f, g1 = 0x4e, b1 = 0x8c;
  snprintf(buf, cap, "#%02x%02x%02x", (int)(r0 + f * (r1 - r0)), (int)(g0 + f * (g1 - g0)), (int)(b0 + f * (b1 - b0)));
}

static void node_centre(const struct layout* L, double ox, double oy, int p, int n, double* x, double* y) {
  const double a = -M_PI / 2 + 2 * M_PI * p / n;
  *x = ox + L->panel_w / 2 + L->radius * cos(a);
  *y = oy + 44 + L->node_h / 2 + L->radius + L->radius * sin(a);
}

/* How far from a node's centre a line towards (dx, dy) leaves its box. */
static double box_exit(const struct layout* L, double dx, double dy) {
  const double len = sqrt(dx * dx + dy * dy);
  const double tx = fabs(dx) > 1e-9 ? (L->node_w / 2 + 5) / fabs(dx) : 1e9;
  const double ty = fabs(dy) > 1e-9 ? (L->node_h / 2 + 5) / fabs(dy) : 1e9;
  return (tx < ty ? tx : ty) * len;
}

static void draw_arrow(FILE* f, const struct layout* L, const struct ring* r, const struct msg* m, double ox,
                       double oy, int rs) {
  double x1, y1, x2, y2;
  node_centre(L, ox, oy, m->from, r->n, &x1, &y1);
  node_centre(L, ox, oy, m->to, r->n, &x2, &y2);
  const double dx = x2 - x1, dy = y2 - y1, len = sqrt(dx * dx + dy * dy);
  const double ux = dx / len, uy = dy / len, shift = r->n == 2 ? 12 : 0; /* two ranks: two parallel arrows */
  const double a = box_exit(L, dx, dy), b = len - box_exit(L, dx, dy);
  const double sx = -uy * shift, sy = ux * shift;
  svg_line(f, x1 + ux * a + sx, y1 + uy * a + sy, x1 + ux * b + sx, y1 + uy * b + sy, rs ? "#2c5d8f" : "#c46210", 2.2,
           1, rs ? 0 : 1);
  /* The label sits beside the middle of the arrow, away from the ring's centre. */
  const double mx = (x1 + x2) / 2 + sx, my = (y1 + y2) / 2 + sy;
  const double cx = ox + L->panel_w / 2, cy = oy + 44 + L->node_h / 2 + L->radius;
  double ax = mx - cx, ay = my - cy, al = sqrt(ax * ax + ay * ay);
  if (al < 1e-6) ax = -uy, ay = ux, al = 1;
  svg_text(f, mx + ax / al * 16, my + ay / al * 16 + 4, 11, "middle", "bold", rs ? "#2c5d8f" : "#c46210", "c%d",
           m->chunk);
}

static void draw_node(FILE* f, const struct layout* L, const struct ring* r, const struct snapshot* s, int p,
                      double ox, double oy) {
  double x, y;
  char colour[16], sum[64], title[128];
  node_centre(L, ox, oy, p, r->n, &x, &y);
  svg_rect(f, x - L->node_w / 2, y - L->node_h / 2, L->node_w, L->node_h, "#f7f7f7", "#555555", 1, NULL);
  svg_text(f, x, y - L->node_h / 2 + 14, 12, "middle", "bold", "#222222", "r%d", p);
  const struct msg* in = s->step >= 0 ? &s->msgs[ringo_mod(p - 1, r->n)] : NULL;
  for (int c = 0; c < r->n; c++) {
    const struct cell v = s->hold[p][c];
    const int k = popcount64(v.mask);
    const double cx = x - r->n * L->cell / 2 + c * L->cell, cy = y - L->node_h / 2 + 20;
    const int changed = in && in->valid && in->chunk == c;
    sum_colour(k, r->n, colour, sizeof colour);
    cell_str(r, v, sum, sizeof sum);
    snprintf(title, sizeof title, "r%d, chunk %d = %s", p, c, sum);
    svg_rect(f, cx + 1, cy, L->cell - 2, L->cell - 2, colour, changed ? "#d62728" : "#ffffff", changed ? 2.2 : 1,
             title);
    if (L->cell >= 14)
      svg_text(f, cx + L->cell / 2, cy + L->cell - 6, 10, "middle", "normal",
               k * 2 > r->n || k == r->n ? "#ffffff" : "#222222", "%d", c);
  }
}

static void draw_panel(FILE* f, const struct layout* L, const struct ring* r, const struct snapshot* s, double ox,
                       double oy) {
  char name[48];
  const int rs = s->step < r->n - 1;
  svg_rect(f, ox + 4, oy + 4, L->panel_w - 8, L->panel_h - 8, "none", "#dddddd", 1, NULL);
  svg_text(f, ox + L->panel_w / 2, oy + 24, 14, "middle", "bold", "#222222", "%s", phase_name(r, s->step, name, sizeof name));
  if (s->step < 0)
    svg_text(f, ox + L->panel_w / 2, oy + 40, 11, "middle", "normal", "#555555", "each rank has only its own values");
  else
    svg_text(f, ox + L->panel_w / 2, oy + 40, 11, "middle", "normal", "#555555", "%s",
             rs ? "send a chunk on; the next rank adds its own" : "pass a finished chunk on; the next keeps it");
  for (int p = 0; p < r->n; p++)
    if (s->step >= 0 && s->msgs[p].valid) draw_arrow(f, L, r, &s->msgs[p], ox, oy, rs);
  for (int p = 0; p < r->n; p++) draw_node(f, L, r, s, p, ox, oy);
}

static void draw_legend(FILE* f, const struct ring* r, double x, double y) {
  char colour[16];
  svg_text(f, x, y, 12, "start", "normal", "#222222", "chunk colour = how many ranks' values it sums:");
  x += 300;
  for (int k = 1; k <= r->n; k++) {
    if (r->n > 8 && k > 2 && k < r->n - 1) continue; /* ends of the scale are enough for big rings */
    sum_colour(k, r->n, colour, sizeof colour);
    svg_rect(f, x, y - 11, 14, 14, colour, "#ffffff", 1, NULL);
    svg_text(f, x + 18, y, 11, "start", "normal", "#222222", k == r->n ? "%d (all: final)" : "%d", k);
    x += k == r->n ? 110 : 36;
  }
  svg_rect(f, x + 10, y - 11, 14, 14, "#ffffff", "#d62728", 2.2, NULL);
  svg_text(f, x + 30, y, 11, "start", "normal", "#222222", "just received");
  svg_line(f, x + 130, y - 4, x + 160, y - 4, "#2c5d8f", 2.2, 1, 0);
  svg_text(f, x + 165, y, 11, "start", "normal", "#222222", "reduce-scatter");
  svg_line(f, x + 255, y - 4, x + 285, y - 4, "#c46210", 2.2, 1, 1);
  svg_text(f, x + 290, y, 11, "start", "normal", "#222222", "all-gather");
}

/* The first empty grid slot, if any, explains the picture. */
static void draw_howto(FILE* f, const struct ring* r, double x, double y) {
  static const char* const lines[] = {
      "Each box is a rank; its squares are its",
      "%d chunks. An arrow is one chunk going to",
      "the next rank (c2 = chunk 2): every rank",
      "sends and receives at every step.",
      "Reduce-scatter: the receiver adds its own",
      "values, so a chunk darkens as it gathers",
      "ranks; after N-1 = %d steps rank r owns",
      "chunk r+1, complete (green).",
      "All-gather: complete chunks go round and",
      "are kept; after 2(N-1) = %d steps every",
      "rank has every chunk."};
  const int nlines = (int)(sizeof lines / sizeof lines[0]);
  svg_text(f, x + 16, y + 30, 14, "start", "bold", "#222222", "How to read it");
  for (int i = 0; i < nlines; i++)
    svg_text(f, x + 16, y + 52 + 17 * i, 11.5, "start", "normal", "#333333", lines[i],
             i == 1 ? r->n : i == 6 ? r->n - 1 : 2 * (r->n - 1));
}

static int draw_ring(const struct ring* r, const char* svg_path) {
  const int panels = r->nsteps; /* the start and 2N-2 steps */
  const struct layout L = ring_layout(r->n, panels);
  const double width = L.cols * L.panel_w < 900 ? 900 : L.cols * L.panel_w;
  const double height = L.rows * L.panel_h + 70;
  FILE* f = fopen(svg_path, "w");
  if (!f) {
    fprintf(stderr, "ringo-trace: cannot write %s: %s\n", svg_path, strerror(errno));
    return -1;
  }
  svg_open(f, width, height);
  svg_text(f, 12, 24, 16, "start", "bold", "#222222", "Ring all-reduce of %d ranks, step by step (from src/schedule.c)",
           r->n);
  for (int i = 0; i < panels; i++)
    draw_panel(f, &L, r, &r->snaps[i], (i % L.cols) * L.panel_w, 34 + (i / L.cols) * L.panel_h);
  if (panels % L.cols && L.panel_h >= 250)
    draw_howto(f, r, (panels % L.cols) * L.panel_w, 34 + (panels / L.cols) * L.panel_h);
  draw_legend(f, r, 12, height - 18);
  svg_close(f);
  return fclose(f) == 0 ? 0 : -1;
}

/* ---------------------------------------------------------------- main */

static void usage(FILE* f) {
  fprintf(f,
          "usage: ringo-trace -n N [-c COUNT] [--svg FILE] [--png FILE]\n"
          "       ringo-trace --timeline TRACE.json [--seq A[-B]] [--svg FILE] [--png FILE]\n"
          "  -n, --nranks N      ranks in the ring (2..%d): print every step of the all-reduce\n"
          "  -c, --count C       elements in the vector (a whole number): also print each chunk's elements\n"
          "      --svg FILE      draw it as SVG (one panel per step, or the timeline)\n"
          "      --png FILE      draw it as PNG, keeping the SVG beside it (needs rsvg-convert:\n"
          "                      apt-get install librsvg2-bin)\n"
          "      --zoom Z        PNG scale factor, %g to %g (default 1)\n"
          "  -q, --quiet         draw only, print nothing\n"
          "  -t, --timeline F    read a RINGO_TRACE file (RINGO_TRACE=F any-ringo-program) and draw it:\n"
          "                      one track per rank, one box per step and slice\n"
          "      --seq A[-B]     only collectives A..B of each communicator (default: all)\n"
          "  -h, --help          this text\n",
          MAX_N, MIN_ZOOM, MAX_ZOOM);
}

/* The SVG to write: --svg, or the PNG's name with .svg. */
static void svg_name(const char* svg, const char* png, char* buf, size_t cap) {
  if (svg) {
    snprintf(buf, cap, "%s", svg);
    return;
  }
  const char* dot = strrchr(png, '.');
  const int stem = dot && strcmp(dot, ".png") == 0 ? (int)(dot - png) : (int)strlen(png);
  snprintf(buf, cap, "%.*s.svg", stem, png);
}

static int ring_main(int n, size_t count, const char* svg, const char* png, double zoom, int quiet) {
  static struct ring r;
  ring_init(&r, n, count);
  r.snaps = calloc((size_t)r.nsteps, sizeof *r.snaps);
  if (!r.snaps || !ring_run(&r)) return 1;
  if (!quiet) {
    print_intro(&r);
    print_schedule(&r);
    printf("\nstart:\n");
    print_holdings(&r, &r.snaps[0]);
  }
  int ok = 1;
  for (int i = 1; i < r.nsteps; i++) {
    if (!quiet) print_step(&r, &r.snaps[i]);
    if (r.snaps[i].step == n - 2 && !quiet) ok &= print_ownership(&r, &r.snaps[i], 0);
  }
  if (!quiet) {
    ok &= print_ownership(&r, &r.snaps[r.nsteps - 1], 1);
    print_totals(&r);
  }
  if (ok && (svg || png)) {
    char path[1024];
    svg_name(svg, png, path, sizeof path);
    if (draw_ring(&r, path) != 0 || (png && svg_to_png(path, png, zoom) != 0)) ok = 0;
    else if (!quiet) printf("\ndrew %s%s%s\n", path, png ? " and " : "", png ? png : "");
  }
  free(r.snaps);
  return ok ? 0 : 1;
}

/* A flag's value refused, with what it takes: the usage code. */
static void bad_arg(const char* flag, const char* given, const char* what, double lo, double hi) {
  fprintf(stderr, "ringo-trace: bad %s '%s': give %s from %.16g to %.16g (try -h)\n", flag, given, what, lo, hi);
  exit(2);
}

/* A whole-number flag in [lo, hi]; anything else ends the program (tool_args.h). */
static double whole_arg(const char* flag, const char* text, double lo, double hi, const char* what) {
  double v = 0;
  if (!tool_parse_number(text, 1, lo, hi, &v)) bad_arg(flag, text, what, lo, hi);
  return v;
}

/* --seq A or A-B: collectives A..B, whole numbers with A <= B; anything else is refused whole. */
static void parse_seq(const char* text, long* lo, long* hi) {
  char first[32];
  const char* dash = strchr(text, '-');
  const size_t len = dash ? (size_t)(dash - text) : strlen(text);
  double a = 0, b = 0;
  int ok = len < sizeof first;
  if (ok) {
    memcpy(first, text, len);
    first[len] = '\0';
  }
  ok = ok && tool_parse_number(first, 1, 0, TOOL_MAX_WHOLE, &a);
  ok = ok && (!dash || tool_parse_number(dash + 1, 1, a, TOOL_MAX_WHOLE, &b));
  if (!ok) bad_arg("--seq", text, "A or A-B (collectives A..B, A <= B), whole numbers", 0, TOOL_MAX_WHOLE);
  *lo = (long)a;
  *hi = dash ? (long)b : *lo;
}

int main(int argc, char** argv) {
  static const struct option longs[] = {
      {"nranks", required_argument, 0, 'n'}, {"count", required_argument, 0, 'c'},
      {"svg", required_argument, 0, 'S'},    {"png", required_argument, 0, 'P'},
      {"zoom", required_argument, 0, 'z'},   {"quiet", no_argument, 0, 'q'},
      {"timeline", required_argument, 0, 't'}, {"seq", required_argument, 0, 's'},
      {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
  int n = 0, quiet = 0, opt;
  size_t count = 0;
  long seq_lo = 0, seq_hi = -1;
  double zoom = 1;
  const char *svg = NULL, *png = NULL, *timeline = NULL;
  while ((opt = getopt_long(argc, argv, "n:c:qt:h", longs, NULL)) != -1) {
    switch (opt) {
      case 'n': n = (int)whole_arg("-n", optarg, 2, MAX_N, "the ranks, a whole number"); break;
      case 'c': count = (size_t)whole_arg("-c", optarg, 0, TOOL_MAX_WHOLE, "the elements, a whole number"); break;
      case 'S': svg = optarg; break;
      case 'P': png = optarg; break;
      case 'z':
        if (!tool_parse_number(optarg, 0, MIN_ZOOM, MAX_ZOOM, &zoom))
          bad_arg("--zoom", optarg, "a scale factor", MIN_ZOOM, MAX_ZOOM);
        break;
      case 'q': quiet = 1; break;
      case 't': timeline = optarg; break;
      case 's': parse_seq(optarg, &seq_lo, &seq_hi); break;
      case 'h': usage(stdout); return 0;
      default: usage(stderr); return 2;
    }
  }
  if (!timeline && (n < 2 || n > MAX_N)) {
    fprintf(stderr, "ringo-trace: give -n N with 2 <= N <= %d, or --timeline FILE\n", MAX_N);
    return 2;
  }
  if (optind < argc || (timeline && n != 0)) {
    usage(stderr);
    return 2;
  }
  if (timeline) return timeline_main(timeline, seq_lo, seq_hi, svg, png, zoom, quiet);
  return ring_main(n, count, svg, png, zoom, quiet);
}
