/*
 * hpcjobs.accounting.sacct._scan: one pass over `sacct --parsable2` text, each field parsed as it
 * is split off, into plain buffers that Python wraps as Arrow/numpy arrays without copying.
 *
 * This is an optional accelerator of hpcjobs.accounting.sacct.read: the Arrow path there is the
 * reference. The scanner only accepts the exact spellings sacct prints with SLURM_TIME_FORMAT=standard
 * (see the kind functions below); on anything else -- a line with another number of fields, an odd
 * time, a job id outside the documented grammar -- scan() returns None and the caller reads the text
 * the Arrow way, which either handles the spelling or reports it. So the two paths give the same
 * DataFrame by construction; tests/accounting/test_sacct_scan.py checks it on real and generated text.
 *
 * scan(buffer, start, end, kinds) parses the lines in buffer[start:end] (start at a line start, end at
 * one past a newline or at the end of the text). kinds has one byte per field (K_* below). It returns a
 * list with one tuple of bytes objects per field, or None. The GIL is released while scanning, so
 * threads can scan disjoint parts of one text at once.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { K_SKIP = 0, K_STR = 1, K_DICT = 2, K_INT = 3, K_TIME = 4, K_DUR = 5, K_MEM = 6, K_JOBID = 7, K_RAWID = 8 };
#define MAX_FIELDS 64

/* ---------------------------------------------------------------- growable buffers */

typedef struct { char *p; size_t len, cap; int failed; } Buf;

static int buf_grow(Buf *b, size_t extra) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) { b->failed = 1; return 0; }
    b->p = p; b->cap = cap;
    return 1;
}
static inline int buf_reserve(Buf *b, size_t extra) {
    return b->len + extra <= b->cap || buf_grow(b, extra);
}
static inline void buf_put(Buf *b, const void *src, size_t n) {
    if (n && buf_reserve(b, n)) { memcpy(b->p + b->len, src, n); b->len += n; }
}
static inline void put_i64(Buf *b, int64_t v) {
    if (buf_reserve(b, 8)) { memcpy(b->p + b->len, &v, 8); b->len += 8; }
}
static inline void put_i32(Buf *b, int32_t v) {
    if (buf_reserve(b, 4)) { memcpy(b->p + b->len, &v, 4); b->len += 4; }
}
static inline void put_u8(Buf *b, uint8_t v) {
    if (buf_reserve(b, 1)) b->p[b->len++] = (char)v;
}

/* A string column: int32 offsets (starting with 0; a part stays under 2 GiB), bytes, one validity byte
 * per row (blank -> null). */
typedef struct { Buf off, data, valid; } StrCol;

static void str_init(StrCol *s, size_t rows, size_t bytes) {
    buf_reserve(&s->off, 4 * (rows + 1));
    buf_reserve(&s->valid, rows);
    if (bytes) buf_reserve(&s->data, bytes);
    put_i32(&s->off, 0);
}
static inline __attribute__((always_inline)) void str_add(StrCol *s, const char *p, size_t n, int valid) {
    buf_put(&s->data, p, n);
    put_i32(&s->off, (int32_t)s->data.len);
    put_u8(&s->valid, (uint8_t)valid);
}

/* A dictionary column: int32 codes (-1 = blank) and the distinct values as a string column. */
typedef struct {
    Buf codes;
    StrCol values;
    int32_t *slots; /* open addressing: value index + 1, 0 = empty */
    size_t nslots, count;
    int32_t last; /* the value of the row before */
} DictCol;

static inline uint64_t hash_bytes(const char *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n, w;
    for (; n >= 8; p += 8, n -= 8) {
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ULL;
        h ^= h >> 31;
    }
    w = 0;
    memcpy(&w, p, n);
    h = (h ^ w) * 0x94D049BB133111EBULL;
    return h ^ (h >> 29);
}

static int dict_grow(DictCol *d) {
    size_t n = d->nslots ? d->nslots * 2 : 64;
    int32_t *slots = calloc(n, sizeof(int32_t));
    if (!slots) return 0;
    const int32_t *off = (const int32_t *)d->values.off.p;
    for (size_t v = 0; v < d->count; v++) {
        size_t i = hash_bytes(d->values.data.p + off[v], (size_t)(off[v + 1] - off[v])) & (n - 1);
        while (slots[i]) i = (i + 1) & (n - 1);
        slots[i] = (int32_t)(v + 1);
    }
    free(d->slots);
    d->slots = slots; d->nslots = n;
    return 1;
}

