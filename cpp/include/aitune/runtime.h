// Public entry point of the C++ runtime (SPEC §11.1): `#include <aitune/runtime.h>` after
// `find_package(aitune)` and linking `aitune::torch`.
#pragma once

#include "runtime/runtime.h"
