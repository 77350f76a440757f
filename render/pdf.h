// pdf.h: the report's PDF, written with libharu: a title page, a contents page, headings
// with bookmarks, wrapped paragraphs, "not run" notices, figures with numbered captions,
// tables that break across pages with their header repeated, running headers and page
// numbers. Text is UTF-8 in embedded DejaVu fonts, so ×, ≈, μ, → and ≤ print (and extract:
// each font carries a valid ToUnicode CMap). Content
// flows top to bottom on A4 pages; the contents, page numbers and running headers are
// added at pdf_save, when the page count is known, and the file is written atomically.
//
//   Pdf *pdf = pdf_open(&err);
//   pdf_title_page(pdf, "Lab report", "xeon-2c", &meta_table);
//   pdf_heading(pdf, 1, "1", "KV cache", 0);
//   pdf_paragraph(pdf, "The cache makes decode 23.4× faster.", 0);
//   int slot = pdf_figure_slot(pdf, 470, 260, "Figure 1", "Decode latency.");
//   pdf_fill_figure(pdf, slot, rgb, 1306, 722, &err);
//   if (pdf_save(pdf, "out/x/report.pdf", &err)) ...
//   pdf_close(pdf);
#pragma once

#include "common.h"

typedef struct Pdf Pdf;

typedef enum { ALIGN_LEFT, ALIGN_RIGHT } Align;

typedef struct {
    int n_cols, n_rows;
    char **headers; // (n_cols)
    char **cells;   // (n_rows, n_cols); may hold line breaks
    Align *align;   // (n_cols)
} PdfTable;

// Start a document; fails when the DejaVu fonts are not installed (fonts-dejavu-core).
Pdf *pdf_open(Error *err);
void pdf_close(Pdf *pdf);

// Document metadata (title, subject and keywords in the PDF's info dictionary).
void pdf_set_info(Pdf *pdf, const char *title, const char *subject);
// The first page: title, subtitle, and a key / value table (the machine, from meta.csv).
void pdf_title_page(Pdf *pdf, const char *title, const char *subtitle, const PdfTable *facts, const char *footnote);
// A numbered heading with its bookmark. Level 1 starts a new page unless `flow` is set (a
// section that holds only a "not run" notice follows on the same page).
void pdf_heading(Pdf *pdf, int level, const char *number, const char *title, int flow);
void pdf_paragraph(Pdf *pdf, const char *text, int bullet);
// A boxed notice, "Not run: <text>".
void pdf_notice(Pdf *pdf, const char *label, const char *text);
// Room for a figure shown at w_pt × h_pt (smaller if the page needs it), with "label: caption"
// below it. The image comes later, from pdf_fill_figure with the returned slot, so that
// figures can be drawn in parallel while the text flows on.
int pdf_figure_slot(Pdf *pdf, double w_pt, double h_pt, const char *label, const char *caption);
// Place a w_px × h_px RGB image (packed rows) in its slot.
int pdf_fill_figure(Pdf *pdf, int slot, const unsigned char *rgb, int w_px, int h_px, Error *err);
// A table with "label: caption" above it (label may be NULL for none). Words stay whole: a
// wide table gets smaller type (8.5 pt down to 7.5), then long words may break after - _ /
// (down to 6.5 pt). Returns 1 when even that is too wide and words had to be cut, else 0.
int pdf_table(Pdf *pdf, const PdfTable *t, const char *label, const char *caption);
void pdf_page_break(Pdf *pdf);
// The width of the text column, in points.
double pdf_text_width(void);
// Add contents, page numbers and running headers, and write the file atomically.
int pdf_save(Pdf *pdf, const char *path, Error *err);