static int dict_add(DictCol *d, const char *p, size_t n) {
    if (n == 0) { put_i32(&d->codes, -1); return 1; }
    if (d->count) { /* the same value as the row before: common, and no hashing */
        const int32_t *off = (const int32_t *)d->values.off.p;
        int32_t last = d->last;
        if ((size_t)(off[last + 1] - off[last]) == n && memcmp(d->values.data.p + off[last], p, n) == 0) {
            put_i32(&d->codes, last);
            return 1;
        }
    }
    if ((d->count + 1) * 2 > d->nslots && !dict_grow(d)) return 0;
    size_t i = hash_bytes(p, n) & (d->nslots - 1);
    const int32_t *off = (const int32_t *)d->values.off.p;
    for (;;) {
        int32_t s = d->slots[i];
        if (!s) break;
        size_t len = (size_t)(off[s] - off[s - 1]);
        if (len == n && memcmp(d->values.data.p + off[s - 1], p, n) == 0) {
            d->last = s - 1;
            put_i32(&d->codes, s - 1);
            return 1;
        }
        i = (i + 1) & (d->nslots - 1);
    }
    d->slots[i] = (int32_t)(d->count + 1);
    d->last = (int32_t)d->count;
    put_i32(&d->codes, (int32_t)d->count);
    str_add(&d->values, p, n, 1);
    d->count++;
    return 1;
}

/* Numbers: int64 values and one validity byte per row. */
typedef struct {
    Buf vals, valid;
    char day_text[10]; /* times: the last date seen and its day number */
    int64_t day;
    int day_known;
} NumCol;
static inline void num_add(NumCol *c, int64_t v, int valid) { put_i64(&c->vals, v); put_u8(&c->valid, (uint8_t)valid); }

typedef struct { StrCol job, step, base, spec; NumCol task, het; } JobIdCol;
typedef struct { StrCol raw; Buf key; } RawIdCol;

typedef struct {
    int kind;
    StrCol str;
    DictCol dict;
    NumCol num;
    JobIdCol jid;
    RawIdCol rid;
} Column;

/* ---------------------------------------------------------------- field parsers (0 = not this format) */

static inline int is_digit(char c) { return c >= '0' && c <= '9'; }

static int digits(const char *p, size_t n, int64_t *out) {
    if (n == 0 || n > 18) return 0;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!is_digit(p[i])) return 0;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 1;
}

static int is_null_word(const char *p, size_t n) {
    return n == 0 || (n == 7 && memcmp(p, "Unknown", 7) == 0) || (n == 4 && memcmp(p, "None", 4) == 0);
}

