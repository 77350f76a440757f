// template.h: the report template, parsed (the format is documented in templates/README.md).
// A template is plain text: directives start with '@' (@title, @section, @figure ... @end),
// '#' starts a comment line, and every other line is paragraph text, where {placeholders}
// are filled from the CSVs when the report is rendered (query.h). Parsing checks the
// structure — known directives, known option keys for each figure kind, required options,
// balanced blocks, include cycles — and every error names the template file and line.
//
//   Template t;
//   if (template_load(&t, "templates/report.tmpl", &err)) die("%s", err.msg);
//   for (int i = 0; i < t.n_blocks; i++) ... t.blocks[i].kind ...
//   template_free(&t);
#pragma once

#include "common.h"

typedef enum {
    BLOCK_SECTION,    // text = title; requires = CSVs the section needs
    BLOCK_SUBSECTION, // likewise, one level down
    BLOCK_PARAGRAPH,  // text = the joined lines; bullet = 1 for "- " items
    BLOCK_FIGURE,     // text = id (the PNG's name); options
    BLOCK_TABLE,      // text = id; options
    BLOCK_PAGEBREAK,
} BlockKind;

typedef struct {
    char *key, *value;
    int line;
} Option;

typedef struct {
    BlockKind kind;
    const char *file; // the template file it came from (owned by the Template)
    int line;
    char *text;
    int bullet;
    Option *options;
    int n_options;
    char **requires; // sections: CSV files the section needs
    int n_requires;
    char *reason;    // sections: why it would not have run, from "@requires ... else REASON"
} Block;

typedef struct {
    char *title, *subtitle; // may hold placeholders
    char *dir;              // the top template's directory: reference CSVs live there
    Block *blocks;
    int n_blocks;
    char **files;           // every template file read, for messages
    int n_files;
} Template;

int template_load(Template *t, const char *path, Error *err);
void template_free(Template *t);

// The value of option `key` (the last one given), or NULL.
const char *block_option(const Block *b, const char *key);
// Likewise, with its Option (for the line number).
const Option *block_find_option(const Block *b, const char *key);
// The cells of a table's `row:` line: split at '|' outside {placeholders}, trimmed
// (malloc'd, as *n strings).
char **table_row_cells(const char *row, int *n);
// "kind: line" by default.
const char *figure_kind(const Block *b);
