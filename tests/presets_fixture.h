// presets_fixture.h: the tests' way to templates/model_presets.csv (read by the hardware
// budget and the attention variants): its path under $INFERLAB_ROOT (else the working
// directory, as `make test` runs), and a model of it by name. Include after cmocka.h and
// budget.h.
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void template_path(char *buf, size_t size, const char *name) {
    const char *root = getenv("INFERLAB_ROOT");
    snprintf(buf, size, "%s/templates/%s", root ? root : ".", name);
}

static const ModelShape *find_model(const ModelShape *m, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(m[i].name, name) == 0) return &m[i];
    fail_msg("templates/model_presets.csv has no '%s'", name);
    return NULL;
}
