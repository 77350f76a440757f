// pdf.c: the report's PDF, with libharu (see pdf.h). Tested through tests/test_render_report.c.
// libharu's own text boxes (HPDF_Page_TextRect) clip and misplace text, so text is wrapped
// here: words are measured with the font's metrics and placed line by line.
#include "pdf.h"

#include <hpdf.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FONT_DIR "/usr/share/fonts/truetype/dejavu/"
#define PAGE_W 595.276 // A4
#define PAGE_H 841.89
#define MARGIN_X 62.0
#define MARGIN_TOP 66.0
#define MARGIN_BOTTOM 58.0
#define BODY_W (PAGE_W - 2 * MARGIN_X)
#define BODY_SIZE 10.0
#define BODY_LEAD 14.0
#define CAPTION_SIZE 9.0
#define CAPTION_LEAD 12.0
#define TABLE_SIZE 8.5        // a table's type size when it fits the page
#define TABLE_LEAD 11.0       // its line spacing, scaled with a smaller size
#define TABLE_SIZE_WHOLE 7.5  // smallest size before long words may break after - _ /
#define TABLE_SIZE_MIN 6.5    // smallest size at all; below it words are cut
#define CELL_PAD 4.0

typedef struct { // a heading not drawn yet (number NULL when there is none)
    int level;
    char *number, *title;
    int flow; // level 1: stay on the current page
} PendingHeading;

typedef struct { // where a figure's image goes
    int page;
    double x, y, w, h; // bottom left corner and size
} Slot;

typedef struct {
    int level;
    char *number, *title;
    int page; // index into pages
    double y; // top of the heading
} Heading;

struct Pdf {
    HPDF_Doc doc;
    HPDF_Font regular, bold;
    HPDF_Page *pages;
    int n_pages;
    HPDF_Page page; // the page being filled
    double y;       // top of the free space on it
    int at_top;     // nothing drawn on the page yet
    Heading *headings;
    int n_headings;
    HPDF_Outline section_outline; // parent of subsection bookmarks
    PendingHeading pending;
    Slot *slots;
    int n_slots;
    char *title;
    HPDF_STATUS error;
    HPDF_STATUS error_detail;
};

static char *dup_str(const char *s) {
    char *d = mallocCheck(strlen(s) + 1);
    strcpy(d, s);
    return d;
}

static void on_hpdf_error(HPDF_STATUS error, HPDF_STATUS detail, void *user) {
    Pdf *pdf = user;
    if (!pdf->error) pdf->error = error, pdf->error_detail = detail;
}

// --- pages --------------------------------------------------------------------------------

static void new_page(Pdf *pdf) {
    pdf->page = HPDF_AddPage(pdf->doc);
    HPDF_Page_SetSize(pdf->page, HPDF_PAGE_SIZE_A4, HPDF_PAGE_PORTRAIT);
    pdf->pages = reallocCheck(pdf->pages, (size_t)(pdf->n_pages + 1) * sizeof *pdf->pages);
    pdf->pages[pdf->n_pages++] = pdf->page;
    pdf->y = PAGE_H - MARGIN_TOP;
    pdf->at_top = 1;
}

// Start a new page unless `height` points still fit on this one (or it is empty).
static void ensure_space(Pdf *pdf, double height) {
    if (!pdf->page || (!pdf->at_top && pdf->y - height < MARGIN_BOTTOM)) new_page(pdf);
}

static void advance(Pdf *pdf, double height) {
    pdf->y -= height;
    pdf->at_top = 0;
}

static void fill_grey(HPDF_Page page, double g) { HPDF_Page_SetRGBFill(page, (HPDF_REAL)g, (HPDF_REAL)g, (HPDF_REAL)g); }

// --- words and lines ------------------------------------------------------------------------

typedef struct {
    const char *s;
    int len;
    HPDF_Font font;
    double width;
    int newline; // a line break comes before this word
} Word;

typedef struct {
    Word *w;
    int n, cap;
    double size; // one font size for all words
} Words;

typedef struct {
    int start, end; // words [start, end)
    double width;
} Line;

static double measure(HPDF_Font font, const char *s, int len, double size) {
    if (len == 0) return 0;
    HPDF_TextWidth tw = HPDF_Font_TextWidth(font, (const HPDF_BYTE *)s, (HPDF_UINT)len);
    return tw.width * size / 1000.0;
}

