/* OTLP protobuf bytes -> RecordedSpan: the wire reader (wire.py, wire_format.py) in C.
 *
 * The same one pass over an ExportTraceServiceRequest, the same usual forms read and the same
 * others given up on: read(data) returns the spans (in request order; the caller sorts them by
 * end time), or None for anything wire.py would give up on (then protobuf reads the request and
 * names the error). Each function here mirrors the one of the same name in wire.py, and each
 * in _wire_format.c the one in wire_format.py (values: _array and _kvlist; any_value: _value);
 * tests/test_replay_wire.py reads every form, and thousands of corruptions, with both and with
 * protobuf.
 *
 * Conventions: positions are Py_ssize_t offsets into one buffer, every read is checked against
 * the end of the message it is in, and a function returns -1 (or NULL) to give up, with or
 * without a Python error set (read() tells a MemoryError, which it raises, from the rest).
 * The GIL is held throughout; the key and value caches are only touched under it.
 */
#include "_wire_format.h"

#define REMOTE_PARENT 0x300  /* SpanFlags: HAS_IS_REMOTE | IS_REMOTE */

/* the fields of each message (see _wire_format.c) */
static const char SPAN_FIELDS[] = "-xxsxxxxxxvxvLvxx";
static const char EVENT_FIELDS[] = "-xxxv";
static const char STATUS_FIELDS[] = "--xx";
static const char RESOURCE_FIELDS[] = "-xvE";
static const char RESOURCE_SPANS_FIELDS[] = "-xxs";
static const char SCOPE_SPANS_FIELDS[] = "-Sxs";

/* the classes and shared values of spanview.py, given by configure() */
static PyObject *SpanType, *EventType, *ResourceType, *StatusType, *ScopeType, *ScopeAttr;
static PyTypeObject *ContextType;
static PyObject *Kinds[6];         /* by OTLP kind: 0 unspecified (INTERNAL), 1..5 */
static PyObject *Statuses[3];      /* the shared RecordedStatus of each OTLP code */
static PyObject *StatusCodes[3];   /* their StatusCode */
static PyObject *EmptyTuple;

/* ---- the messages (wire.py) ---- */

static PyObject *context(PyObject *trace_id, uint64_t span_id, int remote) {
    /* a RecordedContext (a tuple subclass) as tuple.__new__ makes one */
    PyObject *sid = PyLong_FromUnsignedLongLong(span_id);
    if (sid == NULL)
        return NULL;
    PyObject *ctx = ContextType->tp_alloc(ContextType, 3);
    if (ctx == NULL) {
        Py_DECREF(sid);
        return NULL;
    }
    PyTuple_SET_ITEM(ctx, 0, Py_NewRef(trace_id));
    PyTuple_SET_ITEM(ctx, 1, sid);
    PyTuple_SET_ITEM(ctx, 2, Py_NewRef(remote ? Py_True : Py_False));
    PyObject_GC_UnTrack(ctx);  /* ints only: the cyclic GC would untrack it at its first pass */
    return ctx;
}

static PyObject *event(Buf d, Py_ssize_t i, Py_ssize_t end) {
    PyObject *name = NULL, *attrs = PyDict_New(), *out = NULL;
    uint64_t tag, when = 0;
    Py_ssize_t a;
    if (attrs == NULL)
        return NULL;
    while (i < end) {
        if (read_tag(d, &i, end, &tag) < 0)
            goto done;
        if (tag == 0x1A) {
            if (length(d, &i, end, &a) < 0 || key_value(d, a, i, attrs, 0) < 0)
                goto done;
        } else if (tag == 0x09) {
            if (8 > end - i)
                goto done;
            when = fixed64(d, i);
            i += 8;
        } else if (tag == 0x12) {
            if (length(d, &i, end, &a) < 0)
                goto done;
            Py_XSETREF(name, utf8(d, a, i));
            if (name == NULL)
                goto done;
        } else if (skip(d, &i, tag, end, EVENT_FIELDS) < 0) {
            goto done;
        }
    }
    PyObject *ts = PyLong_FromUnsignedLongLong(when);
    if (ts != NULL) {
        out = PyObject_CallFunctionObjArgs(EventType, name != NULL ? name : EmptyStr, attrs, ts, NULL);
        Py_DECREF(ts);
    }
done:
    Py_XDECREF(name);
    Py_DECREF(attrs);
    return out;
}

