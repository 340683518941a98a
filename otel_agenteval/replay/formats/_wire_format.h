/* The protobuf wire format as OTLP uses it, in C: what _wire_format.c offers _wire_c.c.
 * See wire_format.py, which each function mirrors, and _wire_c.c for the conventions. */
#ifndef AGENTEVAL_WIRE_FORMAT_H
#define AGENTEVAL_WIRE_FORMAT_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__)
#define INTERNAL __attribute__((visibility("hidden")))  /* shared by the two files, not exported */
#else
#define INTERNAL
#endif

typedef const unsigned char *Buf;

INTERNAL extern PyObject *EmptyStr;
INTERNAL extern const char ONE_FIELD[];

INTERNAL int wire_format_init(void);
INTERNAL PyObject *utf8(Buf d, Py_ssize_t a, Py_ssize_t b);
INTERNAL int skip(Buf d, Py_ssize_t *i, uint64_t tag, Py_ssize_t end, const char *fields);
INTERNAL int key_value(Buf d, Py_ssize_t i, Py_ssize_t end, PyObject *out, int depth);

static inline int varint(Buf d, Py_ssize_t *i, Py_ssize_t end, uint64_t *out) {
    if (*i < end && d[*i] < 0x80) {  /* one byte: most tags and lengths */
        *out = d[(*i)++];
        return 0;
    }
    uint64_t n = 0;
    int shift = 0;
    for (;;) {
        if (*i >= end)
            return -1;
        unsigned char b = d[(*i)++];
        if (shift == 63 && b > 1)
            return -1;  /* past 64 bits */
        n |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            *out = n;
            return 0;
        }
        shift += 7;
    }
}

/* a field's tag, as protobuf reads one: at most 5 bytes and 32 bits (it refuses the message else) */
static inline int read_tag(Buf d, Py_ssize_t *i, Py_ssize_t end, uint64_t *out) {
    Py_ssize_t start = *i;
    if (varint(d, i, end, out) < 0 || *i - start > 5 || *out > 0xFFFFFFFFu)
        return -1;
    return 0;
}

/* (start, stop) of a length-delimited field whose length is at *i, inside end; *i = stop */
static inline int length(Buf d, Py_ssize_t *i, Py_ssize_t end, Py_ssize_t *start) {
    uint64_t n;
    Py_ssize_t from = *i;  /* protobuf reads a length in at most 5 bytes (it refuses the message else) */
    if (varint(d, i, end, &n) < 0 || *i - from > 5 || n > (uint64_t)(end - *i))
        return -1;
    *start = *i;
    *i += (Py_ssize_t)n;
    return 0;
}

static inline uint64_t fixed64(Buf d, Py_ssize_t i) {  /* little-endian; inside the message: checked by the caller */
    uint64_t n = 0;
    for (int k = 7; k >= 0; k--)
        n = n << 8 | d[i + k];
    return n;
}

static inline uint64_t be64(Buf d, Py_ssize_t i) {
    uint64_t n = 0;
    for (int k = 0; k < 8; k++)
        n = n << 8 | d[i + k];
    return n;
}

#endif
