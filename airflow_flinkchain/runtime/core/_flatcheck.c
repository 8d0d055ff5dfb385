/* Optional accelerator for runtime/copying.py (object reuse off).

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

static PyMethodDef methods[] = {
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