static PyObject *status(Buf d, Py_ssize_t i, Py_ssize_t end) {
    PyObject *message = NULL, *out = NULL;
    uint64_t tag, code = 0;
    Py_ssize_t a;
    while (i < end) {
        if (read_tag(d, &i, end, &tag) < 0)
            goto done;
        if (tag == 0x18) {
            if (varint(d, &i, end, &code) < 0)
                goto done;
        } else if (tag == 0x12) {
            if (length(d, &i, end, &a) < 0)
                goto done;
            Py_XSETREF(message, utf8(d, a, i));
            if (message == NULL)
                goto done;
        } else if (skip(d, &i, tag, end, STATUS_FIELDS) < 0) {  /* 1 is reserved */
            goto done;
        }
    }
    if (code > 2)
        goto done;  /* an unknown code: the reference names it */
    if (message != NULL && PyUnicode_GET_LENGTH(message) > 0)
        out = PyObject_CallFunctionObjArgs(StatusType, StatusCodes[code], message, NULL);
    else
        out = Py_NewRef(Statuses[code]);
done:
    Py_XDECREF(message);
    return out;
}

/* the trace id read last, as bytes and int: the spans of a trace come together */
typedef struct {
    unsigned char raw[16];
    PyObject *id;
} LastTrace;

static PyObject *span(Buf d, Py_ssize_t i, Py_ssize_t end, PyObject *resource, PyObject *parents, LastTrace *last) {
    Py_ssize_t tid = 0, sid = 0, pid = 0, tid_len = 0, sid_len = 0, pid_len = 0, a;
    uint64_t tag, kind = 0, start = 0, stop = 0, flags = 0;
    PyObject *name = NULL, *attrs = PyDict_New(), *events = NULL, *status_ = NULL;
    PyObject *ctx = NULL, *parent = NULL, *out = NULL;
    if (attrs == NULL)
        return NULL;
    while (i < end) {
        if (read_tag(d, &i, end, &tag) < 0)
            goto done;
        switch (tag) {
        case 0x4A:  /* attributes: by far the most fields */
            if (length(d, &i, end, &a) < 0 || key_value(d, a, i, attrs, 0) < 0)
                goto done;
            break;
        case 0x0A:
            if (length(d, &i, end, &tid) < 0)
                goto done;
            tid_len = i - tid;
            break;
        case 0x12:
            if (length(d, &i, end, &sid) < 0)
                goto done;
            sid_len = i - sid;
            break;
        case 0x22:
            if (length(d, &i, end, &pid) < 0)
                goto done;
            pid_len = i - pid;
            break;
        case 0x2A:
            if (length(d, &i, end, &a) < 0)
                goto done;
            Py_XSETREF(name, utf8(d, a, i));
            if (name == NULL)
                goto done;
            break;
        case 0x30:
            if (varint(d, &i, end, &kind) < 0)
                goto done;
            break;
        case 0x39:
        case 0x41:
            if (8 > end - i)
                goto done;
            *(tag == 0x39 ? &start : &stop) = fixed64(d, i);
            i += 8;
            break;
        case 0x5A: {
            if (length(d, &i, end, &a) < 0)
                goto done;
            if (events == NULL && (events = PyList_New(0)) == NULL)
                goto done;
            PyObject *e = event(d, a, i);
            if (e == NULL || PyList_Append(events, e) < 0) {
                Py_XDECREF(e);
                goto done;
            }
            Py_DECREF(e);
            break;
        }
        case 0x7A:
            if (status_ != NULL || length(d, &i, end, &a) < 0)
                goto done;  /* a status given twice: protobuf merges them */
            if ((status_ = status(d, a, i)) == NULL)
                goto done;
            break;
        case 0x85:  /* flags: field 16, fixed32 */
            if (4 > end - i)
                goto done;
            flags = (uint64_t)d[i] | (uint64_t)d[i + 1] << 8 | (uint64_t)d[i + 2] << 16 | (uint64_t)d[i + 3] << 24;
            i += 4;
            break;
        default:  /* trace_state, links, dropped counts */
            if (skip(d, &i, tag, end, SPAN_FIELDS) < 0)
                goto done;
        }
    }
    if (tid_len != 16 || sid_len != 8 || (pid_len && pid_len != 8) || kind > 5)
        goto done;
    if (last->id == NULL || memcmp(last->raw, d + tid, 16) != 0) {  /* a new trace id: checked once */
        static const unsigned char zero[16];
        if (memcmp(d + tid, zero, 16) == 0)
            goto done;
        PyObject *id = _PyLong_FromByteArray(d + tid, 16, 0, 0);  /* big-endian, unsigned */
        if (id == NULL)
            goto done;
        Py_XSETREF(last->id, id);
        memcpy(last->raw, d + tid, 16);
    }
    uint64_t span_id = be64(d, sid);
    if (span_id == 0)
        goto done;
    if ((ctx = context(last->id, span_id, 0)) == NULL)
        goto done;
    if (pid_len) {
        uint64_t parent_id = be64(d, pid);
        if ((flags & REMOTE_PARENT) == REMOTE_PARENT) {
            parent = context(last->id, parent_id, 1);
        } else {  /* one context per parent within a request, as the other readers share them */
            PyObject *key = PyLong_FromUnsignedLongLong(parent_id);
            if (key == NULL)
                goto done;
            parent = PyDict_GetItemWithError(parents, key);  /* borrowed */
            int same = 0;
            if (parent != NULL) {
                same = PyObject_RichCompareBool(PyTuple_GET_ITEM(parent, 0), last->id, Py_EQ);
                if (same < 0) {
                    Py_DECREF(key);
                    parent = NULL;
                    goto done;
                }
            } else if (PyErr_Occurred()) {
                Py_DECREF(key);
                goto done;
            }
            if (same) {
                Py_INCREF(parent);
            } else if ((parent = context(last->id, parent_id, 0)) == NULL || PyDict_SetItem(parents, key, parent) < 0) {
                Py_DECREF(key);
                goto done;
            }
            Py_DECREF(key);
        }
        if (parent == NULL)
            goto done;
    }
    PyObject *ts_start = PyLong_FromUnsignedLongLong(start), *ts_stop = PyLong_FromUnsignedLongLong(stop);
    if (ts_start != NULL && ts_stop != NULL) {
        PyObject *ev = events != NULL ? PyList_AsTuple(events) : Py_NewRef(EmptyTuple);
        if (ev != NULL) {
            PyObject *args[10] = {name != NULL ? name : EmptyStr, ctx, parent != NULL ? parent : Py_None,
                                  Kinds[kind], ts_start, ts_stop, status_ != NULL ? status_ : Statuses[0],
                                  attrs, ev, resource};
            out = PyObject_Vectorcall(SpanType, args, 10, NULL);
            Py_DECREF(ev);
        }
    }
    Py_XDECREF(ts_start);
    Py_XDECREF(ts_stop);
done:
    Py_XDECREF(name);
    Py_DECREF(attrs);
    Py_XDECREF(events);
    Py_XDECREF(status_);
    Py_XDECREF(ctx);
    Py_XDECREF(parent);
    return out;
}

