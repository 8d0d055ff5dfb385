/* Optional accelerators of the per-record path: runtime/copying.py (object reuse off) and
   runtime/core/arrow_records.py (Arrow columns <-> dict records).

   flat_immutable(value) -> bool: True when `value` is a plain dict whose keys
   and values all have an exact type in IMMUTABLE_TYPES (set once with
   set_immutable_types). Such a record's shallow copy is a deep copy, and no
   copy at all is needed when nothing else references it. The generated chain
   code asks this once per record instead of two Python loops over the
   dict; without a C compiler the package uses those loops (same answers).
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *immutable_types = NULL; /* a frozenset of type objects */

static inline int
is_immutable(PyObject *o)
{
    PyTypeObject *t = Py_TYPE(o);
    if (t == &PyUnicode_Type || t == &PyLong_Type || t == &PyFloat_Type || t == &PyBool_Type || o == Py_None)
        return 1;
    return PySet_Contains(immutable_types, (PyObject *)t);
}

static PyObject *
flat_immutable(PyObject *module, PyObject *value)
{
    PyObject *key, *item;
    Py_ssize_t pos = 0;
    if (!PyDict_CheckExact(value) || immutable_types == NULL)
        Py_RETURN_FALSE;
    while (PyDict_Next(value, &pos, &key, &item)) {
        int r = is_immutable(item);
        if (r > 0)
            r = is_immutable(key);
        if (r < 0)
            return NULL;
        if (r == 0)
            Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

/* flat_refcount(value) -> int: -1 unless flat_immutable(value); else value's reference
   count as seen from the caller (the same number sys.getrefcount(value) gives there: both
   are METH_O builtins whose argument the caller's stack holds). One call answers both
   questions the copy elision asks. */
static PyObject *
flat_refcount(PyObject *module, PyObject *value)
{
    PyObject *flat = flat_immutable(module, value);
    if (flat == NULL)
        return NULL;
    int is_flat = flat == Py_True;
    Py_DECREF(flat);
    return PyLong_FromSsize_t(is_flat ? Py_REFCNT(value) : -1);
}

static PyObject *
set_immutable_types(PyObject *module, PyObject *types)
{
    if (!PyFrozenSet_CheckExact(types)) {
        PyErr_SetString(PyExc_TypeError, "set_immutable_types expects a frozenset of types");
        return NULL;
    }
    Py_INCREF(types);
    Py_XSETREF(immutable_types, types);
    Py_RETURN_NONE;
}

/* records(names, columns, n) -> [n dicts]: row i is {names[j]: columns[j][i]} in the order of
   `names` (a tuple of str), `columns` a list of lists of length n each (Arrow columns as
   Array.to_pylist gives them). A later duplicate name overwrites the value at the first one's
   position, as RecordBatch.to_pylist does. One C loop instead of a dict comprehension per row. */
static PyObject *
records(PyObject *module, PyObject *args)
{
    PyObject *names, *columns, *out;
    Py_ssize_t n, ncols, i, j;
    if (!PyArg_ParseTuple(args, "O!O!n", &PyTuple_Type, &names, &PyList_Type, &columns, &n))
        return NULL;
    ncols = PyTuple_GET_SIZE(names);
    if (PyList_GET_SIZE(columns) != ncols || n < 0) {
        PyErr_SetString(PyExc_ValueError, "records: one column per name, n >= 0");
        return NULL;
    }
    for (j = 0; j < ncols; j++) {
        PyObject *col = PyList_GET_ITEM(columns, j);
        if (!PyList_CheckExact(col) || PyList_GET_SIZE(col) != n) {
            PyErr_SetString(PyExc_ValueError, "records: every column a list of n values");
            return NULL;
        }
    }
    out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
#if PY_VERSION_HEX < 0x030D0000
        PyObject *d = _PyDict_NewPresized(ncols);
#else
        PyObject *d = PyDict_New();
#endif
        if (d == NULL)
            goto fail;
        PyList_SET_ITEM(out, i, d);
        for (j = 0; j < ncols; j++) {
            if (PyDict_SetItem(d, PyTuple_GET_ITEM(names, j), PyList_GET_ITEM(PyList_GET_ITEM(columns, j), i)) < 0)
                goto fail;
        }
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* columns(records, names) -> [one list per name of the records' values], or None when a record
   is not a plain dict with exactly the keys `names` (a tuple): the caller then names it. One C
   pass over the records instead of a shape check and one itemgetter pass per name. */
static PyObject *
columns(PyObject *module, PyObject *args)
{
    PyObject *recs, *names, *cols;
    Py_ssize_t n, ncols, i, j;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &recs, &PyTuple_Type, &names))
        return NULL;
    n = PyList_GET_SIZE(recs);
    ncols = PyTuple_GET_SIZE(names);
    cols = PyList_New(ncols);
    if (cols == NULL)
        return NULL;
    for (j = 0; j < ncols; j++) {
        PyObject *col = PyList_New(n);
        if (col == NULL)
            goto fail;
        PyList_SET_ITEM(cols, j, col);
    }
    for (i = 0; i < n; i++) {
        PyObject *rec = PyList_GET_ITEM(recs, i);
        if (!PyDict_CheckExact(rec) || PyDict_GET_SIZE(rec) != ncols)
            goto bad_shape;
        Py_INCREF(rec); /* a key's __eq__ may run Python code */
        for (j = 0; j < ncols; j++) {
            PyObject *v = PyDict_GetItemWithError(rec, PyTuple_GET_ITEM(names, j));
            if (v == NULL) {
                Py_DECREF(rec);
                if (PyErr_Occurred())
                    goto fail;
                goto bad_shape;
            }
            Py_INCREF(v);
            PyList_SET_ITEM(PyList_GET_ITEM(cols, j), i, v);
        }
        Py_DECREF(rec);
        if (PyList_GET_SIZE(recs) != n) { /* changed under us by a key's __eq__: let Python decide */
            goto bad_shape;
        }
    }
    return cols;
bad_shape:
    Py_DECREF(cols);
    Py_RETURN_NONE;
fail:
    Py_DECREF(cols);
    return NULL;
}

static PyMethodDef methods[] = {
    {"records", records, METH_VARARGS, "records(names, columns, n): the n rows of the columns as dicts."},
    {"columns", columns, METH_VARARGS,
     "columns(records, names): per name the records' values, or None when a record does not have exactly those keys."},
    {"flat_immutable", flat_immutable, METH_O,
     "True when value is a dict whose keys and values are all of immutable scalar types."},
    {"flat_refcount", flat_refcount, METH_O,
     "-1 unless flat_immutable(value), else value's reference count as sys.getrefcount gives it."},
    {"set_immutable_types", set_immutable_types, METH_O, "Set the frozenset of immutable scalar types."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_flatcheck", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__flatcheck(void)
{
    return PyModule_Create(&module);
}
