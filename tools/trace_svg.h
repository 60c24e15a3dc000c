/* trace_svg.h — the little SVG writer ringo-trace draws with (plain text, no dependency) and the PNG step,
 * which runs rsvg-convert (Debian: librsvg2-bin) when it is installed. Header-only, C11 + POSIX.
 * Used by bench/ringo-trace.c and bench/trace_timeline.h; run: ringo-trace -n 4 --png ring.png. */
#ifndef RINGO_TRACE_SVG_H_
#define RINGO_TRACE_SVG_H_

#include <errno.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

extern char** environ;

#define SVG_FONT "DejaVu Sans, Helvetica, Arial, sans-serif"

static void svg_open(FILE* f, double w, double h) {
  fprintf(f,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
          "font-family=\"%s\">\n"
          "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n",
          w, h, w, h, SVG_FONT, w, h);
  /* One arrowhead per colour in use: markers take their colour from their own fill. */
  fprintf(f, "<defs>\n");
  static const char* const colours[] = {"#2c5d8f", "#c46210", "#888888"};
  for (int i = 0; i < 3; i++)
    fprintf(f,
            "<marker id=\"head%d\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" "
            "orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"%s\"/></marker>\n",
            i, colours[i]);
  fprintf(f, "</defs>\n");
}

static void svg_close(FILE* f) { fprintf(f, "</svg>\n"); }

/* Text with the XML specials escaped, so file names and sums are safe to print. */
static void svg_escaped(FILE* f, const char* s) {
  for (; *s; s++) {
    switch (*s) {
      case '<': fputs("&lt;", f); break;
      case '>': fputs("&gt;", f); break;
      case '&': fputs("&amp;", f); break;
      case '"': fputs("&quot;", f); break;
      default: fputc(*s, f);
    }
  }
}

/* anchor: "start", "middle" or "end"; weight: "normal" or "bold". */
static void svg_text(FILE* f, double x, double y, double size, const char* anchor, const char* weight,
                     const char* fill, const char* fmt, ...) __attribute__((format(printf, 8, 9)));
static void svg_text(FILE* f, double x, double y, double size, const char* anchor, const char* weight,
                     const char* fill, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.1f\" text-anchor=\"%s\" font-weight=\"%s\" fill=\"%s\">",
          x, y, size, anchor, weight, fill);
  svg_escaped(f, buf);
  fprintf(f, "</text>\n");
}

/* A rectangle with a hover title (shown by browsers and SVG viewers), the title may be NULL. */
static void svg_rect(FILE* f, double x, double y, double w, double h, const char* fill, const char* stroke,
                     double stroke_w, const char* title) {
  fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" rx=\"2\" fill=\"%s\" stroke=\"%s\" "
             "stroke-width=\"%.1f\">", x, y, w, h, fill, stroke, stroke_w);
  if (title) {
    fputs("<title>", f);
    svg_escaped(f, title);
    fputs("</title>", f);
  }
  fputs("</rect>\n", f);
}

/* head: -1 for none, else the index of the arrowhead colour defined in svg_open. */
static void svg_line(FILE* f, double x1, double y1, double x2, double y2, const char* stroke, double width,
                     double opacity, int head) {
  fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" stroke-width=\"%.2f\" "
             "stroke-opacity=\"%.2f\"", x1, y1, x2, y2, stroke, width, opacity);
  if (head >= 0) fprintf(f, " marker-end=\"url(#head%d)\"", head);
  fputs("/>\n", f);
}

/* Runs rsvg-convert on svg_path; 0 on success. Without it, says how to get it (the SVG stays). */
static int svg_to_png(const char* svg_path, const char* png_path, double zoom) {
  char zoom_s[32];
  snprintf(zoom_s, sizeof zoom_s, "%g", zoom);
  char* const argv[] = {"rsvg-convert", "-b", "white", "-z", zoom_s, "-o", (char*)png_path, (char*)svg_path, NULL};
  pid_t pid;
  int status = 0;
  const int err = posix_spawnp(&pid, "rsvg-convert", NULL, NULL, argv, environ);
  if (err == 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  if (err == ENOENT || (err == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 127))
    fprintf(stderr, "ringo-trace: --png needs rsvg-convert, which is not installed.\n"
                    "  Debian/Ubuntu: sudo apt-get install librsvg2-bin   (then run this again)\n"
                    "  The drawing is in %s: any browser shows it.\n", svg_path);
  else
    fprintf(stderr, "ringo-trace: rsvg-convert failed making %s from %s\n", png_path, svg_path);
  return -1;
}

#endif /* RINGO_TRACE_SVG_H_ */
