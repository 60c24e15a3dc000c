/* _fastcall.c — ringo.torch's blocking all-reduce in C: what dist.all_reduce(t) costs on top of
 * ringoAllReduce, without the Python frames. Tested by python/tests/test_torch_fastcall.py.
 *
 * A ProcessGroupRingo keeps one AllReduce object as its `allreduce` attribute. Called by
 * torch.distributed.all_reduce itself (its code object is checked), blocking, on one contiguous
 * CPU tensor whose dtype and op ringo has, with nothing queued on the group's worker, it calls
 * ringoAllReduce on the caller's thread with the GIL released and returns None, which that
 * function documents as "the backend synced"; a failure raises ringo.Error there. Every other
 * call goes to the Python method unchanged. The C function comes from ctypes as an address, so
 * this module links nothing and uses the very libringo that ringo._lib loaded. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <stddef.h>
#include <stdint.h>

typedef int (*all_reduce_fn)(const void *, void *, size_t, int, int, void *, void *);

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    all_reduce_fn call;      /* ringoAllReduce */
    PyObject *general;       /* the group's Python allreduce, bound */
    PyObject *dist_code;     /* torch.distributed.all_reduce's code object */
    PyObject *comm;          /* the ringo.Comm: its _h is read on every call (None once destroyed) */
    PyObject *worker;        /* the group's Worker: _pending and _running */
    PyObject *dtype_codes;   /* torch.dtype -> ringoDataType_t */
    PyObject *op_codes;      /* ReduceOp.RedOpType value -> ringoRedOp_t */
    PyObject *raise_error;   /* raise_error(code, handle): raises the ringo.Error */
} AllReduce;

static PyObject *s_asyncOp, *s_reduceOp, *s_op, *s_value, *s_dtype, *s_is_cpu, *s_is_contiguous,
    *s_is_neg, *s_numel, *s_data_ptr, *s_pending, *s_running, *s_acquire, *s_release, *s_h;

/* The attribute as a C long, or -1 with no exception left when it is not an int. */
static long long_attr(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) {
        PyErr_Clear();
        return -1;
    }
    long r = PyLong_Check(v) ? PyLong_AsLong(v) : -1;
    Py_DECREF(v);
    if (r == -1)
        PyErr_Clear();
    return r;
}

/* A method's result as a C long long (-1: failed, nothing left raised). */
static long long call_long(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_CallMethodNoArgs(obj, name);
    if (v == NULL) {
        PyErr_Clear();
        return -1;
    }
    long long r = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (r == -1 && PyErr_Occurred())
        PyErr_Clear();
    return r;
}

static int attr_is_true(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) {
        PyErr_Clear();
        return -1;
    }
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    if (r < 0)
        PyErr_Clear();
    return r;
}

static int caller_is(PyObject *code)
{
    PyFrameObject *f = PyEval_GetFrame(); /* borrowed: the Python frame that called us */
    if (f == NULL)
        return 0;
    PyCodeObject *c = PyFrame_GetCode(f);
    int same = (PyObject *)c == code;
    Py_DECREF(c);
    return same;
}

/* The ringo code a table maps key to, or -1; takes the caller's reference to key. */
static int lookup_code(PyObject *table, PyObject *key)
{
    if (key == NULL) {
        PyErr_Clear();
        return -1;
    }
    PyObject *code = PyDict_GetItemWithError(table, key); /* borrowed */
    Py_DECREF(key);
    if (code == NULL) {
        PyErr_Clear();
        return -1;
    }
    return (int)PyLong_AsLong(code);
}

/* The op's ringo code from opts.reduceOp.op.value, or -1. */
static int op_code(AllReduce *self, PyObject *opts)
{
    PyObject *red = PyObject_GetAttr(opts, s_reduceOp);
    PyObject *kind = red ? PyObject_GetAttr(red, s_op) : NULL;
    PyObject *value = kind ? PyObject_GetAttr(kind, s_value) : NULL;
    Py_XDECREF(red);
    Py_XDECREF(kind);
    return lookup_code(self->op_codes, value);
}

static int dtype_code(AllReduce *self, PyObject *t)
{
    return lookup_code(self->dtype_codes, PyObject_GetAttr(t, s_dtype));
}

