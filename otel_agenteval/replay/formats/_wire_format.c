/* The protobuf wire format as OTLP uses it (wire_format.py, in C): varints, lengths, fields
 * passed over as protobuf checks them, and AnyValue/KeyValue read into the values the SDK holds,
 * with the caches of attribute keys and of long repeated values. The layer under _wire_c.c. */
#include "_wire_format.h"

#define MAX_DEPTH 16         /* nested array / kvlist values; deeper ones are left to protobuf */
#define MAX_KEYS 4096        /* attribute keys decoded once and interned; past that, each time */
#define MAX_KEY_BYTES 128
#define KEY_SLOTS 8192       /* twice MAX_KEYS: open addressing stays short */
#define VALUE_SLOTS 64       /* long string values kept, the last one seen in each slot */
#define MIN_LONG 256         /* ...from this many bytes */
#define SHORT_SLOTS 1024     /* short ones (names, models, ids repeated within a run) */
#define MAX_SHARED (64 << 10)

/* the fields of each message, by field number, as in wire_format.py: x read by the caller,
 * v varint, 4 fixed32, b bytes, s string, k KeyValue, L Link, S InstrumentationScope,
 * E EntityRef (checked as protobuf checks them, then passed over), - not defined */
static const char KV_FIELDS[] = "-xxv";
const char ONE_FIELD[] = "-x";
static const char LINK_FIELDS[] = "-bbskv4";
static const char SCOPE_FIELDS[] = "-sskv";
static const char ENTITY_REF_FIELDS[] = "-ssss";

PyObject *EmptyStr;

typedef struct {
    uint64_t hash;
    PyObject *raw;  /* bytes */
    PyObject *key;  /* the interned str */
} KeySlot;

static KeySlot Keys[KEY_SLOTS];
static Py_ssize_t KeyCount;

/* Agents send the same values on span after span: the tool definitions, request parameters and
 * system instructions of every model call, and a run's agent, model, conversation and operation
 * names on each of its spans. One str for each (ASCII, so its bytes are the UTF-8 read), instead
 * of decoding, hashing and later freeing a copy per span. */
typedef struct {
    uint64_t hash;
    PyObject *value;
} ValueSlot;

static ValueSlot Values[VALUE_SLOTS];
static ValueSlot Short[SHORT_SLOTS];

static inline uint64_t mix(uint64_t h, uint64_t w) {
    h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
    return h ^ h >> 29;
}

int wire_format_init(void) {
    EmptyStr = PyUnicode_FromStringAndSize("", 0);
    return EmptyStr == NULL ? -1 : 0;
}

PyObject *utf8(Buf d, Py_ssize_t a, Py_ssize_t b) {
    return a == b ? Py_NewRef(EmptyStr) : PyUnicode_DecodeUTF8((const char *)d + a, b - a, NULL);
}

/* a string value; one that is the last seen in its slot is that str again */
static PyObject *string_value(Buf d, Py_ssize_t a, Py_ssize_t b) {
    Py_ssize_t n = b - a;
    if (n == 0 || n > MAX_SHARED)
        return utf8(d, a, b);
    uint64_t w[4] = {0, 0, 0, 0}, h = (uint64_t)n;  /* the size and 16 bytes at each end (all of a
                                                      * shorter value) pick the slot; equality is checked */
    if (n >= 16) {
        memcpy(w, d + a, 16);
        memcpy(w + 2, d + b - 16, 16);
    } else {
        memcpy(w, d + a, (size_t)n);
    }
    for (int k = 0; k < 4; k++)
        h = mix(h, w[k]);
    ValueSlot *slot = n < MIN_LONG ? &Short[h % SHORT_SLOTS] : &Values[h % VALUE_SLOTS];
    PyObject *v = slot->value;
    if (v != NULL && slot->hash == h && PyUnicode_GET_LENGTH(v) == n && memcmp(PyUnicode_1BYTE_DATA(v), d + a, n) == 0)
        return Py_NewRef(v);
    v = utf8(d, a, b);
    if (v != NULL && PyUnicode_IS_ASCII(v)) {
        Py_XSETREF(slot->value, Py_NewRef(v));
        slot->hash = h;
    }
    return v;
}

