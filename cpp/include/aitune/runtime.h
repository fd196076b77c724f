// Public entry point of the C++ runtime (docs/reference/native.md#runtime-api): `#include <aitune/runtime.h>`
// after `find_package(aitune)` and linking `aitune::torch`.
#pragma once

#include "runtime/runtime.h"