/* The communicator handle, or NULL (destroyed, or not a ctypes c_void_p). */
static void *comm_handle(AllReduce *self)
{
    PyObject *h = PyObject_GetAttr(self->comm, s_h);
    if (h == NULL) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *v = h == Py_None ? NULL : PyObject_GetAttr(h, s_value);
    Py_DECREF(h);
    if (v == NULL) {
        PyErr_Clear();
        return NULL;
    }
    void *p = v == Py_None ? NULL : PyLong_AsVoidPtr(v);
    Py_DECREF(v);
    if (p == NULL)
        PyErr_Clear();
    return p;
}

/* Gives the worker's right to run back (a Python lock's release: nothing to report). */
static void give_turn(PyObject *running)
{
    PyObject *r = PyObject_CallMethodNoArgs(running, s_release);
    if (r == NULL)
        PyErr_Clear();
    Py_XDECREF(r);
}

/* Takes the worker's right to run when nothing is queued (as Worker.run_here does): 1 taken,
 * 0 not (the call then goes the Python way and waits its turn there). */
static int take_turn(PyObject *worker, PyObject *running)
{
    if (long_attr(worker, s_pending) != 0)
        return 0;
    PyObject *ok = PyObject_CallMethodOneArg(running, s_acquire, Py_False);
    int got = ok == Py_True;
    Py_XDECREF(ok);
    if (ok == NULL)
        PyErr_Clear();
    if (!got)
        return 0;
    if (long_attr(worker, s_pending) != 0) { /* submitted before we held it: that work runs first */
        give_turn(running);
        return 0;
    }
    return 1;
}

/* 1 ran (result in *rc), 0 not this call. */
static int try_fast(AllReduce *self, PyObject *tensors, PyObject *opts, int *rc, void **handle)
{
    if (!PyList_CheckExact(tensors) || PyList_GET_SIZE(tensors) != 1)
        return 0;
    if (attr_is_true(opts, s_asyncOp) != 0)
        return 0;
    PyObject *t = PyList_GET_ITEM(tensors, 0);
    int dt = dtype_code(self, t), op = op_code(self, opts);
    if (dt < 0 || op < 0 || attr_is_true(t, s_is_cpu) != 1)
        return 0;
    PyObject *contig = PyObject_CallMethodNoArgs(t, s_is_contiguous);
    int is_contig = contig == Py_True;
    Py_XDECREF(contig);
    if (contig == NULL)
        PyErr_Clear();
    PyObject *neg = PyObject_CallMethodNoArgs(t, s_is_neg); /* a negative view's memory holds minus its values */
    int plain = neg == Py_False;
    Py_XDECREF(neg);
    if (neg == NULL)
        PyErr_Clear();
    long long n = call_long(t, s_numel);
    if (!is_contig || !plain || n < 0)
        return 0;
    void *p = NULL;
    if (n > 0) {
        PyObject *ptr = PyObject_CallMethodNoArgs(t, s_data_ptr);
        p = ptr ? PyLong_AsVoidPtr(ptr) : NULL;
        Py_XDECREF(ptr);
        if (p == NULL) {
            PyErr_Clear();
            return 0;
        }
    }
    void *h = comm_handle(self);
    if (h == NULL)
        return 0;
    PyObject *running = PyObject_GetAttr(self->worker, s_running);
    if (running == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (!take_turn(self->worker, running)) {
        Py_DECREF(running);
        return 0;
    }
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = self->call(p, p, (size_t)n, dt, op, h, NULL);
    Py_END_ALLOW_THREADS
    give_turn(running);
    Py_DECREF(running);
    *rc = r;
    *handle = h;
    return 1;
}

static PyObject *allreduce_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    AllReduce *self = (AllReduce *)callable;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    int rc = 0;
    void *h = NULL;
    if (kwnames == NULL && n == 2 && caller_is(self->dist_code) && try_fast(self, args[0], args[1], &rc, &h)) {
        if (rc == 0)
            Py_RETURN_NONE;
        PyObject *r = PyObject_CallFunction(self->raise_error, "iN", rc, PyLong_FromVoidPtr(h));
        Py_XDECREF(r);
        if (r != NULL) /* raise_error must raise; a return is a bug of ours, still an error */
            PyErr_Format(PyExc_RuntimeError, "ringo: ringoAllReduce failed with %d", rc);
        return NULL;
    }
    return PyObject_Vectorcall(self->general, args, nargsf, kwnames);
}

