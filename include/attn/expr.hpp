// The expression layer: lazy, shape-checked nodes over tensor views.
#pragma once

#include "expr/affine.hpp"
#include "expr/bounds.hpp"
#include "expr/broadcast.hpp"
#include "expr/contract.hpp"
#include "expr/derivative.hpp"
#include "expr/dropout_mask.hpp"
#include "expr/element.hpp"
#include "expr/elementwise.hpp"
#include "expr/expression.hpp"
#include "expr/iota.hpp"
#include "expr/layout.hpp"
#include "expr/ops.hpp"
#include "expr/reduce.hpp"
#include "expr/slice.hpp"