static int64_t days_from_civil(int64_t y, int64_t m, int64_t d) { /* H. Hinnant's algorithm */
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* YYYY-MM-DDTHH:MM:SS -> seconds since 1970 read as UTC; Unknown/None/blank -> null. */
static int parse_time(const char *p, size_t n, NumCol *c) {
    if (is_null_word(p, n)) { num_add(c, 0, 0); return 1; }
    if (n != 19 || p[4] != '-' || p[7] != '-' || p[10] != 'T' || p[13] != ':' || p[16] != ':') return 0;
    int64_t y, mo, d, h, mi, s;
    if (!digits(p + 11, 2, &h) || !digits(p + 14, 2, &mi) || !digits(p + 17, 2, &s) || h > 23 || mi > 59 || s > 59)
        return 0;
    if (!c->day_known || memcmp(c->day_text, p, 10) != 0) { /* rows near each other share the day */
        if (!digits(p, 4, &y) || !digits(p + 5, 2, &mo) || !digits(p + 8, 2, &d)) return 0;
        static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
        if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1]) return 0;
        if (mo == 2 && d == 29 && !((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) return 0;
        memcpy(c->day_text, p, 10);
        c->day = days_from_civil(y, mo, d);
        c->day_known = 1;
    }
    num_add(c, c->day * 86400 + h * 3600 + mi * 60 + s, 1);
    return 1;
}

static int parse_int(const char *p, size_t n, NumCol *c) {
    int64_t v;
    if (is_null_word(p, n)) { num_add(c, 0, 0); return 1; }
    if (!digits(p, n, &v)) return 0;
    num_add(c, v, 1);
    return 1;
}

/* [D-]HH:MM:SS or MM:SS.mmm -> nanoseconds; blank -> null. */
static int parse_dur(const char *p, size_t n, NumCol *c) {
    int64_t a, b, f, days = 0;
    if (n == 0) { num_add(c, 0, 0); return 1; }
    if (n == 9 && p[2] == ':' && p[5] == '.') {
        if (!digits(p, 2, &a) || !digits(p + 3, 2, &b) || !digits(p + 6, 3, &f)) return 0;
        num_add(c, (a * 60 + b) * 1000000000LL + f * 1000000LL, 1);
        return 1;
    }
    if (n < 8) return 0;
    const char *t = p + n - 8;
    if (n > 8 && (t[-1] != '-' || !digits(p, n - 9, &days) || days > 100000000)) return 0;
    if (t[2] != ':' || t[5] != ':' || !digits(t, 2, &a) || !digits(t + 3, 2, &b) || !digits(t + 6, 2, &f)) return 0;
    num_add(c, (days * 86400 + a * 3600 + b * 60 + f) * 1000000000LL, 1);
    return 1;
}

/* 1294440K, 16G, 0, 891.26M -> bytes (powers of 1024), rounded half to even; blank -> null. */
static int parse_mem(const char *p, size_t n, NumCol *c) {
    if (n == 0) { num_add(c, 0, 0); return 1; }
    static const char units[] = "KMGTPE";
    int shift = 0;
    const char *u = memchr(units, p[n - 1], 6);
    if (u) { shift = 10 * (int)(u - units + 1); n--; }
    size_t dot = n;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '.' && dot == n) dot = i;
        else if (!is_digit(p[i])) return 0;
    }
    if (dot == 0 || dot + 1 == n) return 0;
    const double two53 = 9007199254740992.0;
    if (dot == n) { /* whole number: exact while the product stays below 2^53, as the float path is */
        int64_t v;
        if (!digits(p, n, &v) || ldexp((double)v, shift) >= two53) return 0;
        num_add(c, v << shift, 1);
        return 1;
    }
    char tmp[64];
    if (n >= sizeof tmp) return 0;
    memcpy(tmp, p, n); tmp[n] = 0;
    double x = ldexp(strtod(tmp, NULL), shift);
    if (!(x < two53)) return 0;
    num_add(c, (int64_t)nearbyint(x), 1);
    return 1;
}