/* An InstrumentationScope's (name, version) as a RecordedScope; NULL without an error when it has no name. */
static PyObject *scope_of(Buf d, Py_ssize_t i, Py_ssize_t end) {
    PyObject *name = NULL, *version = NULL, *out = NULL;
    uint64_t tag;
    Py_ssize_t a;
    while (i < end) {
        if (read_tag(d, &i, end, &tag) < 0)
            goto done;
        if (tag == 0x0A || tag == 0x12) {
            if (length(d, &i, end, &a) < 0)
                goto done;
            PyObject *text = utf8(d, a, i);
            if (text == NULL)
                goto done;
            Py_XSETREF(*(tag == 0x0A ? &name : &version), text);
        } else if (skip(d, &i, tag, end, ONE_FIELD) < 0) {  /* attributes, dropped count (checked already) */
            goto done;
        }
    }
    if (name != NULL && PyUnicode_GET_LENGTH(name) > 0)
        out = PyObject_CallFunctionObjArgs(ScopeType, name, version != NULL ? version : EmptyStr, NULL);
done:
    Py_XDECREF(name);
    Py_XDECREF(version);
    return out;
}

static int resource_spans(Buf d, Py_ssize_t start, Py_ssize_t end, PyObject *out) {
    PyObject *attrs = PyDict_New(), *resource = NULL, *parents = NULL, *scope = NULL;
    int seen = 0, r = -1;
    uint64_t tag;
    Py_ssize_t i = start, a, b;
    LastTrace last = {{0}, NULL};
    if (attrs == NULL)
        return -1;
    while (i < end) {  /* the resource may come after its spans: read it first */
        if (read_tag(d, &i, end, &tag) < 0)
            goto done;
        if (tag == 0x12) {
            if (length(d, &i, end, &a) < 0)
                goto done;
        } else if (tag == 0x0A) {
            if (seen || length(d, &i, end, &a) < 0)
                goto done;
            seen = 1;
            while (a < i) {
                if (read_tag(d, &a, i, &tag) < 0)
                    goto done;
                if (tag == 0x0A) {  /* attributes; else the dropped count, entity_refs */
                    if (length(d, &a, i, &b) < 0 || key_value(d, b, a, attrs, 0) < 0)
                        goto done;
                } else if (skip(d, &a, tag, i, RESOURCE_FIELDS) < 0) {
                    goto done;
                }
            }
        } else if (skip(d, &i, tag, end, RESOURCE_SPANS_FIELDS) < 0) {  /* schema_url */
            goto done;
        }
    }
    if ((resource = PyObject_CallOneArg(ResourceType, attrs)) == NULL || (parents = PyDict_New()) == NULL)
        goto done;
    for (i = start; i < end;) {  /* then its ScopeSpans (the fields were checked above) */
        if (read_tag(d, &i, end, &tag) < 0)
            goto done;
        if (tag != 0x12) {  /* the resource (read), schema_url */
            if ((tag == 0x0A ? length(d, &i, end, &a) : skip(d, &i, tag, end, RESOURCE_SPANS_FIELDS)) < 0)
                goto done;
            continue;
        }
        Py_ssize_t stop, first = PyList_GET_SIZE(out);
        Py_CLEAR(scope);
        if (length(d, &i, end, &a) < 0)
            goto done;
        for (stop = i; a < stop;) {
            if (read_tag(d, &a, stop, &tag) < 0)
                goto done;
            if (tag == 0x0A && ScopeType != NULL) {  /* the instrumentation scope: checked, then its name read */
                Py_ssize_t from = a;
                if (skip(d, &a, tag, stop, SCOPE_SPANS_FIELDS) < 0 || length(d, &from, a, &b) < 0)
                    goto done;
                Py_XSETREF(scope, scope_of(d, b, from));
                if (scope == NULL && PyErr_Occurred())
                    goto done;
            } else if (tag == 0x12) {
                if (length(d, &a, stop, &b) < 0)
                    goto done;
                PyObject *sp = span(d, b, a, resource, parents, &last);
                if (sp == NULL || PyList_Append(out, sp) < 0) {
                    Py_XDECREF(sp);
                    goto done;
                }
                Py_DECREF(sp);
            } else if (skip(d, &a, tag, stop, SCOPE_SPANS_FIELDS) < 0) {  /* scope, schema_url */
                goto done;
            }
        }
        if (scope != NULL) {
            for (Py_ssize_t k = first; k < PyList_GET_SIZE(out); k++) {
                if (PyObject_SetAttr(PyList_GET_ITEM(out, k), ScopeAttr, scope) < 0)
                    goto done;
            }
        }
    }
    r = 0;
done:
    Py_XDECREF(scope);
    Py_DECREF(attrs);
    Py_XDECREF(resource);
    Py_XDECREF(parents);
    Py_XDECREF(last.id);
    return r;
}