static int allreduce_init(AllReduce *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"call", "general", "dist_code", "comm", "worker", "dtype_codes", "op_codes",
                            "raise_error", NULL};
    unsigned long long addr;
    PyObject *general, *dist_code, *comm, *worker, *dtype_codes, *op_codes, *raise_error;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "KOOOOO!O!O:AllReduce", names, &addr, &general, &dist_code,
                                     &comm, &worker, &PyDict_Type, &dtype_codes, &PyDict_Type, &op_codes,
                                     &raise_error))
        return -1;
    if (addr == 0 || !PyCallable_Check(general) || !PyCallable_Check(raise_error)) {
        PyErr_SetString(PyExc_ValueError, "AllReduce: a null function address or an argument that is not callable");
        return -1;
    }
    self->call = (all_reduce_fn)(uintptr_t)addr;
    PyObject *objs[] = {general, dist_code, comm, worker, dtype_codes, op_codes, raise_error};
    PyObject **slots[] = {&self->general, &self->dist_code, &self->comm, &self->worker, &self->dtype_codes,
                          &self->op_codes, &self->raise_error};
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) {
        Py_INCREF(objs[i]);
        Py_XSETREF(*slots[i], objs[i]);
    }
    self->vectorcall = allreduce_vectorcall;
    return 0;
}

/* The group holds this object and this object holds the group's bound method: a cycle the
 * collector must see. */
static int allreduce_traverse(AllReduce *self, visitproc visit, void *arg)
{
    Py_VISIT(self->general);
    Py_VISIT(self->dist_code);
    Py_VISIT(self->comm);
    Py_VISIT(self->worker);
    Py_VISIT(self->dtype_codes);
    Py_VISIT(self->op_codes);
    Py_VISIT(self->raise_error);
    return 0;
}

static int allreduce_clear(AllReduce *self)
{
    Py_CLEAR(self->general);
    Py_CLEAR(self->dist_code);
    Py_CLEAR(self->comm);
    Py_CLEAR(self->worker);
    Py_CLEAR(self->dtype_codes);
    Py_CLEAR(self->op_codes);
    Py_CLEAR(self->raise_error);
    return 0;
}

static void allreduce_dealloc(AllReduce *self)
{
    PyObject_GC_UnTrack(self);
    allreduce_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *allreduce_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    return PyVectorcall_Call(self, args, kwargs);
}

static PyTypeObject AllReduceType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ringo.torch._fastcall.AllReduce",
    .tp_doc = "A process group's allreduce: dist.all_reduce's blocking call in C, the rest in Python.",
    .tp_basicsize = sizeof(AllReduce),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(AllReduce, vectorcall),
    .tp_call = allreduce_call,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)allreduce_init,
    .tp_traverse = (traverseproc)allreduce_traverse,
    .tp_clear = (inquiry)allreduce_clear,
    .tp_dealloc = (destructor)allreduce_dealloc,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ringo.torch._fastcall",
    "dist.all_reduce's blocking call on a ringo process group, in C.", -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fastcall(void)
{
    struct { PyObject **slot; const char *name; } strs[] = {
        {&s_asyncOp, "asyncOp"}, {&s_reduceOp, "reduceOp"}, {&s_op, "op"}, {&s_value, "value"},
        {&s_dtype, "dtype"}, {&s_is_cpu, "is_cpu"}, {&s_is_contiguous, "is_contiguous"}, {&s_is_neg, "is_neg"}, {&s_numel, "numel"},
        {&s_data_ptr, "data_ptr"}, {&s_pending, "_pending"}, {&s_running, "_running"}, {&s_acquire, "acquire"},
        {&s_release, "release"}, {&s_h, "_h"},
    };
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        if ((*strs[i].slot = PyUnicode_InternFromString(strs[i].name)) == NULL)
            return NULL;
    if (PyType_Ready(&AllReduceType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&AllReduceType);
    if (PyModule_AddObject(m, "AllReduce", (PyObject *)&AllReduceType) < 0) {
        Py_DECREF(&AllReduceType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
