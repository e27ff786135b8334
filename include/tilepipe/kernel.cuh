// Renamed host.cuh (it is the host side's umbrella, not a kernel; CHANGELOG.md): this header
// keeps old includes compiling.
#pragma once

#include "host.cuh"