/* ---- the module ---- */

static PyObject *read_request(PyObject *module, PyObject *arg) {
    (void)module;
    Py_buffer view;
    if (SpanType == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_wire_c.configure() has not been called");
        return NULL;
    }
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Buf d = view.buf;
    Py_ssize_t i = 0, end = view.len, a;
    uint64_t tag;
    PyObject *out = PyList_New(0);
    int ok = out != NULL;
    while (ok && i < end) {
        if (read_tag(d, &i, end, &tag) < 0)
            ok = 0;
        else if (tag == 0x0A)
            ok = length(d, &i, end, &a) == 0 && resource_spans(d, a, i, out) == 0;
        else
            ok = skip(d, &i, tag, end, ONE_FIELD) == 0;
    }
    PyBuffer_Release(&view);
    if (ok)
        return out;
    Py_XDECREF(out);
    if (PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_MemoryError))
            return NULL;
        PyErr_Clear();  /* bad UTF-8, or a class's constructor refusing a value: protobuf names it */
    }
    Py_RETURN_NONE;
}

static int take(PyObject *seq, PyObject **into, Py_ssize_t n, const char *what) {
    if (!PyTuple_Check(seq) || PyTuple_GET_SIZE(seq) != n) {
        PyErr_Format(PyExc_TypeError, "%s: a tuple of %zd expected", what, n);
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++)
        Py_XSETREF(into[k], Py_NewRef(PyTuple_GET_ITEM(seq, k)));
    return 0;
}

