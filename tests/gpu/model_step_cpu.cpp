// model_step::train on the CPU, for model_test.cu to compare the GPU's steps with.
#include <attn/cpu.hpp>

#include "model_step.hpp"

template model_step::result model_step::train<attn::cpu>(int, double, void (*)(int));
template model_step::result model_step::train<attn::cpu, attn::bfloat16>(int, double, void (*)(int));
template std::vector<float> model_step::decode<attn::cpu>(int, void (*)(int));
