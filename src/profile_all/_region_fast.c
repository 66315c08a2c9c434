/* The enter and exit of `pa.region` in C: the base class of regions.Region.
 *
 * Why C: a `with` on an object whose __enter__ and __exit__ are Python functions costs
 * about 0.25 µs on a small VM before they do anything; issue 15 asks for a nested region
 * at <= 0.5 µs and >= 20x under torch's record_function (6-12 µs). Here an enter and exit
 * under the region log is two clock reads and three stores into the calling thread's
 * buffer: about 0.1 µs in all. regions.py holds the same paths in Python, used where this
 * module was not built (no compiler at install) or PROFILE_ALL_NO_EXTENSION is set.
 *
 * What this module keeps, as region_log.py describes it: per thread, a buffer of doubles
 * where an enter is the region's code (negative) then its clock reading, and an exit is
 * its clock reading; `drain()` hands every buffer's content to RegionLog.flush, which
 * writes the journal. The clock is CLOCK_MONOTONIC, time.perf_counter's on Linux (checked
 * at import by regions.py before this module is used).
 *
 * Every function here runs with the GIL held: the buffers need no lock of their own.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <time.h>

#define LOG 1    /* append each enter and exit to the calling thread's buffer */
#define HOOKS 2  /* call the Python object's _enter_hooks / _exit_hooks */

typedef struct Buffer {
    double *data;
    Py_ssize_t length, capacity;
    long number;  /* the thread's number in this log, in the order threads first entered */
    struct Buffer *next;
} Buffer;

static int mode = 0;
static double flush_due = 1e300;
static PyObject *flush_callback = NULL;  /* returns when the next flush is due */
static unsigned long generation = 1;     /* one a log: a thread's buffer of an older log is dropped */
static Buffer *buffers = NULL;
static long thread_count = 0;
static double first_enter = -1.0;

static _Thread_local Buffer *thread_buffer = NULL;
static _Thread_local unsigned long thread_generation = 0;

static PyObject *enter_hooks_name, *exit_hooks_name;

static inline double
now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static Buffer *
new_buffer(double at)
{
    Buffer *buffer = PyMem_RawCalloc(1, sizeof(Buffer));
    if (buffer == NULL)
        return NULL;
    buffer->number = thread_count++;
    buffer->next = buffers;
    buffers = buffer;
    if (first_enter < 0)
        first_enter = at;
    thread_buffer = buffer;
    thread_generation = generation;
    return buffer;
}

static int
append(Buffer *buffer, double value)
{
    if (buffer->length == buffer->capacity) {
        Py_ssize_t capacity = buffer->capacity ? buffer->capacity * 2 : 4096;
        double *data = PyMem_RawRealloc(buffer->data, capacity * sizeof(double));
        if (data == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        buffer->data = data;
        buffer->capacity = capacity;
    }
    buffer->data[buffer->length++] = value;
    return 0;
}

static void
free_buffers(void)
{
    while (buffers != NULL) {
        Buffer *next = buffers->next;
        PyMem_RawFree(buffers->data);
        PyMem_RawFree(buffers);
        buffers = next;
    }
    thread_count = 0;
    first_enter = -1.0;
    generation++;
}

typedef struct {
    PyObject_HEAD
    double code;  /* -(index of the region's name in region_log.NAMES + 1) */
} Marks;

static PyObject *
marks_enter(Marks *self, PyObject *Py_UNUSED(ignored))
{
    if (mode & HOOKS) {
        PyObject *result = PyObject_CallMethodNoArgs((PyObject *)self, enter_hooks_name);
        if (result == NULL)
            return NULL;
        Py_DECREF(result);
    }
    if (mode & LOG) {
        double at = now();
        Buffer *buffer = thread_generation == generation ? thread_buffer : new_buffer(at);
        if (buffer == NULL)
            return PyErr_NoMemory();
        if (append(buffer, self->code) < 0 || append(buffer, at) < 0)
            return NULL;
    }
    Py_INCREF(self);
    return (PyObject *)self;
}

static int
flush(void)
{
    PyObject *due = PyObject_CallNoArgs(flush_callback);
    if (due == NULL)
        return -1;
    flush_due = PyFloat_AsDouble(due);
    Py_DECREF(due);
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *
marks_exit(Marks *self, PyObject *const *Py_UNUSED(args), Py_ssize_t Py_UNUSED(nargs))
{
    if (mode & LOG) {
        double at = now();
        /* a region entered before the log began has no buffer here: its exit is dropped */
        if (thread_generation == generation && append(thread_buffer, at) < 0)
            return NULL;
        if (at > flush_due && flush_callback != NULL && flush() < 0)
            return NULL;
    }
    if (mode & HOOKS) {
        PyObject *result = PyObject_CallMethodNoArgs((PyObject *)self, exit_hooks_name);
        if (result == NULL)
            return NULL;
        Py_DECREF(result);
    }
    Py_RETURN_NONE;
}

static PyMethodDef marks_methods[] = {
    {"__enter__", (PyCFunction)marks_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))marks_exit, METH_FASTCALL, NULL},
    {NULL},
};

