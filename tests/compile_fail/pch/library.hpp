// The whole library, precompiled once for the cases that include a backend (meson.build).
#include <attn/attn.hpp>
