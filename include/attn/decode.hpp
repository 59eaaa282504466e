// Translation (paper §6.1): greedy and beam search, over a Transformer with a key/value cache.
#pragma once

#include "decode/beam.hpp"
#include "decode/greedy.hpp"
#include "decode/kv_cache.hpp"
#include "decode/recompute.hpp"
#include "decode/row_scan.hpp"
#include "decode/score.hpp"
#include "decode/search.hpp"