static PyMemberDef marks_members[] = {
    {"code", T_DOUBLE, offsetof(Marks, code), 0, "the region's code in the log"},
    {NULL},
};

static PyTypeObject MarksType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "profile_all._region_fast.Marks",
    .tp_doc = "A region's enter and exit, in C.",
    .tp_basicsize = sizeof(Marks),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_methods = marks_methods,
    .tp_members = marks_members,
};

static PyObject *
configure(PyObject *Py_UNUSED(module), PyObject *args)
{
    int log, hooks;
    double due;
    PyObject *callback;
    if (!PyArg_ParseTuple(args, "ppdO", &log, &hooks, &due, &callback))
        return NULL;
    mode = (log ? LOG : 0) | (hooks ? HOOKS : 0);
    flush_due = due;
    Py_INCREF(callback);
    Py_XSETREF(flush_callback, callback);
    Py_RETURN_NONE;
}

static PyObject *
reset(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(ignored))
{
    free_buffers();
    Py_RETURN_NONE;
}

static PyObject *
drain(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(ignored))
{
    PyObject *batches = PyList_New(0);
    if (batches == NULL)
        return NULL;
    for (Buffer *buffer = buffers; buffer != NULL; buffer = buffer->next) {
        if (buffer->length == 0)
            continue;
        PyObject *batch = Py_BuildValue(
            "(ly#)", buffer->number, (const char *)buffer->data,
            buffer->length * (Py_ssize_t)sizeof(double));
        if (batch == NULL || PyList_Append(batches, batch) < 0) {
            Py_XDECREF(batch);
            Py_DECREF(batches);
            return NULL;
        }
        Py_DECREF(batch);
        buffer->length = 0;
    }
    return batches;
}

static PyObject *
get_first_enter(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(ignored))
{
    if (first_enter < 0)
        Py_RETURN_NONE;
    return PyFloat_FromDouble(first_enter);
}

static PyObject *
clock_now(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(ignored))
{
    return PyFloat_FromDouble(now());
}

static PyMethodDef module_methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(log, hooks, flush_due, flush_callback): what an enter and exit do"},
    {"reset", reset, METH_NOARGS, "drop every thread's buffer: a new log begins"},
    {"drain", drain, METH_NOARGS, "[(thread number, bytes of doubles)], emptying the buffers"},
    {"first_enter", get_first_enter, METH_NOARGS, "when the log's first region was entered"},
    {"now", clock_now, METH_NOARGS, "the clock the buffers hold, in seconds"},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_region_fast", "pa.region's enter and exit in C.", -1,
    module_methods,
};

PyMODINIT_FUNC
PyInit__region_fast(void)
{
    if (PyType_Ready(&MarksType) < 0)
        return NULL;
    enter_hooks_name = PyUnicode_InternFromString("_enter_hooks");
    exit_hooks_name = PyUnicode_InternFromString("_exit_hooks");
    if (enter_hooks_name == NULL || exit_hooks_name == NULL)
        return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL)
        return NULL;
    Py_INCREF(&MarksType);
    if (PyModule_AddObject(module, "Marks", (PyObject *)&MarksType) < 0) {
        Py_DECREF(&MarksType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