static void push_word(Words *ws, const char *s, int len, HPDF_Font font, int newline) {
    if (ws->n == ws->cap) {
        ws->cap = ws->cap ? 2 * ws->cap : 64;
        ws->w = reallocCheck(ws->w, (size_t)ws->cap * sizeof *ws->w);
    }
    ws->w[ws->n++] = (Word){s, len, font, measure(font, s, len, ws->size), newline};
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

// The length of the unit after a number ("KiB" in "144 KiB"): a word of at most 5 bytes
// without digits after one space, or 0. A number (a word that starts with a digit, or a
// sign or point and a digit, and ends with one: not "p50") and its unit stay on one line.
static int unit_after(const char *s, int len) {
    int number = len > 0 && (is_digit(s[0]) || (len > 1 && strchr("+-.", s[0]) && is_digit(s[1])));
    if (!number || !is_digit(s[len - 1]) || s[len] != ' ') return 0;
    const char *u = s + len + 1;
    int n = (int)strcspn(u, " \t\r\n");
    if (n == 0 || n > 5 || strncmp(u, "±", 2) == 0) return 0; // a spread is no unit
    for (int i = 0; i < n; i++)
        if (is_digit(u[i])) return 0;
    return n;
}

// The length of the word at s: up to the next space or line break, a number with its unit,
// and a spread with its sign ("± 31" of "48.5 ± 31": a line may break before the ±, not after).
static int word_length(const char *s) {
    int len = (int)strcspn(s, " \t\r\n"), unit = unit_after(s, len);
    if (len == 2 && strncmp(s, "±", 2) == 0 && s[2] == ' ') return 3 + (int)strcspn(s + 3, " \t\r\n");
    return unit ? len + 1 + unit : len;
}

// Split text at spaces (and line breaks, which force a new line) into words in `font`; a
// number keeps its unit.
static void add_words(Words *ws, const char *text, HPDF_Font font) {
    int newline = 0;
    for (const char *s = text; *s;) {
        if (*s == ' ' || *s == '\t' || *s == '\r') {
            s++;
            continue;
        }
        if (*s == '\n') {
            newline = 1;
            s++;
            continue;
        }
        int len = word_length(s);
        push_word(ws, s, len, font, newline);
        newline = 0;
        s += len;
    }
}

static int is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

// 1 when a word too long for its line may break between s[i - 1] and s[i]: after the '_'
// or '/' of an identifier or a path, or after a hyphen between letters ("intel-xeon",
// never "1e-05" or "-3").
static int soft_break(const char *s, int len, int i) {
    if (i < 2 || i >= len || !is_alnum(s[i - 2]) || !is_alnum(s[i])) return 0;
    char c = s[i - 1];
    return c == '_' || c == '/' || (c == '-' && !is_digit(s[i]) && !is_digit(s[i - 2]));
}

// Length of the prefix of w to put on a line of `width`: the longest that ends at a soft
// break and fits, else the longest UTF-8 prefix that fits (at least one character).
static int fitting_prefix(const Word *w, double size, double width) {
    int best = 0, best_soft = 0;
    for (int i = 1; i <= w->len; i++) {
        if (i < w->len && ((unsigned char)w->s[i] & 0xC0) == 0x80) continue; // inside a character
        if (best > 0 && measure(w->font, w->s, i, size) > width) break;
        best = i;
        if (soft_break(w->s, w->len, i)) best_soft = i;
    }
    return best_soft ? best_soft : best;
}

// Greedy wrapping into lines of at most `width`; words longer than a line break at a soft
// break where they can, else are cut.
static Line *wrap(Words *ws, double width, int *n_lines) {
    int cap = 8, n = 0;
    Line *lines = mallocCheck((size_t)cap * sizeof *lines);
    *n_lines = 0;
    if (ws->n == 0) return lines;
    double space = measure(ws->w[0].font, " ", 1, ws->size);
    Line cur = {0, 0, 0};
    for (int i = 0; i < ws->n; i++) {
        Word *w = &ws->w[i];
        if (w->width > width + 1e-3) { // cut the word: the rest becomes the next word
            int keep = fitting_prefix(w, ws->size, width);
            if (keep < w->len) {
                push_word(ws, "", 0, w->font, 0); // make room, then shift
                w = &ws->w[i];
                memmove(&ws->w[i + 2], &ws->w[i + 1], (size_t)(ws->n - i - 2) * sizeof *ws->w);
                ws->w[i + 1] = (Word){w->s + keep, w->len - keep, w->font, measure(w->font, w->s + keep, w->len - keep, ws->size), 0};
                w->len = keep;
                w->width = measure(w->font, w->s, keep, ws->size);
            }
        }
        double add = (cur.end > cur.start ? space : 0) + w->width;
        if (cur.end > cur.start && (w->newline || cur.width + add > width + 1e-3)) { // 1e-3: rounding
            if (n == cap) lines = reallocCheck(lines, (size_t)(cap *= 2) * sizeof *lines);
            lines[n++] = cur;
            cur = (Line){i, i, 0};
            add = w->width;
        }
        cur.end = i + 1;
        cur.width += add;
    }
    if (cur.end > cur.start) {
        if (n == cap) lines = reallocCheck(lines, (size_t)(cap + 1) * sizeof *lines);
        lines[n++] = cur;
    }
    *n_lines = n;
    return lines;
}

// Draw one line with its left end at x and baseline at y, one text run per font.
static void draw_line(HPDF_Page page, const Words *ws, Line line, double x, double y) {
    char *buf = mallocCheck(4096);
    size_t cap = 4096;
    double space = measure(ws->w[line.start].font, " ", 1, ws->size);
    for (int i = line.start; i < line.end;) {
        HPDF_Font font = ws->w[i].font;
        size_t used = 0;
        double run_w = 0;
        int j = i;
        for (; j < line.end && ws->w[j].font == font; j++) {
            size_t need = used + (size_t)ws->w[j].len + 2;
            if (need > cap) buf = reallocCheck(buf, cap = 2 * need);
            if (j > i) buf[used++] = ' ', run_w += space;
            memcpy(buf + used, ws->w[j].s, (size_t)ws->w[j].len);
            used += (size_t)ws->w[j].len;
            run_w += ws->w[j].width;
        }
        buf[used] = '\0';
        HPDF_Page_BeginText(page);
        HPDF_Page_SetFontAndSize(page, font, (HPDF_REAL)ws->size);
        HPDF_Page_TextOut(page, (HPDF_REAL)x, (HPDF_REAL)y, buf);
        HPDF_Page_EndText(page);
        x += run_w + space;
        i = j;
    }
    free(buf);
}

// A wrapped block of text: words, their lines, and the height they need.
typedef struct {
    Words words;
    Line *lines;
    int n_lines;
    double lead;
} TextBlock;

static TextBlock text_block(double size, double lead) {
    TextBlock tb = {0};
    tb.words.size = size;
    tb.lead = lead;
    return tb;
}

static void text_layout(TextBlock *tb, double width) {
    free(tb->lines);
    tb->lines = wrap(&tb->words, width, &tb->n_lines);
}

static double text_height(const TextBlock *tb) { return tb->n_lines * tb->lead; }

// Draw the lines with the first line's top at y; align: 0 left, 1 right, 0.5 centred in width.
static void text_draw(HPDF_Page page, const TextBlock *tb, double x, double y, double width, double align) {
    for (int i = 0; i < tb->n_lines; i++) {
        double lx = x + align * (width - tb->lines[i].width);
        draw_line(page, &tb->words, tb->lines[i], lx, y - i * tb->lead - 0.78 * tb->lead);
    }
}

static void text_free(TextBlock *tb) {
    free(tb->words.w);
    free(tb->lines);
}

// --- document -----------------------------------------------------------------------------

// libharu (2.3; 2.4.6 still) gives a TrueType font in its UTF-8 encoding a copy of the
// encoding's code-to-CID CMap as /ToUnicode: "1 begincidrange <0000> <FFFF> 0". A ToUnicode
// CMap maps codes to Unicode with bfchar / bfrange only (PDF 1.7 §9.10.3, Adobe technote
// 5411), so poppler warns "Invalid 'begincidrange' operator" on every page and extraction
// has to guess. That encoding writes each character as its UTF-16 code unit (characters
// beyond the BMP become spaces), so the true map is the identity on the BMP. We rewrite the
// stream libharu made, in place, through its object API (hpdf_objects.h): one bfrange per
// 256 codes (a range may not carry out of its last byte), at most 100 ranges per block
// (technote 5411), the surrogate codes D800–DFFF left out since they name no character.
#define UNICODE_RANGES_PER_BLOCK 100
#define SURROGATE_BLOCKS(hi) ((hi) >= 0xD8 && (hi) <= 0xDF)

static int write_unicode_map(HPDF_Font font) {
    HPDF_Dict cmap = HPDF_Dict_GetItem(font, "ToUnicode", HPDF_OCLASS_DICT);
    if (!cmap || !cmap->stream) return -1;
    HPDF_Dict info = HPDF_Dict_New(cmap->mmgr);
    if (!info) return -1;
    HPDF_STATUS st = HPDF_Dict_Add(cmap, "CIDSystemInfo", info); // replaces libharu's (Adobe, Identity-H)
    st |= HPDF_Dict_Add(info, "Registry", HPDF_String_New(cmap->mmgr, "Adobe", NULL));
    st |= HPDF_Dict_Add(info, "Ordering", HPDF_String_New(cmap->mmgr, "UCS", NULL));
    st |= HPDF_Dict_AddNumber(info, "Supplement", 0);
    st |= HPDF_Dict_AddName(cmap, "CMapName", "Adobe-Identity-UCS");
    HPDF_Stream out = cmap->stream;
    HPDF_MemStream_FreeData(out);
    st |= HPDF_Stream_WriteStr(out, "/CIDInit /ProcSet findresource begin\n12 dict begin\nbegincmap\n"
                                    "/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def\n"
                                    "/CMapName /Adobe-Identity-UCS def\n/CMapType 2 def\n"
                                    "1 begincodespacerange\n<0000> <FFFF>\nendcodespacerange\n");
    int n_ranges = 0;
    for (int hi = 0; hi < 256; hi++) n_ranges += !SURROGATE_BLOCKS(hi);
    for (int hi = 0, written = 0; hi < 256; hi++) {
        if (SURROGATE_BLOCKS(hi)) continue;
        char line[64];
        if (written % UNICODE_RANGES_PER_BLOCK == 0) {
            int left = n_ranges - written;
            snprintf(line, sizeof line, "%d beginbfrange\n", left < UNICODE_RANGES_PER_BLOCK ? left : UNICODE_RANGES_PER_BLOCK);
            st |= HPDF_Stream_WriteStr(out, line);
        }
        snprintf(line, sizeof line, "<%02X00> <%02XFF> <%02X00>\n", hi, hi, hi);
        st |= HPDF_Stream_WriteStr(out, line);
        if (++written % UNICODE_RANGES_PER_BLOCK == 0 || written == n_ranges) st |= HPDF_Stream_WriteStr(out, "endbfrange\n");
    }
    st |= HPDF_Stream_WriteStr(out, "endcmap\nCMapName currentdict /CMap defineresource pop\nend\nend\n");
    return st == HPDF_OK ? 0 : -1;
}

static HPDF_Font load_font(Pdf *pdf, const char *file, Error *err) {
    char path[256];
    snprintf(path, sizeof path, FONT_DIR "%s", file);
    if (access(path, R_OK) != 0) {
        error_set(err, "font %s not found: install fonts-dejavu-core (make deps)", path);
        return NULL;
    }
    const char *name = HPDF_LoadTTFontFromFile(pdf->doc, path, HPDF_TRUE);
    HPDF_Font font = name ? HPDF_GetFont(pdf->doc, name, "UTF-8") : NULL;
    if (!font || pdf->error) {
        error_set(err, "%s: libharu cannot load this font (error 0x%04X)", path, (unsigned)pdf->error);
        return NULL;
    }
    if (write_unicode_map(font)) {
        error_set(err, "%s: cannot replace libharu's ToUnicode CMap of this font (error 0x%04X)", path, (unsigned)pdf->error);
        return NULL;
    }
    return font;
}

Pdf *pdf_open(Error *err) {
    Pdf *pdf = callocCheck(1, sizeof *pdf);
    pdf->doc = HPDF_New(on_hpdf_error, pdf);
    if (!pdf->doc) {
        free(pdf);
        error_set(err, "libharu: cannot create a document");
        return NULL;
    }
    HPDF_SetCompressionMode(pdf->doc, HPDF_COMP_ALL);
    HPDF_UseUTFEncodings(pdf->doc);
    HPDF_SetCurrentEncoder(pdf->doc, "UTF-8");
    HPDF_SetPageMode(pdf->doc, HPDF_PAGE_MODE_USE_OUTLINE);
    if (!(pdf->regular = load_font(pdf, "DejaVuSans.ttf", err)) || !(pdf->bold = load_font(pdf, "DejaVuSans-Bold.ttf", err))) {
        pdf_close(pdf);
        return NULL;
    }
    pdf->title = dup_str("");
    return pdf;
}

void pdf_close(Pdf *pdf) {
    if (!pdf) return;
    HPDF_Free(pdf->doc);
    for (int i = 0; i < pdf->n_headings; i++) free(pdf->headings[i].number), free(pdf->headings[i].title);
    free(pdf->headings);
    free(pdf->pending.number);
    free(pdf->pending.title);
    free(pdf->pages);
    free(pdf->slots);
    free(pdf->title);
    free(pdf);
}

void pdf_set_info(Pdf *pdf, const char *title, const char *subject) {
    free(pdf->title);
    pdf->title = dup_str(title);
    HPDF_SetInfoAttr(pdf->doc, HPDF_INFO_TITLE, title);
    HPDF_SetInfoAttr(pdf->doc, HPDF_INFO_SUBJECT, subject);
    HPDF_SetInfoAttr(pdf->doc, HPDF_INFO_AUTHOR, "inferlab");
    HPDF_SetInfoAttr(pdf->doc, HPDF_INFO_CREATOR, "inferlab bin/render (cairo, libharu)");
    HPDF_SetInfoAttr(pdf->doc, HPDF_INFO_KEYWORDS, "LLM inference, KV cache, attention, roofline");
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    HPDF_Date date = {tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, 'Z', 0, 0};
    HPDF_SetInfoDateAttr(pdf->doc, HPDF_INFO_CREATION_DATE, date);
}

double pdf_text_width(void) { return BODY_W; }

// --- blocks ---------------------------------------------------------------------------------

// Draw a heading (level 1 on a new page unless it flows) with `need` points of room below it
// for what follows.
static void draw_heading(Pdf *pdf, const PendingHeading *h, double need) {
    int level = h->level;
    const char *number = h->number, *title = h->title;
    double size = level == 1 ? 16 : 12.5, lead = size * 1.3;
    if (level == 1 && !h->flow) {
        if (!pdf->page || !pdf->at_top) new_page(pdf);
    } else {
        double gap = level == 1 ? 18 : 8;
        ensure_space(pdf, (pdf->at_top ? 0 : gap) + lead + 4 + need);
        if (!pdf->at_top) advance(pdf, gap);
    }
    TextBlock tb = text_block(size, lead);
    add_words(&tb.words, number, pdf->bold);
    add_words(&tb.words, title, pdf->bold);
    text_layout(&tb, BODY_W);
    fill_grey(pdf->page, 0.05);
    text_draw(pdf->page, &tb, MARGIN_X, pdf->y, BODY_W, 0);

    char *outline_title = mallocCheck(strlen(number) + strlen(title) + 2);
    sprintf(outline_title, "%s %s", number, title);
    HPDF_Outline parent = level == 1 ? NULL : pdf->section_outline;
    HPDF_Outline o = HPDF_CreateOutline(pdf->doc, parent, outline_title, HPDF_GetEncoder(pdf->doc, "UTF-8"));
    free(outline_title);
    HPDF_Destination dst = HPDF_Page_CreateDestination(pdf->page);
    HPDF_Destination_SetFitH(dst, (HPDF_REAL)(pdf->y + 12));
    HPDF_Outline_SetDestination(o, dst);
    if (level == 1) {
        HPDF_Outline_SetOpened(o, HPDF_TRUE);
        pdf->section_outline = o;
    }
    pdf->headings = reallocCheck(pdf->headings, (size_t)(pdf->n_headings + 1) * sizeof *pdf->headings);
    pdf->headings[pdf->n_headings++] = (Heading){level, dup_str(number), dup_str(title), pdf->n_pages - 1, pdf->y};
    advance(pdf, text_height(&tb) + (level == 1 ? 8 : 4));
    text_free(&tb);
}

// A heading waits until the block after it says how much room it needs, so that the two
// start on the same page.
static void flush_heading(Pdf *pdf, double need) {
    if (!pdf->pending.number) return;
    draw_heading(pdf, &pdf->pending, need);
    free(pdf->pending.number);
    free(pdf->pending.title);
    pdf->pending.number = pdf->pending.title = NULL;
}

// Start a block whose first part needs `need` points, with any waiting heading above it.
static void begin_block(Pdf *pdf, double need) {
    flush_heading(pdf, need);
    ensure_space(pdf, need);
}

void pdf_heading(Pdf *pdf, int level, const char *number, const char *title, int flow) {
    flush_heading(pdf, 60); // two headings in a row: keep the first with the second
    pdf->pending = (PendingHeading){level, dup_str(number), dup_str(title), flow};
}

void pdf_page_break(Pdf *pdf) {
    flush_heading(pdf, 0);
    if (!pdf->page || !pdf->at_top) new_page(pdf);
}

void pdf_paragraph(Pdf *pdf, const char *text, int bullet) {
    double indent = bullet ? 14 : 0;
    TextBlock tb = text_block(BODY_SIZE, BODY_LEAD);
    add_words(&tb.words, text, pdf->regular);
    text_layout(&tb, BODY_W - indent);
    begin_block(pdf, (tb.n_lines < 2 ? tb.n_lines : 2) * BODY_LEAD); // no single line left behind
    for (int i = 0; i < tb.n_lines; i++) { // line by line, so that long paragraphs break across pages
        ensure_space(pdf, BODY_LEAD);
        fill_grey(pdf->page, 0.1);
        if (bullet && i == 0) {
            TextBlock dot = text_block(BODY_SIZE, BODY_LEAD);
            add_words(&dot.words, "•", pdf->regular);
            text_layout(&dot, BODY_W);
            text_draw(pdf->page, &dot, MARGIN_X + 3, pdf->y, BODY_W, 0);
            text_free(&dot);
        }
        draw_line(pdf->page, &tb.words, tb.lines[i], MARGIN_X + indent, pdf->y - 0.78 * BODY_LEAD);
        advance(pdf, BODY_LEAD);
    }
    advance(pdf, bullet ? 2 : 6);
    text_free(&tb);
}

void pdf_notice(Pdf *pdf, const char *label, const char *text) {
    double pad = 7, bar = 3;
    TextBlock tb = text_block(BODY_SIZE, BODY_LEAD);
    add_words(&tb.words, label, pdf->bold);
    add_words(&tb.words, text, pdf->regular);
    text_layout(&tb, BODY_W - 2 * pad - bar);
    double h = text_height(&tb) + 2 * pad;
    begin_block(pdf, h + 8);
    HPDF_Page page = pdf->page;
    HPDF_Page_SetRGBFill(page, 1.0f, 0.957f, 0.898f);
    HPDF_Page_Rectangle(page, (HPDF_REAL)MARGIN_X, (HPDF_REAL)(pdf->y - h), (HPDF_REAL)BODY_W, (HPDF_REAL)h);
    HPDF_Page_Fill(page);
    HPDF_Page_SetRGBFill(page, 0.902f, 0.624f, 0.0f);
    HPDF_Page_Rectangle(page, (HPDF_REAL)MARGIN_X, (HPDF_REAL)(pdf->y - h), (HPDF_REAL)bar, (HPDF_REAL)h);
    HPDF_Page_Fill(page);
    fill_grey(page, 0.1);
    text_draw(page, &tb, MARGIN_X + bar + pad, pdf->y - pad, BODY_W, 0);
    advance(pdf, h + 8);
    text_free(&tb);
}

// Caption text: bold "label:" then the caption, wrapped to `width`; centred when it is one line.
static void draw_caption(Pdf *pdf, const char *label, const char *caption, double width, double x, double y, double *height) {
    TextBlock tb = text_block(CAPTION_SIZE, CAPTION_LEAD);
    char prefix[64] = "";
    if (label) snprintf(prefix, sizeof prefix, "%s%s", label, caption && *caption ? ":" : "");
    if (label) add_words(&tb.words, prefix, pdf->bold);
    add_words(&tb.words, caption ? caption : "", pdf->regular);
    text_layout(&tb, width);
    if (pdf->page) {
        fill_grey(pdf->page, 0.15);
        text_draw(pdf->page, &tb, x, y, width, tb.n_lines == 1 ? 0.5 : 0);
    }
    *height = text_height(&tb);
    text_free(&tb);
}

// Height of a caption without drawing it.
static double caption_height(Pdf *pdf, const char *label, const char *caption, double width) {
    HPDF_Page page = pdf->page;
    double h;
    pdf->page = NULL;
    draw_caption(pdf, label, caption, width, 0, 0, &h);
    pdf->page = page;
    return h;
}

int pdf_figure_slot(Pdf *pdf, double w_pt, double h_pt, const char *label, const char *caption) {
    double cap_h = caption_height(pdf, label, caption, BODY_W);
    // at most a page, less the caption and any heading waiting to go above it
    double max_h = PAGE_H - MARGIN_TOP - MARGIN_BOTTOM - cap_h - 16 - (pdf->pending.number ? 40 : 0);
    double scale = fmin(1, fmin(BODY_W / w_pt, max_h / h_pt));
    double w = w_pt * scale, h = h_pt * scale;
    begin_block(pdf, h + 6 + cap_h + 12);
    pdf->slots = reallocCheck(pdf->slots, (size_t)(pdf->n_slots + 1) * sizeof *pdf->slots);
    pdf->slots[pdf->n_slots] = (Slot){pdf->n_pages - 1, MARGIN_X + (BODY_W - w) / 2, pdf->y - h, w, h};
    advance(pdf, h + 6);
    double drawn;
    draw_caption(pdf, label, caption, BODY_W, MARGIN_X, pdf->y, &drawn);
    advance(pdf, drawn + 12);
    return pdf->n_slots++;
}

int pdf_fill_figure(Pdf *pdf, int slot, const unsigned char *rgb, int w_px, int h_px, Error *err) {
    const Slot *s = &pdf->slots[slot];
    HPDF_Image img = HPDF_LoadRawImageFromMem(pdf->doc, rgb, (HPDF_UINT)w_px, (HPDF_UINT)h_px, HPDF_CS_DEVICE_RGB, 8);
    if (!img || pdf->error) return error_set(err, "libharu cannot embed an image (error 0x%04X)", (unsigned)pdf->error);
    HPDF_Page_DrawImage(pdf->pages[s->page], img, (HPDF_REAL)s->x, (HPDF_REAL)s->y, (HPDF_REAL)s->w, (HPDF_REAL)s->h);
    return 0;
}

// --- tables ---------------------------------------------------------------------------------

// Widest line of a cell's text, in points.
static double natural_width(HPDF_Font font, const char *text, double size) {
    double w = 0;
    for (const char *s = text; *s;) {
        int len = (int)strcspn(s, "\n");
        w = fmax(w, measure(font, s, len, size));
        s += len + (s[len] == '\n');
    }
    return w;
}

// Widest piece of a cell's text that must stay on one line, in points: a word, or with
// `soft` a piece of a word between soft breaks.
static double widest_piece(HPDF_Font font, const char *text, double size, int soft) {
    double w = 0;
    for (const char *s = text; *s;) {
        int len = word_length(s), start = 0;
        for (int i = 1; i <= len; i++)
            if (i == len || (soft && soft_break(s, len, i))) {
                w = fmax(w, measure(font, s + start, i - start, size));
                start = i;
            }
        s += len + (s[len] != '\0');
    }
    return w;
}

// A table's type size and column widths.
typedef struct {
    double size, lead;
    double *w;  // (n_cols) column widths in points, padding included
    int cut;    // 1: even at TABLE_SIZE_MIN some words are cut
} TableLayout;

// The largest size, in quarter points from TABLE_SIZE down to `smallest`, at which pieces
// of total width `pieces` (measured at TABLE_SIZE) and `pad` fit `max_total`; 0 when none.
static double fitting_size(double pieces, double pad, double max_total, double smallest) {
    if (pieces + pad <= max_total) return TABLE_SIZE;
    double size = floor(4 * TABLE_SIZE * (max_total - pad) / pieces) / 4;
    return size >= smallest ? size : 0;
}

// Where words must break, the room left still keeps some columns' words whole: those that
// need the least extra width first. pieces[c] grows to whole[c] while the total stays
// within `room`.
static void keep_words_whole(double *pieces, const double *whole, int n, double room, double *total) {
    for (;;) {
        int best = -1;
        for (int c = 0; c < n; c++)
            if (whole[c] > pieces[c] && *total + whole[c] - pieces[c] <= room &&
                (best < 0 || whole[c] - pieces[c] < whole[best] - pieces[best]))
                best = c;
        if (best < 0) return;
        *total += whole[best] - pieces[best];
        pieces[best] = whole[best];
    }
}

// Words are never broken when it can be helped. The table keeps TABLE_SIZE when its widest
// words fit side by side; else it takes smaller type, down to TABLE_SIZE_WHOLE; else long
// words may break after - _ / and the type goes down to TABLE_SIZE_MIN; only beyond that
// are words cut (lay->cut). Then the columns get their natural widths when they fit, else
// each gets its widest piece plus a share of what is left, in proportion to how much wider
// it would like to be.
static TableLayout table_layout(const Pdf *pdf, const PdfTable *t, double max_total) {
    TableLayout lay = {TABLE_SIZE, TABLE_LEAD, mallocCheck((size_t)t->n_cols * sizeof *lay.w), 0};
    double *whole = mallocCheck((size_t)t->n_cols * sizeof *whole), *pieces = mallocCheck((size_t)t->n_cols * sizeof *pieces);
    double natural = 0, sum_whole = 0, sum_pieces = 0, pad = 2 * CELL_PAD * t->n_cols;
    for (int c = 0; c < t->n_cols; c++) { // at TABLE_SIZE; widths scale with the size
        lay.w[c] = natural_width(pdf->bold, t->headers[c], TABLE_SIZE);
        whole[c] = widest_piece(pdf->bold, t->headers[c], TABLE_SIZE, 0);
        pieces[c] = widest_piece(pdf->bold, t->headers[c], TABLE_SIZE, 1);
        for (int r = 0; r < t->n_rows; r++) {
            const char *cell = t->cells[(size_t)r * t->n_cols + c];
            lay.w[c] = fmax(lay.w[c], natural_width(pdf->regular, cell, TABLE_SIZE));
            whole[c] = fmax(whole[c], widest_piece(pdf->regular, cell, TABLE_SIZE, 0));
            pieces[c] = fmax(pieces[c], widest_piece(pdf->regular, cell, TABLE_SIZE, 1));
        }
        natural += lay.w[c], sum_whole += whole[c], sum_pieces += pieces[c];
    }
    double *least = whole, total_least = sum_whole;
    if (!(lay.size = fitting_size(sum_whole, pad, max_total, TABLE_SIZE_WHOLE))) {
        least = pieces, total_least = sum_pieces;
        if (!(lay.size = fitting_size(sum_pieces, pad, max_total, TABLE_SIZE_MIN))) lay.size = TABLE_SIZE_MIN, lay.cut = 1;
        keep_words_whole(pieces, whole, t->n_cols, (max_total - pad) * TABLE_SIZE / lay.size, &total_least);
    }
    double scale = lay.size / TABLE_SIZE;
    lay.lead = TABLE_LEAD * scale;
    natural = natural * scale + pad;
    total_least = total_least * scale + pad;
    for (int c = 0; c < t->n_cols; c++) {
        double w = lay.w[c] * scale + 2 * CELL_PAD, l = least[c] * scale + 2 * CELL_PAD;
        if (natural <= max_total) lay.w[c] = w;
        else if (!lay.cut) lay.w[c] = l + (w - l) * (max_total - total_least) / (natural - total_least);
        else lay.w[c] = l * max_total / total_least;
    }
    free(whole);
    free(pieces);
    return lay;
}

typedef struct {
    TextBlock *cells; // (n_cols)
    double height;
} RowLayout;

static RowLayout layout_row(const Pdf *pdf, const PdfTable *t, char **texts, const TableLayout *lay, int header) {
    const double *w = lay->w;
    RowLayout row = {mallocCheck((size_t)t->n_cols * sizeof *row.cells), 0};
    for (int c = 0; c < t->n_cols; c++) {
        row.cells[c] = text_block(lay->size, lay->lead);
        add_words(&row.cells[c].words, texts[c], header ? pdf->bold : pdf->regular);
        text_layout(&row.cells[c], w[c] - 2 * CELL_PAD);
        row.height = fmax(row.height, text_height(&row.cells[c]));
    }
    row.height += 2 * CELL_PAD - 1;
    return row;
}

static void free_row(const PdfTable *t, RowLayout *row) {
    for (int c = 0; c < t->n_cols; c++) text_free(&row->cells[c]);
    free(row->cells);
}

static void rule(HPDF_Page page, double x0, double x1, double y, double width, double grey) {
    HPDF_Page_SetLineWidth(page, (HPDF_REAL)width);
    HPDF_Page_SetRGBStroke(page, (HPDF_REAL)grey, (HPDF_REAL)grey, (HPDF_REAL)grey);
    HPDF_Page_MoveTo(page, (HPDF_REAL)x0, (HPDF_REAL)y);
    HPDF_Page_LineTo(page, (HPDF_REAL)x1, (HPDF_REAL)y);
    HPDF_Page_Stroke(page);
}

static void draw_row(Pdf *pdf, const PdfTable *t, const RowLayout *row, const double *w, double x, double shade) {
    HPDF_Page page = pdf->page;
    double total = 0;
    for (int c = 0; c < t->n_cols; c++) total += w[c];
    if (shade < 1) {
        fill_grey(page, shade);
        HPDF_Page_Rectangle(page, (HPDF_REAL)x, (HPDF_REAL)(pdf->y - row->height), (HPDF_REAL)total, (HPDF_REAL)row->height);
        HPDF_Page_Fill(page);
    }
    fill_grey(page, 0.1);
    for (int c = 0; c < t->n_cols; c++) {
        double align = t->align[c] == ALIGN_RIGHT ? 1 : 0;
        text_draw(page, &row->cells[c], x + CELL_PAD, pdf->y - CELL_PAD + 1, w[c] - 2 * CELL_PAD, align);
        x += w[c];
    }
    advance(pdf, row->height);
}

// The caption (or "label (continued)") and the header row, with `first_row` points of
// room for the row after them.
static void table_top(Pdf *pdf, const PdfTable *t, const RowLayout *header, const double *w, double x, double total,
                      const char *label, const char *caption, int continued, double first_row) {
    char more[96];
    snprintf(more, sizeof more, "%s (continued)", label ? label : "Table");
    const char *lab = continued ? NULL : label, *cap = continued ? more : caption;
    double cap_h = lab || cap ? caption_height(pdf, lab, cap, BODY_W) + 4 : 0;
    begin_block(pdf, cap_h + header->height + first_row + 2);
    if (cap_h > 0) {
        double h;
        draw_caption(pdf, lab, cap, BODY_W, MARGIN_X, pdf->y, &h);
        advance(pdf, h + 4);
    }
    rule(pdf->page, x, x + total, pdf->y, 0.8, 0.2);
    draw_row(pdf, t, header, w, x, 0.92);
    rule(pdf->page, x, x + total, pdf->y, 0.5, 0.35);
}

int pdf_table(Pdf *pdf, const PdfTable *t, const char *label, const char *caption) {
    TableLayout lay = table_layout(pdf, t, BODY_W);
    const double *w = lay.w;
    double total = 0;
    for (int c = 0; c < t->n_cols; c++) total += w[c];
    double x = MARGIN_X + (BODY_W - total) / 2;
    RowLayout header = layout_row(pdf, t, t->headers, &lay, 1);
    double first_rows = 0; // the header should not end a page alone: keep three rows with it
    for (int r = 0; r < t->n_rows && r < 3; r++) {
        RowLayout row = layout_row(pdf, t, &t->cells[(size_t)r * t->n_cols], &lay, 0);
        first_rows += row.height;
        free_row(t, &row);
    }
    for (int r = 0; r < t->n_rows; r++) {
        RowLayout row = layout_row(pdf, t, &t->cells[(size_t)r * t->n_cols], &lay, 0);
        if (r == 0) table_top(pdf, t, &header, w, x, total, label, caption, 0, first_rows);
        else if (pdf->y - row.height < MARGIN_BOTTOM) { // break the table: close it, repeat the header
            rule(pdf->page, x, x + total, pdf->y, 0.8, 0.2);
            new_page(pdf);
            table_top(pdf, t, &header, w, x, total, label, caption, 1, row.height);
        }
        draw_row(pdf, t, &row, w, x, r % 2 ? 0.965 : 1);
        free_row(t, &row);
    }
    if (t->n_rows == 0) table_top(pdf, t, &header, w, x, total, label, caption, 0, 0);
    rule(pdf->page, x, x + total, pdf->y, 0.8, 0.2);
    advance(pdf, 12);
    free_row(t, &header);
    free(lay.w);
    return lay.cut;
}

// --- title page -------------------------------------------------------------------------------

void pdf_title_page(Pdf *pdf, const char *title, const char *subtitle, const PdfTable *facts, const char *footnote) {
    new_page(pdf);
    pdf->y = PAGE_H - 150;
    TextBlock tb = text_block(26, 32);
    add_words(&tb.words, title, pdf->bold);
    text_layout(&tb, BODY_W);
    fill_grey(pdf->page, 0.05);
    text_draw(pdf->page, &tb, MARGIN_X, pdf->y, BODY_W, 0);
    advance(pdf, text_height(&tb) + 8);
    text_free(&tb);
    if (subtitle && *subtitle) {
        tb = text_block(13, 18);
        add_words(&tb.words, subtitle, pdf->regular);
        text_layout(&tb, BODY_W);
        fill_grey(pdf->page, 0.35);
        text_draw(pdf->page, &tb, MARGIN_X, pdf->y, BODY_W, 0);
        advance(pdf, text_height(&tb));
        text_free(&tb);
    }
    rule(pdf->page, MARGIN_X, MARGIN_X + BODY_W, pdf->y - 10, 1.2, 0.2);
    advance(pdf, 40);
    if (facts && facts->n_rows > 0) pdf_table(pdf, facts, NULL, NULL);
    if (footnote) {
        tb = text_block(8, 11);
        add_words(&tb.words, footnote, pdf->regular);
        text_layout(&tb, BODY_W);
        fill_grey(pdf->pages[0], 0.4);
        text_draw(pdf->pages[0], &tb, MARGIN_X, MARGIN_BOTTOM + text_height(&tb), BODY_W, 0);
        text_free(&tb);
    }
    pdf->page = NULL; // the report starts on a new page
}

// --- finishing ----------------------------------------------------------------------------------

#define CONTENTS_ROW 17.0

static int contents_rows_per_page(void) { return (int)((PAGE_H - MARGIN_TOP - MARGIN_BOTTOM - 40) / CONTENTS_ROW); }

// Draw text at (x, baseline y) in one font; align 0 left, 1 right.
static void put_text(HPDF_Page page, HPDF_Font font, double size, double x, double y, const char *s, double align) {
    double w = measure(font, s, (int)strlen(s), size);
    HPDF_Page_BeginText(page);
    HPDF_Page_SetFontAndSize(page, font, (HPDF_REAL)size);
    HPDF_Page_TextOut(page, (HPDF_REAL)(x - align * w), (HPDF_REAL)y, s);
    HPDF_Page_EndText(page);
}

// The page number printed on pages[index]: the title page is 1, then the contents pages.
static int display_number(int index, int n_contents) { return index == 0 ? 1 : index + 1 + n_contents; }

static void draw_contents(Pdf *pdf, HPDF_Page *contents, int n_contents) {
    int per_page = contents_rows_per_page();
    for (int i = 0; i < pdf->n_headings; i++) {
        HPDF_Page page = contents[i / per_page];
        int row = i % per_page;
        double y = PAGE_H - MARGIN_TOP - (i < per_page ? 40 : 0) - row * CONTENTS_ROW;
        if (i == 0) {
            fill_grey(page, 0.05);
            put_text(page, pdf->bold, 16, MARGIN_X, PAGE_H - MARGIN_TOP - 16, "Contents", 0);
        }
        const Heading *h = &pdf->headings[i];
        double indent = h->level == 1 ? 0 : 22, size = h->level == 1 ? 10.5 : 10;
        HPDF_Font font = h->level == 1 ? pdf->bold : pdf->regular;
        char entry[600], number[16];
        snprintf(entry, sizeof entry, "%s   %s", h->number, h->title);
        snprintf(number, sizeof number, "%d", display_number(h->page, n_contents));
        double baseline = y - 12, right = MARGIN_X + BODY_W;
        fill_grey(page, 0.1);
        put_text(page, font, size, MARGIN_X + indent, baseline, entry, 0);
        put_text(page, font, size, right, baseline, number, 1);
        double entry_end = MARGIN_X + indent + measure(font, entry, (int)strlen(entry), size) + 6;
        double number_start = right - measure(font, number, (int)strlen(number), size) - 6;
        if (number_start > entry_end) { // dot leader
            static const HPDF_UINT16 dots[] = {1, 3};
            HPDF_Page_SetDash(page, dots, 2, 0);
            rule(page, entry_end, number_start, baseline + 1, 0.6, 0.5);
            HPDF_Page_SetDash(page, NULL, 0, 0);
        }
        HPDF_Rect rect = {(HPDF_REAL)MARGIN_X, (HPDF_REAL)(y - CONTENTS_ROW + 2), (HPDF_REAL)right, (HPDF_REAL)y};
        HPDF_Destination dst = HPDF_Page_CreateDestination(pdf->pages[h->page]);
        HPDF_Destination_SetFitH(dst, (HPDF_REAL)(h->y + 12));
        HPDF_Annotation link = HPDF_Page_CreateLinkAnnot(page, rect, dst);
        HPDF_LinkAnnot_SetBorderStyle(link, 0, 0, 0);
    }
}

// Running header (document title, current section) and "n / N" footer on every page but the title.
static void draw_page_furniture(Pdf *pdf, HPDF_Page page, int number, int total, const char *section) {
    char text[32];
    snprintf(text, sizeof text, "%d / %d", number, total);
    fill_grey(page, 0.4);
    put_text(page, pdf->regular, 8.5, PAGE_W / 2, 32, text, 0.5);
    put_text(page, pdf->regular, 8, MARGIN_X, PAGE_H - 40, pdf->title, 0);
    if (section) put_text(page, pdf->regular, 8, MARGIN_X + BODY_W, PAGE_H - 40, section, 1);
    rule(page, MARGIN_X, MARGIN_X + BODY_W, PAGE_H - 45, 0.4, 0.7);
}

static int write_document(Pdf *pdf, const char *path, Error *err) {
    if (HPDF_SaveToStream(pdf->doc) != HPDF_OK || pdf->error)
        return error_set(err, "%s: libharu cannot write the document (error 0x%04X, detail %u)", path,
                         (unsigned)pdf->error, (unsigned)pdf->error_detail);
    HPDF_ResetStream(pdf->doc);
    AtomicFile af = atomic_open(path);
    unsigned char buf[1 << 15];
    for (;;) {
        HPDF_UINT32 n = sizeof buf;
        HPDF_STATUS st = HPDF_ReadFromStream(pdf->doc, buf, &n);
        if (n > 0) fwriteCheck(buf, 1, n, af.f);
        if (st == HPDF_STREAM_EOF) break;
        if (st != HPDF_OK) {
            atomic_abort(&af);
            return error_set(err, "%s: libharu stream error 0x%04X", path, (unsigned)st);
        }
    }
    atomic_commit(&af);
    return 0;
}

int pdf_save(Pdf *pdf, const char *path, Error *err) {
    flush_heading(pdf, 0);
    if (pdf->n_pages == 0) new_page(pdf);
    int per_page = contents_rows_per_page();
    int n_contents = (pdf->n_headings + per_page - 1) / per_page;
    HPDF_Page *contents = mallocCheck((size_t)(n_contents + 1) * sizeof *contents);
    for (int i = 0; i < n_contents; i++) {
        contents[i] = pdf->n_pages > 1 ? HPDF_InsertPage(pdf->doc, pdf->pages[1]) : HPDF_AddPage(pdf->doc);
        HPDF_Page_SetSize(contents[i], HPDF_PAGE_SIZE_A4, HPDF_PAGE_PORTRAIT);
    }
    draw_contents(pdf, contents, n_contents);
    int total = pdf->n_pages + n_contents;
    for (int i = 0; i < n_contents; i++) draw_page_furniture(pdf, contents[i], 2 + i, total, "Contents");
    for (int i = 1; i < pdf->n_pages; i++) {
        const char *section = NULL;
        for (int h = 0; h < pdf->n_headings && pdf->headings[h].page <= i; h++)
            if (pdf->headings[h].level == 1) section = pdf->headings[h].title;
        draw_page_furniture(pdf, pdf->pages[i], display_number(i, n_contents), total, section);
    }
    free(contents);
    return write_document(pdf, path, err);
}