static int check(Buf d, Py_ssize_t i, Py_ssize_t end, const char *fields);

static int wire_of(char what) {
    return what == 'v' ? 0 : what == '4' ? 5 : 2;
}

/* past a field not read (its tag read): an undefined one by its wire type, a defined one
 * checked as protobuf checks it (a wrong wire type gives up) */
int skip(Buf d, Py_ssize_t *i, uint64_t tag, Py_ssize_t end, const char *fields) {
    unsigned wire = (unsigned)(tag & 7);
    uint64_t number = tag >> 3;
    char what = number < strlen(fields) ? fields[number] : '-';
    uint64_t n;
    Py_ssize_t a;
    if (number == 0)
        return -1;  /* protobuf refuses field 0 */
    if (what == '-') {
        if (wire == 0)
            return varint(d, i, end, &n);
        if (wire == 2)
            return length(d, i, end, &a);
        if (wire != 1 && wire != 5)
            return -1;  /* groups */
        Py_ssize_t size = wire == 1 ? 8 : 4;
        if (size > end - *i)
            return -1;
        *i += size;
        return 0;
    }
    if (what == 'x' || (unsigned)wire_of(what) != wire)
        return -1;
    if (wire == 0)
        return varint(d, i, end, &n);
    if (wire == 5) {
        if (4 > end - *i)
            return -1;
        *i += 4;
        return 0;
    }
    if (length(d, i, end, &a) < 0)
        return -1;
    if (what == 's') {
        PyObject *s = utf8(d, a, *i);
        if (s == NULL)
            return -1;
        Py_DECREF(s);
        return 0;
    }
    if (what == 'k') {
        PyObject *scratch = PyDict_New();
        if (scratch == NULL)
            return -1;
        int r = key_value(d, a, *i, scratch, 0);
        Py_DECREF(scratch);
        return r;
    }
    if (what == 'b')
        return 0;
    return check(d, a, *i, what == 'L' ? LINK_FIELDS : what == 'S' ? SCOPE_FIELDS : ENTITY_REF_FIELDS);
}

/* a message that is not read, checked field by field */
static int check(Buf d, Py_ssize_t i, Py_ssize_t end, const char *fields) {
    uint64_t tag;
    while (i < end)
        if (read_tag(d, &i, end, &tag) < 0 || skip(d, &i, tag, end, fields) < 0)
            return -1;
    return 0;
}

/* an attribute key, decoded once and interned (first come, first kept) */
static PyObject *key_of(Buf d, Py_ssize_t a, Py_ssize_t b) {
    Py_ssize_t n = b - a;
    if (n > MAX_KEY_BYTES)
        return utf8(d, a, b);
    uint64_t h = (uint64_t)n, w;  /* 8 bytes at a time; equality is checked */
    Py_ssize_t k = a;
    for (; k + 8 <= b; k += 8) {
        memcpy(&w, d + k, 8);
        h = mix(h, w);
    }
    w = 0;
    memcpy(&w, d + k, (size_t)(b - k));
    h = mix(h, w);
    size_t slot = (size_t)h & (KEY_SLOTS - 1);
    for (;;) {
        KeySlot *s = &Keys[slot];
        if (s->key == NULL)
            break;
        if (s->hash == h && PyBytes_GET_SIZE(s->raw) == n && memcmp(PyBytes_AS_STRING(s->raw), d + a, n) == 0)
            return Py_NewRef(s->key);
        slot = (slot + 1) & (KEY_SLOTS - 1);
    }
    PyObject *key = utf8(d, a, b);
    if (key == NULL || KeyCount >= MAX_KEYS)
        return key;
    PyObject *raw = PyBytes_FromStringAndSize((const char *)d + a, n);
    if (raw == NULL) {
        Py_DECREF(key);
        return NULL;
    }
    PyUnicode_InternInPlace(&key);
    Keys[slot].hash = h;
    Keys[slot].raw = raw;
    Keys[slot].key = Py_NewRef(key);
    KeyCount++;
    return key;
}

static PyObject *any_value(Buf d, Py_ssize_t i, Py_ssize_t end, int depth);

