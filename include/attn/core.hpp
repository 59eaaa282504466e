// The core layer: dimensions, shapes, extents, devices and tensors.
#pragma once

#include "core/config.hpp"
#include "core/device.hpp"
#include "core/dim.hpp"
#include "core/error.hpp"
#include "core/extents.hpp"
#include "core/fused_attention.hpp"
#include "core/meta.hpp"
#include "core/primitives.hpp"
#include "core/random.hpp"
#include "core/shape.hpp"
#include "core/tensor.hpp"
#include "core/transfer.hpp"
