// Bindings of the dispatcher (dispatcher.h) and the dispatch core's input rule
// (docs/reference/dispatch.md#input-check).
#pragma once

#include <pybind11/pybind11.h>

namespace aitune::python {

// Adds ShapeRange, InputRule and Dispatcher to `m`; needs Runner registered first.
void register_dispatch_bindings(pybind11::module_& m);

}  // namespace aitune::python