/* <digits>[_<digits>|_[<spec>]][+<digits>][.<step: letters and digits>] */
static int parse_jobid(const char *p, size_t n, JobIdCol *c) {
    size_t i = 0, base_end, job_end;
    int64_t task = 0, het = 0;
    int has_task = 0, has_spec = 0, has_het = 0;
    const char *spec = NULL;
    size_t spec_len = 0;
    while (i < n && is_digit(p[i])) i++;
    if (i == 0 || i > 18) return 0;
    base_end = i;
    if (i < n && p[i] == '_') {
        i++;
        if (i < n && p[i] == '[') {
            size_t s = ++i; /* a range list: 1-3,5,7-15:2%4 */
            while (i < n && (is_digit(p[i]) || p[i] == '-' || p[i] == ',' || p[i] == ':' || p[i] == '%')) i++;
            if (i == n || p[i] != ']' || i == s) return 0;
            spec = p + s; spec_len = i - s; has_spec = 1;
            i++;
        } else {
            size_t s = i;
            while (i < n && is_digit(p[i])) i++;
            if (!digits(p + s, i - s, &task)) return 0;
            has_task = 1;
        }
    }
    if (i < n && p[i] == '+') {
        size_t s = ++i;
        while (i < n && is_digit(p[i])) i++;
        if (!digits(p + s, i - s, &het)) return 0;
        has_het = 1;
    }
    job_end = i;
    if (i < n) {
        if (p[i] != '.' || i + 1 == n) return 0;
        for (size_t k = i + 1; k < n; k++) {
            char ch = p[k];
            if (!(is_digit(ch) || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'))) return 0;
        }
    }
    str_add(&c->job, p, job_end, 1);
    if (job_end < n) str_add(&c->step, p + job_end + 1, n - job_end - 1, 1);
    else str_add(&c->step, p, 0, 0);
    str_add(&c->base, p, (has_task || has_spec) ? base_end : 0, has_task || has_spec);
    str_add(&c->spec, spec ? spec : p, spec_len, has_spec);
    num_add(&c->task, task, has_task);
    num_add(&c->het, het, has_het);
    return 1;
}

/* JobIDRaw: the part before the first dot, and its value when that is all digits (-1 otherwise). */
static int parse_rawid(const char *p, size_t n, RawIdCol *c) {
    const char *dot = memchr(p, '.', n);
    size_t len = dot ? (size_t)(dot - p) : n;
    int64_t v;
    str_add(&c->raw, p, len, n != 0);
    put_i64(&c->key, (n && digits(p, len, &v)) ? v : -1);
    return 1;
}

static int add_field(Column *col, const char *p, size_t n) {
    switch (col->kind) {
    case K_SKIP: return 1;
    case K_STR: str_add(&col->str, p, n, n != 0); return 1;
    case K_DICT: return dict_add(&col->dict, p, n);
    case K_INT: return parse_int(p, n, &col->num);
    case K_TIME: return parse_time(p, n, &col->num);
    case K_DUR: return parse_dur(p, n, &col->num);
    case K_MEM: return parse_mem(p, n, &col->num);
    case K_JOBID: return parse_jobid(p, n, &col->jid);
    case K_RAWID: return parse_rawid(p, n, &col->rid);
    }
    return 0;
}

/* ---------------------------------------------------------------- UTF-8, as Arrow requires of strings */

/* One string: well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF). */
static int utf8_valid(const unsigned char *p, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        if (c < 0x80) { i++; continue; }
        size_t k;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) k = 1;
        else if (c >= 0xE0 && c <= 0xEF) { k = 2; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
        else if (c >= 0xF0 && c <= 0xF4) { k = 3; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
        else return 0;
        if (i + k >= n) return 0; /* truncated */
        if (p[i + 1] < lo || p[i + 1] > hi) return 0;
        for (size_t j = 2; j <= k; j++)
            if ((p[i + j] & 0xC0) != 0x80) return 0;
        i += k + 1;
    }
    return 1;
}

/* Every string of a string column is UTF-8 (checked string by string only when a byte is not ASCII). */
static int strings_valid(const StrCol *s) {
    const unsigned char *d = (const unsigned char *)s->data.p;
    size_t i = 0, n = s->data.len;
    uint64_t high = 0, w;
    for (; i + 8 <= n; i += 8) { memcpy(&w, d + i, 8); high |= w; }
    for (; i < n; i++) high |= d[i];
    if (!(high & 0x8080808080808080ULL)) return 1;
    const int32_t *off = (const int32_t *)s->off.p;
    size_t rows = s->off.len / 4 - 1;
    for (size_t r = 0; r < rows; r++)
        if (!utf8_valid(d + off[r], (size_t)(off[r + 1] - off[r]))) return 0;
    return 1;
}

static int column_text_valid(const Column *c) {
    switch (c->kind) {
    case K_STR: return strings_valid(&c->str);
    case K_DICT: return strings_valid(&c->dict.values);
    case K_RAWID: return strings_valid(&c->rid.raw);
    }
    return 1;
}

/* ---------------------------------------------------------------- the scan */

static Py_ssize_t scan_lines(const char *text, Py_ssize_t start, Py_ssize_t end, Column *cols, int nf) {
    Py_ssize_t rows = 0, i = start;
    while (i < end) {
        const char *line = text + i;
        const char *nl = memchr(line, '\n', (size_t)(end - i));
        size_t len = nl ? (size_t)(nl - line) : (size_t)(end - i);
        i += (Py_ssize_t)len + 1;
        if (len == 0) continue; /* empty lines are skipped, as pyarrow's reader does */
        if (memchr(line, '\r', len)) return -1;
        const char *q = line, *le = line + len;
        for (int f = 0; f < nf; f++) {
            const char *field = q;
            while (q < le && *q != '|') q++; /* fields are short: a plain loop beats memchr */
            if ((q == le) != (f + 1 == nf)) return -1; /* too few or too many fields */
            if (!add_field(&cols[f], field, (size_t)(q - field))) return -1;
            q++;
        }
        rows++;
    }
    return rows;
}

/* A read-only buffer owning the memory a Buf filled: handed to Python without a copy. */
typedef struct { PyObject_HEAD char *p; Py_ssize_t len; } Owned;
static char empty[1];

static int owned_getbuffer(PyObject *o, Py_buffer *view, int flags) {
    Owned *b = (Owned *)o;
    return PyBuffer_FillInfo(view, o, b->p ? b->p : empty, b->len, 1, flags);
}
static void owned_dealloc(PyObject *o) {
    free(((Owned *)o)->p);
    Py_TYPE(o)->tp_free(o);
}
static PyBufferProcs owned_as_buffer = {owned_getbuffer, NULL};
static PyTypeObject OwnedType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "hpcjobs.accounting.sacct._scan.Buffer",
    .tp_basicsize = sizeof(Owned),
    .tp_dealloc = owned_dealloc,
    .tp_as_buffer = &owned_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Memory filled by the scanner (buffer protocol, read-only).",
};

static PyObject *take_bytes(Buf *b) {
    Owned *o = PyObject_New(Owned, &OwnedType);
    if (!o) return NULL;
    o->p = b->p;
    o->len = (Py_ssize_t)b->len;
    b->p = NULL; b->len = b->cap = 0;
    return (PyObject *)o;
}

#define B(x) take_bytes(&(x))
static PyObject *column_result(Column *c) {
    switch (c->kind) {
    case K_STR: return Py_BuildValue("(NNN)", B(c->str.off), B(c->str.data), B(c->str.valid));
    case K_DICT:
        return Py_BuildValue("(NNN)", B(c->dict.codes), B(c->dict.values.off), B(c->dict.values.data));
    case K_INT: case K_TIME: case K_DUR: case K_MEM: return Py_BuildValue("(NN)", B(c->num.vals), B(c->num.valid));
    case K_JOBID: {
        JobIdCol *j = &c->jid;
        return Py_BuildValue("(NNNNNNNNNNNNNNNN)", B(j->job.off), B(j->job.data), B(j->job.valid), B(j->step.off),
                             B(j->step.data), B(j->step.valid), B(j->base.off), B(j->base.data), B(j->base.valid),
                             B(j->spec.off), B(j->spec.data), B(j->spec.valid), B(j->task.vals), B(j->task.valid),
                             B(j->het.vals), B(j->het.valid));
    }
    case K_RAWID: return Py_BuildValue("(NNNN)", B(c->rid.raw.off), B(c->rid.raw.data), B(c->rid.raw.valid), B(c->rid.key));
    }
    Py_RETURN_NONE;
}
#undef B

static void free_buf(Buf *b) { free(b->p); b->p = NULL; }
static void free_str(StrCol *s) { free_buf(&s->off); free_buf(&s->data); free_buf(&s->valid); }
static void free_num(NumCol *c) { free_buf(&c->vals); free_buf(&c->valid); }
static void free_column(Column *c) {
    free_str(&c->str); free_str(&c->dict.values); free_buf(&c->dict.codes); free(c->dict.slots);
    free_num(&c->num);
    free_str(&c->jid.job); free_str(&c->jid.step); free_str(&c->jid.base); free_str(&c->jid.spec);
    free_num(&c->jid.task); free_num(&c->jid.het);
    free_str(&c->rid.raw); free_buf(&c->rid.key);
}

static void num_init(NumCol *c, size_t rows) { buf_reserve(&c->vals, 8 * rows); buf_reserve(&c->valid, rows); }

static void column_init(Column *c, int kind, size_t rows) {
    c->kind = kind;
    switch (kind) {
    case K_STR: str_init(&c->str, rows, 0); break;
    case K_DICT: buf_reserve(&c->dict.codes, 4 * rows); str_init(&c->dict.values, 0, 0); break;
    case K_INT: case K_TIME: case K_DUR: case K_MEM: num_init(&c->num, rows); break;
    case K_JOBID:
        str_init(&c->jid.job, rows, 0); str_init(&c->jid.step, rows, 0); str_init(&c->jid.base, rows, 0);
        str_init(&c->jid.spec, rows, 0); num_init(&c->jid.task, rows); num_init(&c->jid.het, rows);
        break;
    case K_RAWID: str_init(&c->rid.raw, rows, 0); buf_reserve(&c->rid.key, 8 * rows); break;
    }
}

static int column_failed(Column *c) {
    Buf *bufs[] = {&c->str.off, &c->str.data, &c->str.valid, &c->dict.codes, &c->dict.values.off,
                   &c->dict.values.data, &c->num.vals, &c->num.valid, &c->jid.job.off, &c->jid.job.data,
                   &c->jid.job.valid, &c->jid.step.off, &c->jid.step.data, &c->jid.step.valid, &c->jid.base.off,
                   &c->jid.base.data, &c->jid.base.valid, &c->jid.spec.off, &c->jid.spec.data, &c->jid.spec.valid,
                   &c->jid.task.vals, &c->jid.task.valid, &c->jid.het.vals, &c->jid.het.valid, &c->rid.raw.off,
                   &c->rid.raw.data, &c->rid.raw.valid, &c->rid.key};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]->failed) return 1;
    return 0;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer text, kinds;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "y*nny*", &text, &start, &end, &kinds)) return NULL;
    int nf = (int)kinds.len;
    if (nf < 1 || nf > MAX_FIELDS || start < 0 || end > text.len || start > end) {
        PyBuffer_Release(&text); PyBuffer_Release(&kinds);
        PyErr_SetString(PyExc_ValueError, "scan: bad field kinds or byte range");
        return NULL;
    }
    Column *cols = calloc((size_t)nf, sizeof(Column));
    if (!cols) { PyBuffer_Release(&text); PyBuffer_Release(&kinds); return PyErr_NoMemory(); }
    Py_ssize_t rows;
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    size_t lines = 1; /* an upper bound of the rows, to size the per-row buffers once */
    for (const char *q = (const char *)text.buf + start, *stop = (const char *)text.buf + end;
         (q = memchr(q, '\n', (size_t)(stop - q))) != NULL; q++)
        lines++;
    for (int f = 0; f < nf; f++) column_init(&cols[f], ((const unsigned char *)kinds.buf)[f], lines);
    rows = scan_lines((const char *)text.buf, start, end, cols, nf);
    for (int f = 0; f < nf; f++) failed |= column_failed(&cols[f]);
    for (int f = 0; f < nf && rows >= 0 && !failed; f++)
        if (!column_text_valid(&cols[f])) rows = -1; /* not UTF-8: the pyarrow reader reports it */
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&text);
    PyBuffer_Release(&kinds);
    PyObject *result = NULL;
    if (failed) {
        PyErr_NoMemory();
    } else if (rows < 0) {
        result = Py_NewRef(Py_None);
    } else if ((result = PyList_New(nf + 1))) {
        PyList_SET_ITEM(result, 0, PyLong_FromSsize_t(rows));
        for (int f = 0; f < nf; f++) {
            PyObject *r = column_result(&cols[f]);
            if (!r) { Py_CLEAR(result); break; }
            PyList_SET_ITEM(result, f + 1, r);
        }
    }
    for (int f = 0; f < nf; f++) free_column(&cols[f]);
    free(cols);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "scan(buffer, start, end, kinds) -> [rows, field results...] or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_scan", "One-pass sacct --parsable2 scanner.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__scan(void) {
    if (PyType_Ready(&OwnedType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddIntConstant(m, "K_SKIP", K_SKIP) || PyModule_AddIntConstant(m, "K_STR", K_STR)
        || PyModule_AddIntConstant(m, "K_DICT", K_DICT) || PyModule_AddIntConstant(m, "K_INT", K_INT)
        || PyModule_AddIntConstant(m, "K_TIME", K_TIME) || PyModule_AddIntConstant(m, "K_DUR", K_DUR)
        || PyModule_AddIntConstant(m, "K_MEM", K_MEM) || PyModule_AddIntConstant(m, "K_JOBID", K_JOBID)
        || PyModule_AddIntConstant(m, "K_RAWID", K_RAWID)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