/* an ArrayValue's values (a tuple) or a KeyValueList's pairs (a dict): field 1, repeated */
static PyObject *values(Buf d, Py_ssize_t i, Py_ssize_t end, int depth, int pairs) {
    PyObject *out = pairs ? PyDict_New() : PyList_New(0), *v;
    uint64_t tag;
    Py_ssize_t a;
    if (out == NULL)
        return NULL;
    while (i < end) {
        if (read_tag(d, &i, end, &tag) < 0)
            goto fail;
        if (tag != 0x0A) {
            if (skip(d, &i, tag, end, ONE_FIELD) < 0)
                goto fail;
            continue;
        }
        if (length(d, &i, end, &a) < 0)
            goto fail;
        if (pairs) {
            if (key_value(d, a, i, out, depth) < 0)
                goto fail;
        } else if ((v = any_value(d, a, i, depth)) == NULL || PyList_Append(out, v) < 0) {
            Py_XDECREF(v);
            goto fail;
        } else {
            Py_DECREF(v);
        }
    }
    if (pairs)
        return out;
    v = PyList_AsTuple(out);
    Py_DECREF(out);
    return v;
fail:
    Py_DECREF(out);
    return NULL;
}

/* an AnyValue as the Python value the SDK holds; None when no value is set */
static PyObject *any_value(Buf d, Py_ssize_t i, Py_ssize_t end, int depth) {
    PyObject *v = NULL;
    uint64_t tag, n;
    Py_ssize_t a;
    while (i < end) {
        if (v != NULL || read_tag(d, &i, end, &tag) < 0)
            goto fail;  /* a oneof set twice: protobuf keeps the last, merging messages */
        switch (tag) {
        case 0x0A:
            if (length(d, &i, end, &a) < 0)
                goto fail;
            v = string_value(d, a, i);
            break;
        case 0x18:
            if (varint(d, &i, end, &n) < 0)
                goto fail;
            v = PyLong_FromLongLong((long long)n);  /* two's complement, as int64 */
            break;
        case 0x10:
            if (varint(d, &i, end, &n) < 0)
                goto fail;
            v = PyBool_FromLong(n != 0);
            break;
        case 0x21: {
            if (8 > end - i)
                goto fail;
            uint64_t bits = fixed64(d, i);
            double x;
            memcpy(&x, &bits, sizeof x);
            v = PyFloat_FromDouble(x);
            i += 8;
            break;
        }
        case 0x2A:
        case 0x32:
            if (depth >= MAX_DEPTH || length(d, &i, end, &a) < 0)
                goto fail;
            v = values(d, a, i, depth + 1, tag == 0x32);
            break;
        case 0x3A:
            if (length(d, &i, end, &a) < 0)
                goto fail;
            v = PyBytes_FromStringAndSize((const char *)d + a, i - a);
            break;
        default:
            goto fail;  /* string_value_strindex, or a field AnyValue does not have */
        }
        if (v == NULL)
            return NULL;
    }
    return v != NULL ? v : Py_NewRef(Py_None);
fail:
    Py_XDECREF(v);
    return NULL;
}

/* one KeyValue into out (a later key replaces an earlier one, as the SDK's dict does) */
int key_value(Buf d, Py_ssize_t i, Py_ssize_t end, PyObject *out, int depth) {
    PyObject *key = NULL, *value = NULL;
    uint64_t tag;
    Py_ssize_t a;
    int r = -1;
    while (i < end) {
        if (read_tag(d, &i, end, &tag) < 0)
            goto done;
        if (tag == 0x0A) {
            if (length(d, &i, end, &a) < 0)
                goto done;
            Py_XSETREF(key, key_of(d, a, i));
            if (key == NULL)
                goto done;
        } else if (tag == 0x12) {
            if (value != NULL || length(d, &i, end, &a) < 0)
                goto done;  /* protobuf merges a message given twice */
            value = any_value(d, a, i, depth);
            if (value == NULL)
                goto done;
        } else if (skip(d, &i, tag, end, KV_FIELDS) < 0) {
            goto done;
        }
    }
    r = PyDict_SetItem(out, key != NULL ? key : EmptyStr, value != NULL ? value : Py_None);
done:
    Py_XDECREF(key);
    Py_XDECREF(value);
    return r;
}

