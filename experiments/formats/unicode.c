// unicode.c: lenient UTF-8 decoding, encoding and codepoint classes (see unicode.h).
#include "unicode.h"

static int continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

uint32_t unicode_decode(const unsigned char *s, size_t len, size_t *n) {
    unsigned char b = s[0];
    *n = 1;
    if (b < 0x80) return b;
    if (b < 0xC0 || b >= 0xF8) return UNICODE_REPLACEMENT; // a stray continuation, or no UTF-8 lead
    size_t need = b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    if (len < need) return UNICODE_REPLACEMENT;
    uint32_t cp = b & (0x7F >> need);
    for (size_t i = 1; i < need; i++) {
        if (!continuation(s[i])) return UNICODE_REPLACEMENT;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    *n = need;
    return cp;
}

size_t unicode_encode(uint32_t cp, unsigned char out[4]) {
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | cp >> 6);
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | cp >> 12);
        out[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cp >> 18 & 0x07));
    out[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

int unicode_class(uint32_t cp) {
    if (cp < 0x80) { // the common case, without the search
        if (cp >= 'a' ? cp <= 'z' : cp >= 'A' ? cp <= 'Z' : 0) return UNICODE_LETTER;
        if (cp >= '0' && cp <= '9') return UNICODE_NUMBER;
        return cp == ' ' || (cp >= '\t' && cp <= '\r') ? UNICODE_SPACE : UNICODE_OTHER;
    }
    if (cp >= 0x110000) return UNICODE_OTHER;
    int lo = 0, hi = unicode_n_ranges - 1; // the last range whose first codepoint is <= cp
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (unicode_ranges[mid].first <= cp) lo = mid;
        else hi = mid - 1;
    }
    return unicode_ranges[lo].cls;
}
