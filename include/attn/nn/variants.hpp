// The attention variants attn ships (nn/variant.hpp says what a variant is).
#pragma once

#include "variant.hpp"
#include "variants/additive.hpp"
#include "variants/alibi.hpp"
#include "variants/grouped_query.hpp"
#include "variants/one_of.hpp"
#include "variants/restricted.hpp"