static PyObject *configure(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *span_t, *context_t, *event_t, *resource_t, *status_t, *kinds, *statuses, *codes, *scope_t = NULL;
    if (!PyArg_ParseTuple(args, "OO!OOOOOO|O:configure", &span_t, &PyType_Type, &context_t, &event_t, &resource_t,
                          &status_t, &kinds, &statuses, &codes, &scope_t))
        return NULL;
    if (ScopeAttr == NULL && (ScopeAttr = PyUnicode_InternFromString("_instrumentation_scope")) == NULL)
        return NULL;
    Py_XSETREF(ScopeType, scope_t != NULL ? Py_NewRef(scope_t) : NULL);
    if (!PyType_IsSubtype((PyTypeObject *)context_t, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "configure: the context type must be a tuple subclass");
        return NULL;
    }
    if (take(kinds, Kinds, 6, "kinds") < 0 || take(statuses, Statuses, 3, "statuses") < 0 ||
        take(codes, StatusCodes, 3, "status codes") < 0)
        return NULL;
    Py_XSETREF(SpanType, Py_NewRef(span_t));
    Py_XSETREF(ContextType, (PyTypeObject *)Py_NewRef(context_t));
    Py_XSETREF(EventType, Py_NewRef(event_t));
    Py_XSETREF(ResourceType, Py_NewRef(resource_t));
    Py_XSETREF(StatusType, Py_NewRef(status_t));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"read", read_request, METH_O,
     "read(data) -> list of RecordedSpan, or None: the spans of one serialised ExportTraceServiceRequest, in "
     "request order; None when it holds anything but the usual forms (then protobuf reads it)."},
    {"configure", configure, METH_VARARGS,
     "configure(span, context, event, resource, status, kinds, statuses, status_codes[, scope]): the classes to build."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_wire_c", "The OTLP protobuf wire reader in C (see wire.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__wire_c(void) {
    EmptyTuple = PyTuple_New(0);
    if (wire_format_init() < 0 || EmptyTuple == NULL)
        return NULL;
    return PyModule_Create(&module_def);
}
