// Python bindings of the AOTInductor runner (aitune._C.AotiRunner). module.cc registers the
// base class `Runner` first; this registers AotiRunner as its subclass, so the dispatcher can
// hold any runner through std::shared_ptr<Runner>.
#pragma once

#include <pybind11/pybind11.h>

namespace aitune::python {

void register_aoti_bindings(pybind11::module_& m);

}  // namespace aitune::python
