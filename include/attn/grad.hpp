// Reverse-mode differentiation: variables, parameters, the tape, and the differentiable
// operations of the Transformer, each with its vector-Jacobian rule written in expressions.
#pragma once

#include "grad/cast.hpp"
#include "grad/dropout.hpp"
#include "grad/elementwise.hpp"
#include "grad/embedding.hpp"
#include "grad/fused_attention.hpp"
#include "grad/heads.hpp"
#include "grad/layer_norm.hpp"
#include "grad/linear.hpp"
#include "grad/map.hpp"
#include "grad/parameter.hpp"
#include "grad/product.hpp"
#include "grad/softmax.hpp"
#include "grad/tape.hpp"
#include "grad/variable.hpp"
